package tracker

import (
	"errors"

	"golang.org/x/sys/unix"
)

// The JIT filter of software PT (ptjit run --pt=soft --soft-filter=jit):
// only instructions in JIT code are stepped and traced, as an Intel PT IP
// filter on the JIT regions would trace them (TIP.PGE where execution
// enters, TIP.PGD where it leaves); everything else runs at full speed.
//
// JIT code is every copied (Anon) piece of the space except the vdso. A
// space is either closed or shown:
//
//   - closed: the kernel has the JIT pages without PROT_EXEC (the program's
//     view keeps it), and every thread runs free (PTRACE_CONT). A thread
//     that jumps into JIT code faults fetching its first instruction; that
//     fault is ptjit's (consumed) and opens the space.
//   - opening: the faulting thread waits; every thread of the space that
//     runs free is stopped (PTRACE_INTERRUPT) and from then on stepped.
//     When none runs free, the JIT pages are made executable (shown) and
//     the waiting threads step on.
//   - shown: every thread of the space is stepped — a thread outside JIT
//     code too, since nothing would stop it from entering unseen. Only
//     steps inside JIT code are traced. When a step leaves no thread of the
//     space in JIT code, the pages are hidden again and the threads run
//     free from their next resume.
//
// What hides and shows pages: injected mprotects (recorded in ptjit_prot);
// the program's own mmap(MAP_ANONYMOUS)/mprotect/pkey_mprotect with
// PROT_EXEC in a closed space, whose prot argument loses PROT_EXEC at the
// seccomp stop (file code that loses it too is given it back at the
// syscall's exit); and every other syscall that can make JIT code
// executable (a file mmap that turns out to be a memfd, mremap, shmat) is
// followed by an injected mprotect at its exit. The W^X paths ask
// kernelProt for the protection to restore.
//
// A fork child inherits the kernel's protections and the parent's state; a
// vfork child shares the space and is one more thread of it.

// filterState is the soft filter's state of one address space
// (space.filter).
type filterState struct {
	on      bool      // --soft-filter=jit
	shown   bool      // JIT code executable in the kernel; every thread stepped
	opening bool      // waiting for the threads running free to stop
	waiting []*thread // threads that entered JIT code while opening
}

// filterOn reports whether sp hides its JIT code (--soft-filter=jit).
func (sp *space) filterOn() bool { return sp != nil && sp.filter.on }

// jitPiece reports whether p is JIT code for the filter.
func (sp *space) jitPiece(p Piece) bool {
	return p.Kind == Anon && !(p.Start >= sp.vdso[0] && p.End <= sp.vdso[1])
}

// inJIT reports whether ip is in JIT code.
func (sp *space) inJIT(ip uint64) bool {
	p, ok := sp.PieceAt(ip)
	return ok && sp.jitPiece(p)
}

// hidden reports whether the JIT page at addr has PROT_EXEC taken away by
// the filter right now.
func (sp *space) hidden(addr uint64) bool {
	return sp.filterOn() && !sp.filter.shown && sp.inJIT(addr)
}

// kernelProt is the protection ptjit enforces on the page at addr for the
// program's view: W^X's, without PROT_EXEC where the filter hides JIT code.
func (sp *space) kernelProt(addr uint64, view int) int {
	p := actualProt(view)
	if sp.hidden(addr) {
		p &^= unix.PROT_EXEC
	}
	return p
}

// spaceThreads calls fn for every thread of every process sharing sp.
func (t *Tracer) spaceThreads(sp *space, fn func(*thread)) {
	for _, p := range t.procs {
		if p.space != sp {
			continue
		}
		for _, th := range p.threads {
			fn(th)
		}
	}
}

// filterFault handles a stopFilterFault: an instruction fetch at addr from
// hidden JIT code (the thread enters it) or from code the filter
// over-hid. The fault is the filter's: the thread is resumed, or waits for
// the space to open.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) filterFault(th *thread, addr uint64) {
	sp := th.proc.space
	p, _ := sp.PieceAt(addr)
	page := addr &^ (pageSize - 1)
	if _, batch := sp.wx.batch[page]; batch {
		// W^X batch page executed: a new version, then the filter's
		// protection (hidden while closed)
		t.batchExec(th, page)
	}
	if !sp.jitPiece(p) {
		// File code that lost PROT_EXEC with a range the program
		// protected: give it back, run the instruction again.
		if err := t.protect(th, p.Start, p.End, actualProt(p.Prot), "soft-filter: file code stays executable"); err != nil {
			t.warnOp(err)
		}
		t.resumeThread(th, 0)
		return
	}
	th.inJIT = true
	if sp.filter.shown {
		// The space opened after this fault, or a syscall of another
		// thread hid this code when the space was closed at its entry:
		// show the page and run the instruction again.
		t.filterProtect(th, sp, page, page+pageSize, "soft-filter: JIT code entered")
		t.resumeThread(th, 0)
		return
	}
	sp.filter.opening = true
	sp.filter.waiting = append(sp.filter.waiting, th)
	t.spaceThreads(sp, func(u *thread) {
		if u.free {
			// stop it where it is; its stop resumes it stepping
			unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_INTERRUPT, uintptr(u.tid), 0, 0, 0, 0)
		}
	})
	t.filterTryOpen(sp)
}

// filterTryOpen shows sp's JIT code once no thread of it runs free, and
// lets the threads that entered it step on.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) filterTryOpen(sp *space) {
	if !sp.filter.opening {
		return
	}
	free := false
	t.spaceThreads(sp, func(u *thread) { free = free || u.free })
	if free {
		return
	}
	waiting := sp.filter.waiting[:0]
	for _, w := range sp.filter.waiting {
		if t.threads[w.tid] == w && w.proc.space == sp {
			waiting = append(waiting, w)
		}
	}
	sp.filter.waiting, sp.filter.opening = nil, false
	if len(waiting) == 0 {
		return
	}
	sp.filter.shown = true
	// The mprotects run in a waiting thread; one that dies meanwhile
	// (its group is killed, another thread exits it) leaves the work to
	// the next, never to a stray signal in the program.
	for _, w := range waiting {
		if !errors.Is(t.filterProtect(w, sp, 0, ^uint64(0), "soft-filter: JIT code entered"), ErrThreadGone) {
			break
		}
	}
	for _, w := range waiting {
		if t.threads[w.tid] == w {
			t.resumeThread(w, 0)
		}
	}
}

// filterMaybeClose hides sp's JIT code when no thread of it is there.
// th is stopped at a step trap.
func (t *Tracer) filterMaybeClose(th *thread) {
	sp := th.proc.space
	if !sp.filterOn() || !sp.filter.shown {
		return
	}
	in := false
	t.spaceThreads(sp, func(u *thread) { in = in || u.inJIT })
	if in {
		return
	}
	sp.filter.shown = false
	if errors.Is(t.filterProtect(th, sp, 0, ^uint64(0), "soft-filter: JIT code left"), ErrThreadGone) {
		// th died at the step: the code stays shown, every thread
		// steps on, and the next step trap closes it
		sp.filter.shown = true
	}
}

// filterProtect makes the kernel's protection of the JIT pieces in
// [lo, hi) what kernelProt says, with one injected mprotect per run of
// adjacent pieces that get the same protection. Batch pages of W^X keep
// theirs (writable, not executable). It stops at, and returns, an error
// matching ErrThreadGone: th died, the rest is for another thread.
//
// Precondition: on the locked tracer thread; th (of sp) is stopped.
func (t *Tracer) filterProtect(th *thread, sp *space, lo, hi uint64, reason string) error {
	type run struct {
		s, e uint64
		prot int
	}
	var runs []run
	add := func(s, e uint64, prot int) {
		if n := len(runs); n > 0 && runs[n-1].e == s && runs[n-1].prot == prot {
			runs[n-1].e = e
			return
		}
		runs = append(runs, run{s, e, prot})
	}
	freeing := t.freeing(sp)
	for _, p := range sp.pieces[sp.first(lo):] {
		if p.Start >= hi {
			break
		}
		if !sp.jitPiece(p) {
			continue
		}
		s, e := max(p.Start, lo), min(p.End, hi)
		prot := sp.kernelProt(s, p.Prot)
		for a := s; a < e; a += pageSize {
			if _, batch := sp.wx.batch[a]; batch {
				continue
			}
			if inIvals(freeing, a) {
				continue
			}
			add(a, a+pageSize, prot)
		}
	}
	for _, r := range runs {
		err := t.protect(th, r.s, r.e, r.prot, reason)
		if errors.Is(err, ErrThreadGone) {
			return err
		}
		if errors.Is(err, unix.ENOMEM) && r.e-r.s > pageSize {
			// Part of the run is no longer mapped: another thread's
			// munmap is under way (its exit stop will tell the Space).
			// Page by page, skipping the holes.
			for a := r.s; a < r.e; a += pageSize {
				err := t.protect(th, a, a+pageSize, r.prot, reason)
				if errors.Is(err, ErrThreadGone) {
					return err
				}
				if err != nil && !errors.Is(err, unix.ENOMEM) {
					t.warnf("%s: %#x: %v", reason, a, err)
				}
			}
			continue
		}
		if err != nil && !errors.Is(err, unix.ENOMEM) {
			t.warnf("%s: [%#x, %#x): %v", reason, r.s, r.e, err)
		}
	}
	return nil
}

// freeing returns the ranges that calls of sp's threads now in flight
// (munmap, and the old range of mremap) may have freed already: their exit
// stops, which update the Space, come later. The kernel may have given
// those addresses to another thread's mmap meanwhile (one the filter does
// not stop: not executable), so no injected mprotect may touch them — it
// would turn that thread's fresh RW memory executable-only, and its next
// store a SIGSEGV for the program.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) freeing(sp *space) []ival {
	var out []ival
	t.spaceThreads(sp, func(u *thread) {
		if u.op != nil && (u.op.nr == unix.SYS_MUNMAP || u.op.nr == unix.SYS_MREMAP) {
			out = append(out, ival{u.op.args[0], u.op.args[0] + pageUp(u.op.args[1])})
		}
	})
	return out
}

func inIvals(rs []ival, a uint64) bool {
	for _, r := range rs {
		if a >= r.s && a < r.e {
			return true
		}
	}
	return false
}

// filterEntryProt (entryRewrites): a program's mmap(MAP_ANONYMOUS)/mprotect
// asking for PROT_EXEC in a closed space gets it without, so that no
// thread running free can execute the new code before the syscall's exit
// hides it. It returns the prot the kernel will get.
func (t *Tracer) filterEntryProt(th *thread, op *pendingOp, prot uint64) (uint64, string) {
	sp := th.proc.space
	if !sp.filterOn() || sp.filter.shown || prot&unix.PROT_EXEC == 0 {
		return prot, ""
	}
	switch op.nr {
	case unix.SYS_MMAP:
		if op.args[3]&unix.MAP_ANONYMOUS == 0 {
			return prot, ""
		}
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
	default:
		return prot, ""
	}
	return prot &^ unix.PROT_EXEC, "soft-filter: new code hidden until entered"
}

// filterEffect (exitEffects, last): the kernel's protections of the range
// the call made executable follow the filter (filterSyscallExit).
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) filterEffect(x *sysExit) {
	if !x.sp.filterOn() {
		return
	}
	a, ret := x.op.args, x.ret
	lo, hi := uint64(0), ^uint64(0)
	switch x.op.nr {
	case unix.SYS_MMAP:
		lo, hi = ret, ret+pageUp(a[1])
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		lo, hi = a[0], a[0]+pageUp(a[1])
	case unix.SYS_MREMAP:
		lo, hi = ret, ret+pageUp(a[2])
	case unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2,
		unix.SYS_WRITE, unix.SYS_PWRITE64, unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2, unix.SYS_PROCESS_VM_WRITEV:
		hi = 0 // makes nothing executable
	}
	t.filterSyscallExit(x.th, lo, hi, x.op.rewrote && x.op.kprot&unix.PROT_EXEC == 0)
}

// filterSyscallExit brings the kernel's protections of [lo, hi) in line
// with the filter after a syscall of the program changed them: JIT code is
// hidden in a closed space, file code keeps PROT_EXEC.
//
// Precondition: on the locked tracer thread; th is in syscall-exit-stop.
func (t *Tracer) filterSyscallExit(th *thread, lo, hi uint64, rewrote bool) {
	sp := th.proc.space
	if !sp.filterOn() || sp.filter.shown && !rewrote || lo >= hi {
		return
	}
	if !rewrote || sp.filter.shown {
		// New code is hidden (closed), or code hidden at the syscall's
		// entry is shown (the space opened meanwhile).
		t.filterProtect(th, sp, lo, hi, "soft-filter: new JIT code")
	}
	if !rewrote {
		return
	}
	// The kernel got the range without PROT_EXEC: file code gets it back.
	for _, p := range sp.pieces[sp.first(lo):] {
		if p.Start >= hi {
			break
		}
		if !sp.jitPiece(p) {
			s, e := max(p.Start, lo), min(p.End, hi)
			if err := t.protect(th, s, e, actualProt(p.Prot), "soft-filter: file code stays executable"); err != nil {
				t.warnOp(err)
			}
		}
	}
}
