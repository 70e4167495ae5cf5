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
//     runs free is stopped (PTRACE_INTERRUPT) and parked. When none runs
//     free, the JIT pieces the waiting threads entered are made executable
//     (shown) and the waiting threads step on.
//   - shown: only the JIT pieces entered since the space opened are
//     executable in the kernel (filterState.open): a thread in JIT code
//     that goes on into another hidden piece faults again, and that piece
//     is shown too. Opening and closing so cost an mprotect per piece
//     entered, not one per JIT piece of the space: a program with a JIT
//     page per thread has as many pieces as threads, and each thread's
//     entry would otherwise protect them all, twice. The threads in JIT
//     code are stepped. A thread outside JIT
//     code is parked (left stopped) rather than stepped, since nothing
//     would stop it from entering unseen: parking costs one stop per thread
//     per opening, stepping costs one per instruction of every thread for
//     as long as the space is shown, which made the filter's cost grow
//     with the square of the threads (300 JIT-calling threads took more
//     than 10 minutes). Only steps inside JIT code are traced. When a step
//     leaves no thread of the space in JIT code, the pieces shown are
//     hidden again and every thread runs free from its next resume; the
//     parked ones are resumed then.
//
// Parking must never stall the program: a thread in JIT code may wait for
// a parked one (a spin on a flag, a futex). So the parked threads are let
// go, stepped as before for the rest of the shown period, once the
// threads in JIT code have stepped maxParkedSteps instructions since the
// space opened, or one of them steps a syscall instruction (which may
// block), or the last thread in JIT code dies (filterThreadGone closes the
// space through a parked thread). Parking only delays threads, as a busy
// CPU would.
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
	on      bool            // --soft-filter=jit
	shown   bool            // open: threads in JIT code stepped, the others parked
	opening bool            // waiting for the threads running free to stop
	waiting []waitingThread // threads that entered JIT code while opening
	// open: the JIT ranges shown (executable in the kernel) since the
	// space opened; the rest of the JIT code stays hidden.
	open []ival
	// parked: threads outside JIT code left stopped while shown, with
	// the signal to deliver at their resume; released: they were let go
	// (stepped) for the rest of this shown period; jitSteps counts the
	// steps in JIT code since the space opened.
	parked   []parkedThread
	released bool
	jitSteps int
	// stepAll: a process of the space has a seccomp filter of its own,
	// which may refuse the mprotect calls that hide and show JIT code:
	// nothing is hidden from then on, and every thread is stepped (only
	// its steps in JIT code are traced, as before; filterStepAll)
	stepAll bool
}

type waitingThread struct {
	th   *thread
	addr uint64 // where it entered JIT code
}

type parkedThread struct {
	th  *thread
	sig int
}

// maxParkedSteps bounds the steps in JIT code while threads are parked: a
// JIT loop that long may be waiting for one of them. A step costs about
// 10–50 µs here, so a thread is held for at most a few tens of ms.
const maxParkedSteps = 1024

// filterPark leaves th (stopped, outside JIT code) stopped while sp is
// shown and returns true; false when it must be stepped instead.
//
// Precondition: on the locked tracer thread; th is stopped, no step in
// flight.
func (t *Tracer) filterPark(th *thread, sp *space, sig int) bool {
	if !sp.filterOn() || !sp.filter.shown && !sp.filter.opening || sp.filter.released || th.filter.inJIT || th.dying {
		return false
	}
	sp.filter.parked = append(sp.filter.parked, parkedThread{th, sig})
	return true
}

// filterJITStep counts a step in JIT code that is about to start; a
// syscall instruction or too many steps let the parked threads go.
func (t *Tracer) filterJITStep(sp *space, syscall bool) {
	if !sp.filterOn() || !sp.filter.shown || sp.filter.released {
		return
	}
	sp.filter.jitSteps++
	if syscall || sp.filter.jitSteps > maxParkedSteps {
		sp.filter.released = true
		t.filterUnpark(sp)
	}
}

// filterUnpark resumes sp's parked threads (stepped when sp is shown and
// released, free when it is closed).
func (t *Tracer) filterUnpark(sp *space) {
	parked := sp.filter.parked
	sp.filter.parked = nil
	for _, p := range parked {
		if t.threads[p.th.tid] == p.th && p.th.proc.space == sp {
			t.resume(p.th.tid, p.sig)
		}
	}
}

// filterThreadGone: a thread of sp died. When none of the threads left is
// in JIT code while sp is shown, nothing would step to close it, so it
// closes now through a parked thread and the parked threads run free.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) filterThreadGone(sp *space) {
	if !sp.filterOn() || !sp.filter.shown || len(sp.filter.parked) == 0 {
		return
	}
	in := false
	t.spaceThreads(sp, func(u *thread) { in = in || u.filter.inJIT })
	if in {
		return
	}
	for _, p := range sp.filter.parked {
		if t.threads[p.th.tid] != p.th || p.th.dying {
			continue
		}
		sp.filter.shown = false
		err := t.filterHide(p.th, sp, "soft-filter: JIT code left")
		if !errors.Is(err, ErrThreadGone) {
			break
		}
		sp.filter.shown = true
	}
	if !sp.filter.shown {
		sp.filter.released, sp.filter.jitSteps = false, 0
	}
	t.filterUnpark(sp)
}

// filterOn reports whether sp hides its JIT code (--soft-filter=jit, and
// no seccomp filter of the program's made it step every thread:
// filterStepAll).
func (sp *space) filterOn() bool { return sp != nil && sp.filter.on && !sp.filter.stepAll }

// traceJITOnly reports whether only sp's JIT code is traced
// (--soft-filter=jit), hidden or not.
func (sp *space) traceJITOnly() bool { return sp != nil && sp.filter.on }

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
// the filter right now: always while the space is closed, outside the
// ranges shown while it is open.
func (sp *space) hidden(addr uint64) bool {
	return sp.filterOn() && sp.inJIT(addr) && !(sp.filter.shown && inIvals(sp.filter.open, addr))
}

// filterShow makes the JIT piece at addr executable in the kernel (the
// space is shown), through th.
func (t *Tracer) filterShow(th *thread, sp *space, addr uint64, reason string) error {
	p, ok := sp.PieceAt(addr)
	if !ok || !sp.jitPiece(p) {
		return nil
	}
	if !inIvals(sp.filter.open, addr) {
		sp.filter.open = append(sp.filter.open, ival{p.Start, p.End})
	}
	return t.filterProtect(th, sp, p.Start, p.End, reason)
}

// filterHide hides the ranges shown, through th, once shown is false; it
// stops at, and returns, an error matching ErrThreadGone. The ranges
// hidden before such an error are hidden in the kernel but still listed:
// a thread entering them faults, and filterFault shows them again.
func (t *Tracer) filterHide(th *thread, sp *space, reason string) error {
	for len(sp.filter.open) > 0 {
		r := sp.filter.open[0]
		if err := t.filterProtect(th, sp, r.s, r.e, reason); errors.Is(err, ErrThreadGone) {
			return err
		}
		sp.filter.open = sp.filter.open[1:]
	}
	sp.filter.open = nil
	return nil
}

// kernelProt is the protection ptjit enforces on the page at addr for the
// program's view: W^X's, without PROT_EXEC where the filter hides JIT code.
func (sp *space) kernelProt(addr uint64, view int) int {
	p := sp.wxProt(view)
	if page := addr &^ (pageSize - 1); sp.inKW(page) {
		// memory the kernel writes (wx_tcb_linux_amd64.go): writable,
		// and executable once it ran code
		p = view
		if !sp.wx.opened[page] {
			p &^= unix.PROT_EXEC
		}
	}
	if sp.wx.flight[addr&^(pageSize-1)] > 0 {
		// a kernel copy into the page is in flight: it stays writable
		// until the copy's call returns (kwrite_linux_amd64.go), also
		// when the soft filter hides or shows the code around it
		p |= unix.PROT_WRITE
	}
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
	if sp.wx.batch.has(page) {
		// W^X batch page executed: a new version, then the filter's
		// protection (hidden while closed)
		var ip uint64
		if regs, err := getRegs(th.tid); err == nil {
			ip = regs.Rip
		}
		t.batchExec(th, page, ip)
	}
	if sp.filter.stepAll {
		// hidden before the filter went step-all, shown since: the
		// instruction runs again
		t.resume(th.tid, 0)
		return
	}
	if !sp.jitPiece(p) {
		// File code that lost PROT_EXEC with a range the program
		// protected: give it back, run the instruction again.
		if err := t.protect(th, p.Start, p.End, actualProt(p.Prot), "soft-filter: file code stays executable"); err != nil {
			t.warnOp(err)
		}
		t.resume(th.tid, 0)
		return
	}
	th.filter.inJIT = true
	if sp.filter.shown {
		// The space opened after this fault, or a syscall of another
		// thread hid this code when the space was closed at its entry:
		// show the page and run the instruction again.
		t.filterShow(th, sp, page, "soft-filter: JIT code entered")
		t.resume(th.tid, 0)
		return
	}
	sp.filter.opening = true
	sp.filter.waiting = append(sp.filter.waiting, waitingThread{th, page})
	t.spaceThreads(sp, func(u *thread) {
		if u.filter.free && !u.filter.vfork {
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
	t.spaceThreads(sp, func(u *thread) { free = free || u.filter.free && !u.filter.vfork })
	if free {
		return
	}
	waiting := sp.filter.waiting[:0]
	for _, w := range sp.filter.waiting {
		if t.threads[w.th.tid] == w.th && w.th.proc.space == sp {
			waiting = append(waiting, w)
		}
	}
	sp.filter.waiting, sp.filter.opening = nil, false
	if len(waiting) == 0 {
		t.filterUnpark(sp) // the threads that entered died meanwhile
		return
	}
	sp.filter.shown, sp.filter.released, sp.filter.jitSteps = true, false, 0
	// The mprotects run in a waiting thread; one that dies meanwhile
	// (its group is killed, another thread exits it) leaves the work to
	// the next, never to a stray signal in the program.
	inj := 0
	for _, w := range waiting {
		for inj < len(waiting) && errors.Is(t.filterShow(waiting[inj].th, sp, w.addr, "soft-filter: JIT code entered"), ErrThreadGone) {
			inj++
		}
	}
	for _, w := range waiting {
		if t.threads[w.th.tid] == w.th {
			t.resume(w.th.tid, 0)
		}
	}
}

// filterVfork: th, at its vfork event, waits in the kernel for its child
// (which shares the space) from its resume until the child execs or
// exits, where the kernel reports PTRACE_EVENT_VFORK_DONE. Meanwhile it
// runs no code, and PTRACE_INTERRUPT cannot stop it (the wait is
// killable only): an opening of the space must not wait for it, or the
// child that entered JIT code waits for ever (the new-user trial of
// 2026-11-27: a vfork child calling a JIT function hung). Its
// vfork-done stop is handled as any other stop (parked while the space
// is shown).
func (t *Tracer) filterVfork(th *thread) {
	if th.proc.space.filterOn() {
		th.filter.vfork = true
	}
}

// filterVforkDone handles th's PTRACE_EVENT_VFORK_DONE stop (see
// filterVfork).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) filterVforkDone(th *thread) {
	th.filter.vfork = false
	t.resume(th.tid, 0)
}

// filterForkChild: th is the only thread of a fork child, at its first
// stop, with sp a copy of a space that was shown (the kernel copied the
// protections). A child that forked outside JIT code closes its space at
// once; otherwise its thread would be parked for as long as the space is
// shown, and with no thread of the child in JIT code nothing would ever
// close it (the child never ran: a parent waiting for it waited for
// ever). A child at JIT code (fork from JIT code) steps on in it.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) filterForkChild(th *thread, sp *space) {
	if !sp.filterOn() || !sp.filter.shown {
		return
	}
	regs, err := getRegs(th.tid)
	if err != nil {
		return // gone: its exit report follows
	}
	if sp.inJIT(regs.Rip) {
		th.filter.inJIT = true
		return
	}
	sp.filter.shown = false
	if err := t.filterHide(th, sp, "soft-filter: fork child outside JIT code"); err != nil && !errors.Is(err, ErrThreadGone) {
		t.warnOp(err)
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
	t.spaceThreads(sp, func(u *thread) { in = in || u.filter.inJIT })
	if in {
		return
	}
	sp.filter.shown = false
	if errors.Is(t.filterHide(th, sp, "soft-filter: JIT code left"), ErrThreadGone) {
		// th died at the step: the code stays shown, and the next step
		// trap, or the death's report (filterThreadGone), closes it
		sp.filter.shown = true
		return
	}
	sp.filter.released, sp.filter.jitSteps = false, 0
	t.filterUnpark(sp)
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
			if sp.wx.batch.has(a) {
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
			out = append(out, u.op.rng)
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
	if !sp.filterOn() || prot&unix.PROT_EXEC == 0 {
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

// filterEffect (exitEffects): the kernel's protections of the range
// the call made executable follow the filter (filterSyscallExit).
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) filterEffect(x *sysExit) {
	if !x.sp.filterOn() {
		return
	}
	lo, hi := uint64(0), ^uint64(0)
	switch x.op.nr {
	case unix.SYS_MMAP:
		lo, hi = x.out.s, x.out.e
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		lo, hi = x.op.rng.s, x.op.rng.e
	case unix.SYS_MREMAP:
		lo, hi = x.out.s, x.out.e
	case unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2,
		unix.SYS_WRITE, unix.SYS_PWRITE64, unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2, unix.SYS_PROCESS_VM_WRITEV:
		hi = 0 // makes nothing executable
	}
	rewrote := x.op.rewrite.done && x.op.rewrite.kprot&unix.PROT_EXEC == 0
	if lo == 0 && hi == ^uint64(0) {
		// A call synced from /proc/PID/maps (brk, shmdt, ...): the
		// ranges other threads' calls in flight change are left to
		// their own exit stops, as the Space left them (maskInFlight).
		// Hidden here, a thread's MAP_FIXED read-write mmap over its
		// code, done in the kernel and not yet at its exit stop, got
		// the hidden code's protection and its next store SIGSEGV
		// (found by the new-user trial: a thread replacing its code
		// while another moves the break).
		for _, r := range minus(lo, hi, mergeIvals(t.othersInFlight(x).busy)) {
			t.filterSyscallExit(x.th, r.s, r.e, rewrote)
		}
		return
	}
	t.filterSyscallExit(x.th, lo, hi, rewrote)
}

// filterSyscallExit brings the kernel's protections of [lo, hi) in line
// with the filter after a syscall of the program changed them: JIT code is
// hidden in a closed space, file code keeps PROT_EXEC.
//
// Precondition: on the locked tracer thread; th is in syscall-exit-stop.
func (t *Tracer) filterSyscallExit(th *thread, lo, hi uint64, rewrote bool) {
	sp := th.proc.space
	if !sp.filterOn() || lo >= hi {
		return
	}
	if !rewrote || sp.filter.shown {
		// New code is hidden (outside the ranges shown), or code
		// hidden at the syscall's entry is shown (it is in them).
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

// filterStepAll ends the hiding of sp's JIT code (filterState.stepAll):
// every JIT piece is shown, the threads that waited for the space to open
// or were parked go on, and the threads running free are stopped, to be
// stepped from their stop on. Found by the new-user trial: a program
// whose own filter failed mprotect with EPERM had ptjit retry showing the
// code it entered for ever; one whose filter killed was killed.
//
// Precondition: on the locked tracer thread; th (of sp) is at a
// syscall-exit stop, before the program's filter is in
// (ownFilterEntry).
func (t *Tracer) filterStepAll(th *thread, sp *space) {
	if !sp.filterOn() {
		return
	}
	sp.filter.stepAll = true
	waiting := sp.filter.waiting
	sp.filter.shown, sp.filter.opening, sp.filter.waiting, sp.filter.open = false, false, nil, nil
	sp.filter.released, sp.filter.jitSteps = false, 0
	if err := t.filterProtect(th, sp, 0, ^uint64(0), "soft-filter: JIT code shown for good (the program's own seccomp filter)"); err != nil {
		t.warnOp(err)
	}
	for _, w := range waiting {
		if t.threads[w.th.tid] == w.th {
			t.resume(w.th.tid, 0)
		}
	}
	t.filterUnpark(sp)
	t.spaceThreads(sp, func(u *thread) {
		if u != th && u.filter.free && !u.filter.vfork {
			unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_INTERRUPT, uintptr(u.tid), 0, 0, 0, 0)
		}
	})
}
