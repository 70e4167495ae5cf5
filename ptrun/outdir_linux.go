package ptrun

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ptjit/ptjit/db"
)

// OutDirError is a recording directory ptjit refuses to use.
type OutDirError struct {
	Dir    string
	Reason string
}

func (e *OutDirError) Error() string { return e.Dir + ": " + e.Reason }

// recordingFiles are the names a ptjit recording directory may hold.
var recordingFiles = map[string]bool{
	"code.db": true, "code.db-wal": true, "code.db-shm": true, "code.db-journal": true,
	"perf.data": true, "perf.data.old": true,
}

// OutDir is a recording directory prepared for a run and locked against a
// second run into it. Release unlocks it.
type OutDir struct {
	Path string
	lock *os.File
}

// Release unlocks the directory (also done by the kernel when ptjit exits).
func (d *OutDir) Release() {
	if d != nil && d.lock != nil {
		d.lock.Close()
		d.lock = nil
	}
}

// PrepareOutDir readies dir for a recording: it creates a missing dir,
// takes the recording directory's lock (db.LockDir: a second run into it
// fails at once), and checks that what is there is
// a ptjit recording and nothing else. A dir is replaced only when it is
// empty or holds a code.db whose meta says ptjit (db.Probe), and beside
// it only files ptjit writes. Anything else is refused with an
// *OutDirError naming the file; nothing is touched then.
func PrepareOutDir(dir string) (*OutDir, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, &OutDirError{dir, unwrapPath(err).Error()}
		}
	case err != nil:
		return nil, &OutDirError{dir, unwrapPath(err).Error()}
	case !st.IsDir():
		return nil, &OutDirError{dir, "not a directory (-o names the recording directory)"}
	}
	lock, err := db.LockDir(dir)
	if err != nil {
		return nil, &OutDirError{dir, unwrapPath(err).Error()}
	}
	od := &OutDir{Path: dir, lock: lock}
	if err := checkRecordingDir(dir); err != nil {
		od.Release()
		return nil, err
	}
	return od, nil
}

// checkRecordingDir refuses a directory holding anything ptjit did not
// write: files of other names, a code.db that is not ptjit's, or ptjit's
// file names without a ptjit code.db (a perf.data of perf record's).
func checkRecordingDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return &OutDirError{dir, unwrapPath(err).Error()}
	}
	var other, ours []string
	for _, e := range ents {
		if recordingFiles[e.Name()] && e.Type().IsRegular() {
			ours = append(ours, e.Name())
		} else {
			other = append(other, e.Name())
		}
	}
	if len(other) > 0 {
		sort.Strings(other)
		if len(other) > 3 {
			other = append(other[:3], "...")
		}
		return &OutDirError{dir, "holds files that are not a ptjit recording (" + strings.Join(other, ", ") + "); refusing to replace it"}
	}
	if len(ours) == 0 {
		return nil
	}
	codeDB := filepath.Join(dir, "code.db")
	if err := db.Probe(codeDB); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			sort.Strings(ours)
			return &OutDirError{dir, "holds " + strings.Join(ours, ", ") + " but no ptjit code.db: not a ptjit recording; refusing to replace it"}
		}
		if errors.Is(err, db.ErrNotCodeDB) {
			return &OutDirError{dir, "code.db is not a ptjit code.db; refusing to replace it"}
		}
		return &OutDirError{dir, "code.db: " + unwrapPath(err).Error()}
	}
	return nil
}

// removeRecording deletes the files of a recording that did not happen.
func removeRecording(dir string) {
	for name := range recordingFiles {
		os.Remove(filepath.Join(dir, name))
	}
}
