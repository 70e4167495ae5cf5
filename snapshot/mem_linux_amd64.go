package snapshot

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// ReadError reports memory of a tracee that could not be read.
type ReadError struct {
	PID  int
	Addr uint64
	Len  int
	Err  error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read %d bytes at %#x in pid %d: %v", e.Len, e.Addr, e.PID, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// ReadMem fills buf with the tracee's memory at addr. It tries
// process_vm_readv first (one syscall, no file descriptor) and falls back
// to /proc/PID/mem, which can also read pages mapped without PROT_READ.
// A process that died meanwhile gives an error wrapping unix.ESRCH.
func ReadMem(pid int, addr uint64, buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	local := []unix.Iovec{{Base: &buf[0]}}
	local[0].SetLen(len(buf))
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}
	n, err := unix.ProcessVMReadv(pid, local, remote, 0)
	if err == nil && n == len(buf) {
		return nil
	}
	if errors.Is(err, unix.ESRCH) {
		return &ReadError{pid, addr, len(buf), err}
	}
	if err == nil {
		n = 0 // a short read: re-read all of it the slow way
	}
	f, ferr := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if ferr != nil {
		if errors.Is(ferr, os.ErrNotExist) {
			ferr = unix.ESRCH
		}
		return &ReadError{pid, addr, len(buf), ferr}
	}
	defer f.Close()
	if _, rerr := f.ReadAt(buf, int64(addr)); rerr != nil {
		return &ReadError{pid, addr, len(buf), rerr}
	}
	return nil
}
