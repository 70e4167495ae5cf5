package tracker

import (
	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// syncAfter brings x's space in line with /proc/PID/maps after a syscall
// whose effect cannot be computed from its arguments, recording only
// that call's effect: what other threads' calls in flight changed is
// left to their own exit stops (maskInFlight).
//
// Precondition: on the locked tracer thread; x.th is in its
// syscall-exit-stop.
func (t *Tracer) syncAfter(x *sysExit) {
	maps, ok := t.readView(x.p, x.p.space)
	if !ok {
		return
	}
	maps = x.sp.maskInFlight(maps, t.othersInFlight(x), syncOwn(x.op))
	x.sp.Sync(maps, fileReadable, x.change())
}

// syncOwn says which fresh executable memory a syncing call can have
// made: brk the heap, an mprotect (PROT_GROWSDOWN, or one that failed
// halfway) the mappings its range touches; the others none.
func syncOwn(op *pendingOp) func(snapshot.Mapping) bool {
	switch op.nr {
	case unix.SYS_BRK:
		return func(m snapshot.Mapping) bool { return m.Path == "[heap]" }
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		s, e := op.rng.s, op.rng.e
		return func(m snapshot.Mapping) bool { return m.Start < e && s < m.End }
	}
	return nil
}

// othersInFlight returns what the syscalls of x.sp's other threads that
// wait for their exit stop (op set) may have changed. A call whose
// address is its result (mmap without MAP_FIXED, a moving mremap) is
// known when its thread is already at its exit stop (its registers can
// be read); otherwise it counts as fresh memory at an unknown place.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) othersInFlight(x *sysExit) inFlight {
	var f inFlight
	t.spaceThreads(x.sp, func(u *thread) {
		if u == x.th || u.op == nil {
			return
		}
		op := u.op
		a := op.args
		span := func(s, n uint64) { f.busy = append(f.busy, ival{s, s + pageUp(n)}) }
		// result: the call's return value when its thread is at its
		// exit stop; ok is false when not known, failed when it failed
		result := func() (ret uint64, ok, failed bool) {
			regs, err := getRegs(u.tid)
			if err != nil {
				return 0, false, false
			}
			if r := int64(regs.Rax); r < 0 && r >= -4095 {
				return 0, true, true
			}
			return regs.Rax, true, false
		}
		switch op.nr {
		case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT, unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_REMAP_FILE_PAGES:
			span(a[0], a[1])
		case unix.SYS_MMAP:
			if a[3]&unix.MAP_FIXED != 0 {
				span(a[0], a[1])
			} else if ret, ok, failed := result(); !ok {
				f.fresh = true
			} else if !failed {
				span(ret, a[1])
			}
		case unix.SYS_MREMAP:
			span(a[0], max(a[1], a[2])) // in place, or the source
			if a[3]&mremapFixed != 0 {
				span(a[4], a[2])
			} else if ret, ok, failed := result(); !ok {
				f.fresh = true
			} else if !failed {
				span(ret, a[2])
			}
		case unix.SYS_BRK, unix.SYS_SHMAT:
			f.fresh = true
		case unix.SYS_SHMDT:
			// the segment's size is not in the arguments: its first page
			// at least (Space.Touches asked the same at the entry)
			span(a[0], 1)
		}
	})
	return f
}
