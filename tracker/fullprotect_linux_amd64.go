package tracker

import (
	"errors"

	"golang.org/x/sys/unix"
)

// One event per code version. The launch filter stops
// mprotect and pkey_mprotect only when their prot has PROT_EXEC: a call
// without it can only take execute permission away, or leave memory
// non-executable, and nothing runs from memory that is not executable, so
// the next call that adds PROT_EXEC (which stops) records the version
// complete. A JIT toggling its code area RW↔RX (LuaJIT) stops once per
// version instead of twice.
//
// What ptjit then no longer sees is the end of a version: the Space keeps
// a piece the program made non-executable unseen until the next call over
// it that adds PROT_EXEC, an munmap, an mmap over it, or the process's end
// ends it. Such ends are recorded as inexact (versions.end_inexact: the
// last time the version was known executable, or the next version's
// start), and a call that adds PROT_EXEC over a piece recorded while
// removals were unseen (Piece.loose) always records a new version read
// from the program: it may have been made writable and written in
// between (Space.RemovalUnseen).
//
// Memory ptjit manages needs every call: W^X and writable aliases keep the
// kernel's protection different from the program's (PROT_WRITE taken
// away), the soft filter too (PROT_EXEC taken away), and each must follow
// every protection change the program makes there, or it would later put
// back a protection the program gave up. So before ptjit first sets a
// kernel protection other than the program's in a process, it adds a
// second filter there, FullProtectRules (every mprotect and pkey_mprotect
// stops) or, where it knows the range, RangeProtectRules (those of the
// range stop; see "Ranges" below), to all its threads at once
// (SECCOMP_FILTER_FLAG_TSYNC).
// Filters only stack; this one stays for the life of the process, and
// forks and execs keep it, as the kernel does. The two places that set
// such a protection are:
//
//   - an injected mprotect (Tracer.protect), at a syscall-exit stop or a
//     signal-delivery stop: the filter is injected first, in the same
//     stopped thread;
//   - the protection of a program's own call rewritten at its seccomp
//     stop (entryRewrites). A syscall cannot be injected at a seccomp
//     stop, so the call is skipped (syscall number -1), the filter is
//     injected at the skipped call's exit stop, and the thread restarts
//     the call from its syscall instruction (RIP back by 2, RAX the
//     number): it stops again, now with the filter in place, and is
//     rewritten as usual. The filter is in place before the call runs,
//     so no other thread's call on that memory can slip in between.
//
// Every other thread of the process is running while this happens; a
// call one of them makes before the filter is in place concerns memory
// ptjit does not manage yet (it becomes managed only by the call being
// handled), so it is a plain call of the first kind.
//
// Where TSYNC fails (a thread of the process installed a filter of its
// own, so the threads' filter trees differ), ptjit warns once and goes on
// with the launch filter: a protection change that adds no PROT_EXEC to
// managed memory is then not seen (the blind spot of a process without
// the full filter). A CLONE_VM process (not a thread) sharing an address
// space keeps the filters of its own creation: its Space stays in the
// RemovalUnseen mode, which is always correct for the history.

// Ranges, not the whole process. Where the memory about to be managed is
// known (an injected mprotect's range, the program's mprotect or MAP_FIXED
// mmap being rewritten), the filter ptjit adds stops only the calls whose
// range overlaps it, widened to rangeGrain (RangeProtectRules); each new
// range outside those covered adds a filter, and after maxRangeFilters
// (or for an mmap whose address the kernel picks) the filter that stops
// every mprotect replaces them. Java's code cache is three MAP_FIXED
// mappings; of the 268 mprotect stops the full filter cost a run of
// testdata/Hot.java, about 250 were for memory outside it (BENCHMARKS.md,
// 2026-11-25). Outside the covered ranges the launch filter's blind spot
// stays, and the Space knows it (Space.Seen): a piece there is recorded as
// when removals are unseen. A call that moves managed memory (mremap) gives
// the process the full filter at its exit stop: the new address is only
// known to the thread ptjit holds there.

// rangeGrain is the alignment a managed range is widened to: one filter
// covers a JIT's neighbouring allocations.
const rangeGrain = 16 << 20

// grainRange is [lo, hi) widened to rangeGrain.
func grainRange(lo, hi uint64) ival {
	r := ival{lo &^ (rangeGrain - 1), (hi + rangeGrain - 1) &^ (rangeGrain - 1)}
	if r.e < hi {
		r.e = ^uint64(0) &^ (pageSize - 1) // the top of the address space
	}
	return r
}

// kwRange is the range the next kernel-write filter of p covers for code
// in [lo, hi) (ensureKernelWritesSeen): for the first kwExactFilters of
// p's, the mapping that holds it, as the program mapped it (the live part
// of its region), or [lo, hi) itself (a writable alias is
// write-protected as a whole mapping); after them,
// [lo, hi) widened to rangeGrain, so that one filter covers a JIT's
// neighbouring allocations; the last of maxRangeFilters covers every
// address (everyAddr), so that a copy into code anywhere works (found by
// the new-user trial: code in nine mappings far apart, and reads into the
// ninth failed with EFAULT). Every read(2) whose buffer lies in a covered
// range stops, code or not: Erlang reads into memory next to its 8 MiB
// JIT area and stats into thread stacks next to a 4 KiB one, so a 16 MiB
// grain stopped 1,103 of its reads and 353 of its newfstatats, in a run
// of 2,207 stops (BENCHMARKS.md, 2026-11-27, 10:40).
func kwRange(p *process, lo, hi uint64) ival {
	if len(p.full.kw) == maxRangeFilters-1 {
		return everyAddr
	}
	if sp := p.space; sp != nil && len(p.full.kw) < kwExactFilters {
		if _, v, ok := sp.livePart(lo, hi); ok {
			return v
		}
		// a writable alias (write-protected as a whole: its range is
		// the mapping's), memory being mapped
		return ival{lo &^ (pageSize - 1), pageUp(hi)}
	}
	return grainRange(lo, hi)
}

// everyAddr is the whole address space, as a range.
var everyAddr = ival{0, ^uint64(0) &^ (pageSize - 1)}

// kwExactFilters: the kernel-write filters of a process that cover a
// mapping exactly (kwRange); the others of its maxRangeFilters are
// widened. Two: a JIT's code area and one more (Erlang's: its JIT area
// and a page of trampolines); Guile's JIT spreads over more mappings,
// three 16 MiB grains on this machine.
const kwExactFilters = 2

// maxRangeFilters bounds the range filters of a process; then the filter
// that stops every mprotect replaces them (every filter runs on every
// syscall the program makes).
const maxRangeFilters = 8

// fullProtectState is what a process keeps about FullProtectRules.
type fullProtectState struct {
	on     bool // the process has the filter that stops every mprotect
	failed bool // injecting it failed (warned); not tried again
	// ranges: what the process's range filters cover (RangeProtectRules),
	// one per filter; unused once on
	ranges []ival
	// kw: the ranges whose kernel copies stop (KernelWriteRules), one
	// per filter, the last of maxRangeFilters every address; kwFailed:
	// adding one failed (warned); kwWarned: the
	// warning that the ranges ran out was given
	kw                 []ival
	kwFailed, kwWarned bool
	// kwVec: the process has KernelWriteVecRules (or adding it failed,
	// warned)
	kwVec bool
	// calls: the process has AliasRules (every mprotect, munmap and
	// MAP_FIXED mmap stops; wx_alias_linux_amd64.go); alias: the shared
	// mappings its AliasRangeRules filters cover, one per filter
	calls bool
	alias []ival
	// filters counts the filters of every kind ptjit injected in the
	// process (inherited over fork and exec, as the filters are)
	filters int
}

// clone is the state a fork child starts with (it inherits the filters).
func (f fullProtectState) clone() fullProtectState {
	f.ranges = append([]ival(nil), f.ranges...)
	f.kw = append([]ival(nil), f.kw...)
	f.alias = append([]ival(nil), f.alias...)
	return f
}

// seen reports whether every mprotect of [lo, hi) in the process stops.
func (f *fullProtectState) seen(lo, hi uint64) bool {
	return f.on || lo < hi && ivalsCover(f.ranges, lo, hi)
}

// ensureProtectSeen makes every mprotect of [lo, hi) in th's process stop
// (every mprotect at all when lo >= hi: the range is not known): a range
// filter, or the full one (see above). th is at a syscall-exit stop or a
// signal-delivery-stop (inject's precondition).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) ensureProtectSeen(th *thread, lo, hi uint64) {
	if t.att.on {
		return // no filter in an attached process (attach_linux_amd64.go)
	}
	p := th.proc
	if p.full.failed || p.full.seen(lo, hi) {
		t.ensureKernelWritesSeen(th, lo, hi)
		return
	}
	if lo < hi && len(p.full.ranges) < maxRangeFilters {
		r := grainRange(lo, hi)
		err := t.injectFilter(th, RangeProtectRules([]AddrRange{{r.s, r.e}}))
		if err == nil {
			if len(p.full.ranges) == 0 {
				t.result.Stats.RangeProtect++
			}
			t.result.Stats.RangeFilters++
			p.full.ranges = append(p.full.ranges, r)
			// a filter of its own: both rule sets in one are too far
			// apart for the filter's 8-bit jumps
			t.ensureKernelWritesSeen(th, lo, hi)
			if sp := p.space; sp != nil && sp.refs == 1 {
				sp.Seen = append(sp.Seen, r)
			}
			return
		}
		if errors.Is(err, ErrThreadGone) {
			return
		}
		// the full filter below warns if it fails too
	}
	if err := t.injectFilter(th, FullProtectRules); err != nil {
		if errors.Is(err, ErrThreadGone) {
			return
		}
		p.full.failed = true
		t.warnf("pid %d: cannot add the filter that stops every mprotect (%v): protection changes without "+
			"PROT_EXEC to memory ptjit manages (W^X, aliases, the soft filter) are not seen", p.pid, err)
		return
	}
	p.full.on = true
	t.result.Stats.FullProtect++
	if sp := p.space; sp != nil && sp.refs == 1 {
		sp.RemovalUnseen = false
	}
	t.ensureKernelWritesSeen(th, lo, hi)
}

// ensureKernelWritesSeen makes the calls that copy into a buffer of [lo,
// hi) stop (KernelWriteRules, kwrite_linux_amd64.go) where W^X is on and
// the process's range filters do not cover it yet: a filter for the range
// widened to rangeGrain, up to maxRangeFilters of them. An empty range
// (not known: an mmap whose address the kernel picks) adds none; the
// call's exit adds it once the range is known (rewriteEffect).
//
// Precondition: on the locked tracer thread; th is at a syscall-exit stop
// or a signal-delivery-stop.
func (t *Tracer) ensureKernelWritesSeen(th *thread, lo, hi uint64) {
	p := th.proc
	if !t.wxOn() || lo >= hi || p.full.kwFailed || ivalsCover(p.full.kw, lo, hi) {
		return
	}
	r := kwRange(p, lo, hi)
	if r == everyAddr && !p.full.kwWarned {
		p.full.kwWarned = true
		t.warnf("pid %d: code W^X protects lies in more than %d places: every read(2) and the like of the process stops from now on (slower, not wrong)", p.pid, maxRangeFilters-1)
	}
	if err := t.injectFilter(th, KernelWriteRules([]AddrRange{{r.s, r.e}})); err != nil {
		if !errors.Is(err, ErrThreadGone) {
			p.full.kwFailed = true
			t.warnf("pid %d: cannot add the filter that stops kernel copies into code W^X protects (%v): "+
				"a read(2) or the like there fails with EFAULT", p.pid, err)
		}
		return
	}
	p.full.kw = append(p.full.kw, r)
	if !p.full.kwVec {
		// the calls with arrays of buffers, once (a filter of its own:
		// see above)
		if err := t.injectFilter(th, KernelWriteVecRules()); err != nil {
			if !errors.Is(err, ErrThreadGone) {
				t.warnf("pid %d: cannot add the filter that stops readv(2) and the like (%v): "+
					"such a call into code W^X protects fails with EFAULT", p.pid, err)
			}
		}
		p.full.kwVec = true
	}
}

// restartForFullProtect handles the seccomp stop of a call whose
// protection ptjit is about to rewrite (op, with th's registers regs) in a
// process without the full filter: the call is skipped, the filter added
// at its exit stop, and the call restarted; it reports false, with nothing
// done, when the process has the filter or cannot get it. A signal that
// arrives meanwhile is held and sent again as the thread resumes, so it is
// delivered before the restarted call runs (as when the kernel restarts a
// call a signal interrupted).
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) restartForFullProtect(th *thread, regs unix.PtraceRegs, op *pendingOp) bool {
	p := th.proc
	lo, hi := opRange(op)
	if p.full.failed || p.full.seen(lo, hi) {
		return false
	}
	return t.restartAround(th, regs, op, func(th *thread) { t.ensureProtectSeen(th, lo, hi) })
}

// opRange is the range a call ptjit rewrites will change: an mprotect's or
// pkey_mprotect's, a MAP_FIXED mmap's; empty (not known) for an mmap whose
// address the kernel picks, and for any other call.
func opRange(op *pendingOp) (lo, hi uint64) {
	a := op.args
	switch {
	case op.nr == unix.SYS_MPROTECT || op.nr == unix.SYS_PKEY_MPROTECT,
		op.nr == unix.SYS_MMAP && a[3]&unix.MAP_FIXED != 0:
		if op.rng.e > op.rng.s {
			return op.rng.s, op.rng.e
		}
	}
	return 0, 0
}

// restartAround skips the call th is stopped at the seccomp stop of (op,
// with th's registers regs), runs at(th) at its exit stop, where ptjit can
// act in the tracee, and restarts the call, which stops again. It reports
// true: the thread was resumed, or is gone.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) restartAround(th *thread, regs unix.PtraceRegs, op *pendingOp, at func(*thread)) bool {
	skip := regs
	skip.Orig_rax = ^uint64(0)
	if err := unix.PtraceSetRegs(th.tid, &skip); err != nil {
		return errors.Is(err, unix.ESRCH) // gone: nothing more to do
	}
	for {
		if err := unix.PtraceSyscall(th.tid, 0); err != nil {
			return true // gone (ESRCH): its exit report follows
		}
		kind, sig, err := t.waitThread(th)
		if err != nil {
			return true // gone
		}
		if kind == stopSyscallExit {
			break
		}
		if kind == stopSignal {
			t.hold(th, sig)
		}
	}
	at(th)
	r := regs
	r.Rip = op.ip
	r.Rax = uint64(op.nr)
	r.Orig_rax = ^uint64(0)
	if err := unix.PtraceSetRegs(th.tid, &r); err != nil && !errors.Is(err, unix.ESRCH) {
		t.warnf("tid %d: restarting syscall %d: %v", th.tid, op.nr, err)
	}
	t.resume(th.tid, 0)
	return true
}

// seenEffect (exitEffects): an mremap took memory out of ranges whose
// every mprotect stops (or grew it past them); the memory where it is now
// gets the same. The new address is known only to the thread
// ptjit holds at this exit stop, so no other thread's call can slip in
// before.
func (t *Tracer) seenEffect(x *sysExit) {
	if x.op.nr != unix.SYS_MREMAP || x.p.full.on {
		return
	}
	lo, hi := x.out.s, x.out.e
	for _, r := range x.p.full.ranges {
		if x.op.rng.s < r.e && x.op.rng.e > r.s {
			t.ensureProtectSeen(x.th, lo, hi)
			return
		}
	}
}
