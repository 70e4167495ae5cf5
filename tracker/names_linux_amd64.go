package tracker

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/perf"
)

// nameState is what the tracker keeps about a space's perf map
// (names.go). It holds the file open once it has seen it, so the lines
// of a map the program removes before it exits are still read.
type nameState struct {
	path    string
	f       *os.File
	ino     uint64 // of f, or of the stale file at the start
	off     int64  // bytes read (up to the last complete line)
	stale   []byte // the start of a file that was there before the process
	polled  uint64 // TSC of the last read
	bad     int    // lines that did not parse
	started bool
	// opened: the program opened its perf map for writing (namesSeeOpen);
	// until then no stop looks at the file
	opened bool
	jit    jitDumpState
}

// jitDumpState is what the tracker keeps about the jitdump file a process
// writes (node --perf-prof: ./jit-PID.dump): its path, resolved when the
// program opened it for writing, and how much of it was read.
type jitDumpState struct {
	path   string // "" until the program opened it
	f      *os.File
	off    int64 // bytes read: the header and the complete records
	header bool  // the header was read
	failed bool  // the file is not a jitdump ptjit reads: no more reads
}

// namesSeeOpen (exitNeeds; it never asks for the exit stop): an open for
// writing (the filter stops those) of the process's perf map starts
// the reads, so that a process that writes no map costs nothing at its
// stops (a stat(2) is several µs on a loaded VM).
func (t *Tracer) namesSeeOpen(th *thread, op *pendingOp) bool {
	var pathArg uint64
	switch op.nr {
	case unix.SYS_OPEN:
		pathArg = op.args[0]
	case unix.SYS_OPENAT, unix.SYS_OPENAT2:
		pathArg = op.args[1]
	default:
		return false
	}
	sp := th.proc.space
	if sp == nil || (sp.names.opened && sp.names.jit.path != "") {
		return false
	}
	var buf [4096]byte
	n := readString(th.tid, pathArg, buf[:])
	path := buf[:n]
	if bytes.HasSuffix(path, []byte("perf-"+strconv.Itoa(sp.owner)+".map")) {
		sp.names.opened = true
	}
	if sp.names.jit.path == "" && filepath.Base(string(path)) == "jit-"+strconv.Itoa(sp.owner)+".dump" {
		sp.names.jit.path = absPath(th.tid, op, string(path))
	}
	return false
}

// absPath resolves the path argument of an open(2) or openat(2) of thread
// tid, at its syscall-entry stop, against its working directory or its
// directory descriptor; "" when neither can be read.
func absPath(tid int, op *pendingOp, path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	dir := "/proc/" + strconv.Itoa(tid) + "/cwd"
	if op.nr != unix.SYS_OPEN && int32(op.args[0]) != unix.AT_FDCWD {
		dir = "/proc/" + strconv.Itoa(tid) + "/fd/" + strconv.Itoa(int(int32(op.args[0])))
	}
	d, err := os.Readlink(dir)
	if err != nil {
		return ""
	}
	return filepath.Join(d, path)
}

// perfMapHead is how much of a stale perf map is kept to tell a rewritten
// one from it.
const perfMapHead = 256

// namesStart sets sp's perf map path and takes what a file of that name
// already holds (a stale map of an earlier process with the same pid) as
// read.
func (sp *space) namesStart() {
	n := &sp.names
	n.path = "/tmp/perf-" + strconv.Itoa(sp.owner) + ".map"
	n.started = true
	f, err := os.Open(n.path)
	if err != nil {
		return
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return
	}
	n.ino, n.off = st.Ino, st.Size
	b := make([]byte, min(st.Size, perfMapHead))
	k, _ := io.ReadFull(f, b)
	n.stale = b[:k]
}

// namesAtAttach: an attached process opened its perf map or jitdump
// before the attach, where no stop saw the open (namesSeeOpen). One the
// process holds open (V8 and HotSpot's agents keep theirs open), or a
// perf map written to since the process started, is its own: it is read
// from its start, the names in it naming the code the attach snapshot
// recorded, instead of being taken as a stale file of an earlier process.
func (sp *space) namesAtAttach(pid int) {
	n := &sp.names
	dir := "/proc/" + strconv.Itoa(pid)
	fds, _ := os.ReadDir(dir + "/fd")
	for _, fd := range fds {
		link, err := os.Readlink(dir + "/fd/" + fd.Name())
		if err != nil {
			continue
		}
		switch {
		case link == n.path:
			n.opened = true
		case n.jit.path == "" && filepath.Base(link) == "jit-"+strconv.Itoa(pid)+".dump":
			n.jit.path = link
		}
	}
	if !n.opened {
		var st, self unix.Stat_t
		n.opened = unix.Stat(n.path, &st) == nil && unix.Stat(dir, &self) == nil && st.Mtim.Nano() >= self.Ctim.Nano()
	}
	if n.opened {
		n.off, n.stale = 0, nil
	}
}

// namesClose closes sp's perf map and jitdump.
func (sp *space) namesClose() {
	if sp.names.f != nil {
		sp.names.f.Close()
		sp.names.f = nil
	}
	if sp.names.jit.f != nil {
		sp.names.jit.f.Close()
		sp.names.jit.f = nil
	}
}

// pollNames reads the lines added to sp's perf map since the last read
// and records them as written before at, the stop being handled. It is
// called before a stop records a change of sp's code, and at its end.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) pollNames(sp *space, at clock.Stamp) {
	n := &sp.names
	if !n.started || (!n.opened && n.jit.path == "") || n.polled == at.TSC {
		return
	}
	after := n.polled
	n.polled = at.TSC
	if n.jit.path != "" {
		t.readJitDump(sp, after, at)
	}
	if !n.opened {
		return
	}
	var st unix.Stat_t
	if unix.Stat(n.path, &st) == nil && (n.f == nil || st.Ino != n.ino) {
		// the map appeared, or was replaced by another file
		f, err := os.Open(n.path)
		if err != nil {
			return
		}
		if n.f != nil {
			t.readNames(sp, after, at) // the rest of the old one
			n.f.Close()
		}
		if st.Ino != n.ino {
			n.off, n.stale = 0, nil
		}
		n.f, n.ino = f, st.Ino
	}
	if n.f == nil {
		return
	}
	t.readNames(sp, after, at)
}

// readNames reads and records the complete lines of sp's open perf map
// after n.off.
func (t *Tracer) readNames(sp *space, after uint64, at clock.Stamp) {
	n := &sp.names
	var st unix.Stat_t
	if unix.Fstat(int(n.f.Fd()), &st) != nil {
		return
	}
	if st.Size < n.off {
		n.off = 0 // truncated and rewritten
	}
	if st.Size == n.off {
		return
	}
	if n.stale != nil {
		// a stale map that grew: the program appended to it, or
		// truncated it and wrote more than it held
		head := make([]byte, len(n.stale))
		if k, _ := n.f.ReadAt(head, 0); k < len(head) || !bytes.Equal(head, n.stale) {
			n.off = 0
		}
		n.stale = nil
	}
	buf := make([]byte, min(st.Size-n.off, 1<<20))
	for n.off < st.Size {
		k, err := n.f.ReadAt(buf[:min(int64(len(buf)), st.Size-n.off)], n.off)
		lines, used, bad := parsePerfMap(buf[:k])
		n.bad += bad
		for _, l := range lines {
			t.rec.Name(db.NameInfo{PID: sp.owner, Addr: l.addr, Size: l.size, Name: l.name,
				Source: "perf-map " + n.path, At: at, After: after})
			t.result.Stats.Names++
		}
		if used == 0 {
			if k == len(buf) {
				n.off += int64(k) // a line longer than the buffer: skipped
				continue
			}
			break // a line still being written
		}
		n.off += int64(used)
		if err != nil && err != io.EOF {
			break
		}
	}
}

// readJitDump reads the code loads added to sp's jitdump since the last
// read and records each as a name written before the current stop, with
// the code bytes it reported (the rule of readNames: no code changed since
// the last read, so the code it names is the code valid before this stop;
// recording.Names places it on the versions holding exactly its bytes).
// The file is opened at the first read after the program opened it (V8
// keeps it open and mmaps it, the marker perf inject --jit looks for), and
// kept open: a program that removes it is still read to its end.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) readJitDump(sp *space, after uint64, at clock.Stamp) {
	j := &sp.names.jit
	if j.failed {
		return
	}
	if j.f == nil {
		f, err := os.Open(j.path)
		if err != nil {
			return // not created yet
		}
		j.f = f
	}
	var st unix.Stat_t
	if unix.Fstat(int(j.f.Fd()), &st) != nil || st.Size <= j.off {
		return
	}
	buf := make([]byte, st.Size-j.off)
	k, _ := j.f.ReadAt(buf, j.off)
	buf = buf[:k]
	if !j.header {
		if len(buf) < perf.JitDumpHeaderSize {
			return
		}
		h, err := perf.ParseJitHeader(buf, j.path)
		if err != nil {
			j.failed = true
			t.warnf("names: %v (the file is not read further)", err)
			return
		}
		if int64(len(buf)) < int64(h.TotalSize) {
			return
		}
		buf = buf[h.TotalSize:]
		j.off += int64(h.TotalSize)
		j.header = true
	}
	loads, used, err := perf.ParseJitRecords(buf, j.off, j.path)
	for _, l := range loads {
		if len(l.Code) == 0 {
			continue
		}
		t.rec.Name(db.NameInfo{PID: sp.owner, Addr: l.CodeAddr, Size: uint64(len(l.Code)), Name: l.Name,
			Source: "jitdump " + j.path, Code: l.Code, At: at, After: after})
		t.result.Stats.Names++
	}
	j.off += int64(used)
	if err != nil {
		j.failed = true
		t.warnf("names: %v (the file is not read further)", err)
	}
}
