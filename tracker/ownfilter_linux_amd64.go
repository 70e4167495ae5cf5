package tracker

import (
	"errors"

	"golang.org/x/sys/unix"
)

// A seccomp filter of the program's own (tracker/doc.go, "Seccomp
// filters of the program's"). ptjit's filter stops every call that
// installs one (seccomp(SECCOMP_SET_MODE_FILTER), prctl(PR_SET_SECCOMP));
// from the first, the process is marked (process.ownFilter: a fork child
// inherits it, an exec keeps it, as the kernel keeps the filters), since a
// call ptjit injects into its threads from then on passes through a filter
// that may kill, trap or fail it:
//
//   - the batch pages are settled before the filter is in (the call is
//     skipped, the pages recorded and made executable at its exit stop,
//     and the call restarted: restartAround), and from then on W^X is
//     precise in the process (wxMode): a store into code is emulated and
//     written through /proc/PID/mem, which needs no protection change,
//     and no page is left writable and not executable. A fork child
//     inherits the pages as they are, with the filter, and no proxy:
//     a batch page of its parent's would need an mprotect before it
//     could run there (found by the new-user trial: such a child was
//     killed by SIGSYS);
//   - in a space with a protection proxy (made before the filter) the
//     protection changes W^X still makes go to the proxy (viaProxy):
//     those of a store the emulator cannot carry out,
//     which is stepped with its page writable. Without a proxy (a child
//     of the program, an attached process, --proxy=off, or after auto
//     gave the proxy up) they are injected, and those, and ptjit's own
//     filters for memory it starts to manage, may be refused: README,
//     "What ptjit cannot see";
//   - under --soft-filter=jit, which hides JIT code with injected
//     mprotect calls, the space stops hiding it and steps every thread
//     (filterStepAll): slower, but only JIT code is traced, as before.
//
// Found by the new-user trial: without this, a program that forbids
// mprotect after its start-up died (kill, trap) or had ptjit retry the
// same store for ever (EPERM) wherever no proxy ran the calls.

// errOwnFilter: ptjit adds no seccomp filter of its own to a process with
// a filter of the program's, which could refuse, trap or kill the
// seccomp call (a sandbox's allowlist: found by the new-user trial, a
// libseccomp default-kill filter killed the program at the first filter
// ptjit added after it). ownFilterEntry adds the filter that stops every
// mprotect before the program's is in; what later filters would have
// watched goes unseen, and each feature that wanted one says so once.
var errOwnFilter = errors.New("the program has a seccomp filter of its own, which could refuse the call that adds one")

// installsFilter reports whether op (at its seccomp stop) installs a
// seccomp filter. ptjit's filter stops seccomp and prctl only for these
// requests (Rules); the test keeps a program's filter that traces the
// same calls from being taken for one.
func installsFilter(op *pendingOp) bool {
	switch op.nr {
	case unix.SYS_SECCOMP:
		return op.args[0] == unix.SECCOMP_SET_MODE_FILTER
	case unix.SYS_PRCTL:
		return op.args[0] == unix.PR_SET_SECCOMP && op.args[1] == unix.SECCOMP_MODE_FILTER
	}
	return false
}

// ownFilterEntry handles the seccomp stop of a call that installs a
// filter of the program's (installsFilter; see above). It reports false,
// with nothing done, for any other call.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) ownFilterEntry(th *thread, regs unix.PtraceRegs, op *pendingOp) bool {
	if !installsFilter(op) {
		return false
	}
	p := th.proc
	if p.helper || p.space == nil || p.ownFilter {
		t.resume(th.tid, 0) // the launcher's, or not the first: nothing changes
		return true
	}
	sp := p.space
	fullFirst := (t.wxOn() || sp.filterOn()) && !p.full.on && !p.full.failed && !t.att.on
	if !fullFirst && len(sp.batchPages(0, ^uint64(0))) == 0 && !sp.filterOn() {
		p.ownFilter = true
		t.resume(th.tid, 0)
		return true
	}
	// p is marked once the work before the filter is done: the restarted
	// call stops here again and finds it marked
	return t.restartAround(th, regs, op, func(th *thread) {
		if fullFirst {
			// every mprotect stops from now on: no range filter can
			// be added later (errOwnFilter)
			t.ensureProtectSeen(th, 0, 0)
		}
		t.settleBatch(th, 0, ^uint64(0), "wx-batch: settled before the program's own seccomp filter")
		t.filterStepAll(th, sp)
		p.ownFilter = true
	})
}

// wxMode is the W^X mode of th's stores: --wx's, but precise in a process
// with a seccomp filter of its own (see above).
func (t *Tracer) wxMode(th *thread) WXMode {
	if th.proc.ownFilter {
		return WXPrecise
	}
	return t.opts.WX
}
