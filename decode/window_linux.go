package decode

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The window of a trace read from a file (a perf.data queue) is fresh
// memory: on the project's VM each page's first touch costs a fault of about
// 30 µs, and a 7.9 MB window of a soft-PT recording cost 5–10% of its decode
// in faults (see BENCHMARKS.md). ForEachWindow reads into one mapping per
// process, populated at once (mapWindow: one call, no fault per page, in
// huge pages where the system has them) and kept for the next trace; a
// second trace read at the same time gets ordinary memory.

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
			_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(s.buf)), uintptr(len(s.buf)))
			s.buf = nil
		}
		b := mapWindow((n + hugePage - 1) &^ (hugePage - 1))
		if b == nil {
			return nil
		}
		s.buf = b
	}
	s.busy = true
	return s.buf
}

const hugePage = 2 << 20

// mapWindow maps size bytes (a multiple of hugePage) for a window, filled
// in at once: aligned to a huge page and advised as one (MADV_HUGEPAGE;
// where transparent huge pages are on, even only for madvise, a 2 MiB page
// is one fault and one clear instead of 512), then populated for writing
// (MADV_POPULATE_WRITE, Linux 5.14). Where that fails it maps with
// MAP_POPULATE as before. nil if no memory could be mapped.
func mapWindow(size int) []byte {
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if p, err := unix.MmapPtr(-1, 0, nil, uintptr(size+hugePage), prot, flags); err == nil {
		a := -uintptr(p) & (hugePage - 1)
		b := unsafe.Slice((*byte)(unsafe.Add(p, a)), size)
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
		if unix.Madvise(b, unix.MADV_POPULATE_WRITE) == nil {
			// The unaligned ends are never touched: give them back.
			if a > 0 {
				_ = unix.MunmapPtr(p, a)
			}
			_ = unix.MunmapPtr(unsafe.Add(p, a+uintptr(size)), hugePage-a)
			return b
		}
		_ = unix.MunmapPtr(p, uintptr(size+hugePage))
	}
	p, err := unix.MmapPtr(-1, 0, nil, uintptr(size), prot, flags|unix.MAP_POPULATE)
	if err != nil {
		return nil
	}
	return unsafe.Slice((*byte)(p), size)
}

// releaseWindow gives back what takeWindow returned.
func releaseWindow() {
	windowSlot.Lock()
	windowSlot.busy = false
	windowSlot.Unlock()
}
