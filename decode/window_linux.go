package decode

import (
	"sync"

	"golang.org/x/sys/unix"
)

// The window of a trace read from a file (a perf.data queue) is fresh
// memory: on the project's VM each page's first touch costs a fault of about
// 30 µs, and a 7.9 MB window of a soft-PT recording cost 5–10% of its decode
// in faults (see BENCHMARKS.md). ForEachWindow reads into one mapping per
// process, populated at once (MAP_POPULATE: one call, no fault per page)
// and kept for the next trace; a second trace read at the same time gets
// ordinary memory.

var windowSlot struct {
	sync.Mutex
	buf  []byte // the mapping
	busy bool
}

// takeWindow returns the process's window mapping, at least n bytes, or
// nil (in use, or the mapping failed): the caller then allocates. release
// gives it back.
func takeWindow(n int) []byte {
	s := &windowSlot
	s.Lock()
	defer s.Unlock()
	if s.busy {
		return nil
	}
	if len(s.buf) < n {
		// Only ForEachWindow's fn reads a window, and the decoders it
		// runs keep nothing of it: the old mapping is no longer read.
		if s.buf != nil {
			unix.Munmap(s.buf)
			s.buf = nil
		}
		size := (n + 1<<21 - 1) &^ (1<<21 - 1)
		b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
		if err != nil {
			return nil
		}
		s.buf = b
	}
	s.busy = true
	return s.buf
}

// releaseWindow gives back what takeWindow returned.
func releaseWindow() {
	windowSlot.Lock()
	windowSlot.busy = false
	windowSlot.Unlock()
}
