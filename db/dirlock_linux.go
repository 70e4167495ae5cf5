package db

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// ErrRecordingLive reports a recording directory locked by a ptjit run that
// is still recording into it.
var ErrRecordingLive = errors.New("another ptjit run is recording into this directory")

// LockDir takes the lock of a recording directory: an exclusive flock on
// the directory itself, so the lock adds no file and ends with the process
// that holds it, however it ends. The run that records into dir holds it
// for the whole run; Open takes it for the moment it folds a WAL that a
// killed run left behind. A held lock gives ErrRecordingLive at once.
func LockDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrRecordingLive
		}
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return f, nil
}
