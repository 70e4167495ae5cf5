package tracker

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// One place classifies every stop. classify looks at the wait status and,
// for a signal-delivery-stop, at the signal's siginfo and the tracer's
// state, and says once what the stop is; Tracer.handle dispatches on the
// result. The decisions themselves (classifyStatus, classifySignal) are
// pure functions, tested by tables.

// stopKind is what one wait4 report means.
type stopKind uint8

const (
	stopExited       stopKind = iota // the thread exited (WIFEXITED)
	stopKilled                       // the thread was killed by a signal (WIFSIGNALED)
	stopSignal                       // signal-delivery-stop of the program's own signal: delivered unchanged
	stopStepTrap                     // --pt=soft: the trap that ends a single-step; consumed
	stopFilterFault                  // --soft-filter=jit: SIGSEGV fetching hidden code; consumed
	stopWXFault                      // W^X: SIGSEGV on memory the program has writable and executable; consumed
	stopAliasFault                   // W^X: SIGSEGV storing through a write-protected alias (or one made writable again meanwhile); consumed
	stopGroup                        // group-stop (PTRACE_EVENT_STOP, stop signal): PTRACE_LISTEN
	stopTrap                         // PTRACE_EVENT_STOP with SIGTRAP: attach stop of a new tracee, or the wake-up after LISTEN
	stopSeccomp                      // PTRACE_EVENT_SECCOMP from ptjit's filter: a filtered syscall's entry
	stopProgramTrace                 // PTRACE_EVENT_SECCOMP from the program's own filter (RET_TRACE): fails with ENOSYS as with no tracer
	stopSyscallExit                  // syscall-exit-stop (SIGTRAP|0x80, TRACESYSGOOD)
	stopClone                        // PTRACE_EVENT_CLONE
	stopFork                         // PTRACE_EVENT_FORK
	stopVfork                        // PTRACE_EVENT_VFORK
	stopExec                         // PTRACE_EVENT_EXEC
	stopExit                         // PTRACE_EVENT_EXIT: about to exit, still inspectable
	stopVforkDone                    // PTRACE_EVENT_VFORK_DONE (--soft-filter only): a vfork parent runs again
	stopOther                        // an event we did not ask for; resume it
)

var stopNames = [...]string{"exited", "killed", "signal", "step-trap", "filter-fault", "wx-fault", "alias-fault",
	"group-stop", "trap", "seccomp", "program-trace", "syscall-exit", "clone", "fork", "vfork", "exec", "exit", "vfork-done", "other"}

func (k stopKind) String() string {
	if int(k) < len(stopNames) {
		return stopNames[k]
	}
	return fmt.Sprintf("stopKind(%d)", k)
}

// si_code values (asm-generic/siginfo.h).
const (
	segvAccerr = 2 // SIGSEGV: invalid permissions for the mapped object
	trapBrkpt  = 1 // SIGTRAP: the report after a stepped syscall
	trapTrace  = 2 // SIGTRAP: a single-step
)

// classifyStatus decodes a wait status (wait4 with __WALL on a
// PTRACE_SEIZE'd tracee). sig is the exit code for stopExited, the signal
// for stopKilled, stopSignal and stopGroup, else 0. A signal-delivery-stop
// is stopSignal here; classifySignal tells whose signal it is.
func classifyStatus(ws unix.WaitStatus) (kind stopKind, sig int) {
	switch {
	case ws.Exited():
		return stopExited, ws.ExitStatus()
	case ws.Signaled():
		return stopKilled, int(ws.Signal())
	case !ws.Stopped():
		return stopOther, 0
	}
	stopsig := int(ws>>8) & 0xff
	event := int(ws >> 16)
	switch event {
	case 0:
		if stopsig == int(unix.SIGTRAP)|0x80 {
			return stopSyscallExit, 0
		}
		return stopSignal, stopsig
	case unix.PTRACE_EVENT_STOP:
		switch unix.Signal(stopsig) {
		case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
			return stopGroup, stopsig
		}
		return stopTrap, 0
	case unix.PTRACE_EVENT_SECCOMP:
		return stopSeccomp, 0
	case unix.PTRACE_EVENT_CLONE:
		return stopClone, 0
	case unix.PTRACE_EVENT_FORK:
		return stopFork, 0
	case unix.PTRACE_EVENT_VFORK:
		return stopVfork, 0
	case unix.PTRACE_EVENT_EXEC:
		return stopExec, 0
	case unix.PTRACE_EVENT_EXIT:
		return stopExit, 0
	case unix.PTRACE_EVENT_VFORK_DONE:
		return stopVforkDone, 0
	}
	return stopOther, 0
}

// classifySeccomp says whose filter made a PTRACE_EVENT_SECCOMP stop, from
// its event message (the filter's SECCOMP_RET_DATA): ptjit's filters all
// return TraceData; any other value is a RET_TRACE of a filter the program
// installed itself. ok false (the message could not be read: the thread
// died) counts as ptjit's, whose handling copes with a vanished thread.
func classifySeccomp(msg uint, ok bool) stopKind {
	if ok && msg != TraceData {
		return stopProgramTrace
	}
	return stopSeccomp
}

// signalStop is what classifySignal looks at: a signal-delivery-stop's
// signal, its siginfo and RIP where they were needed and could be read,
// and the tracer's state for the thread.
type signalStop struct {
	sig      int
	si       *siginfo        // nil: not needed, or not readable
	regs     unix.PtraceRegs // the thread's registers, when haveRIP
	haveRIP  bool
	stepping bool     // a --pt=soft single-step is in flight
	filter   bool     // the space traces only JIT code, hidden or once hidden (--soft-filter=jit)
	wx       bool     // W^X is on for the space
	sp       *space   // the thread's address space
	stale    threadWX // thread.wx: its last fault retried as stale
}

// fetchFault reports whether a fault at addr with the thread at rip is an
// instruction fetch: at RIP, or at the next page boundary for an
// instruction that crosses it.
func fetchFault(addr, rip uint64) bool {
	return addr == rip || addr&(pageSize-1) == 0 && addr > rip && addr < rip+16
}

// classifySignal says whose a signal-delivery-stop is. The order is the
// order of precedence: a step in flight first (its trap), then the soft
// filter (a fetch from code it hides), then W^X (a page the program has
// RWX), then the writable aliases; anything else is the program's.
func classifySignal(s signalStop) stopKind {
	switch {
	case s.sig == int(unix.SIGTRAP) && s.stepping && s.si != nil && (s.si.Code == trapTrace || s.si.Code == trapBrkpt):
		return stopStepTrap
	case s.sig != int(unix.SIGSEGV) || s.si == nil || s.si.Code != segvAccerr:
		return stopSignal
	}
	addr := s.si.Addr
	if s.filter && s.haveRIP && fetchFault(addr, s.regs.Rip) {
		if _, ok := s.sp.PieceAt(addr); ok {
			return stopFilterFault
		}
	}
	if !s.wx {
		return stopSignal
	}
	return classifyWX(s, addr)
}

// classifyWX says whose an access fault at addr is with W^X on: W^X's (a
// page the program has RWX, a fetch from an alias's executable twin, a
// stale fetch), the writable aliases', or the program's.
func classifyWX(s signalStop, addr uint64) stopKind {
	p, tracked := s.sp.PieceAt(addr)
	if tracked && isWX(p.Prot) {
		return stopWXFault
	}
	fetch := s.haveRIP && fetchFault(addr, s.regs.Rip)
	if bp, ok := s.sp.wx.batch.get(addr &^ (pageSize - 1)); ok && bp.alias {
		// an alias's executable twin while the alias is written: a
		// fetch is W^X's, anything else the program's own fault
		if fetch {
			return stopWXFault
		}
		return stopSignal
	}
	if tracked && fetch && p.Prot&unix.PROT_EXEC != 0 && s.stale.staleAgain([2]uint64{s.regs.Rip, addr}, s.sp.wx.gen) {
		// a fetch from code the program has executable: stale (another
		// thread's fault made it executable again meanwhile, as when
		// several threads enter an alias twin's batch page), retried
		// by wxFault: once, and again after each change of the
		// protections (threadWX.staleAgain)
		return stopWXFault
	}
	if _, ok := s.sp.aliasAt(addr); ok || s.sp.aliasRetry(addr, s.stale.lastStale) {
		return stopAliasFault
	}
	return stopSignal
}

// classify says what th's stop is. For a seccomp stop it reads the event
// message (classifySeccomp). For a signal-delivery-stop it reads
// what classifySignal needs, and only that: the siginfo of a SIGTRAP while
// a step is in flight or of a SIGSEGV a feature may own, and RIP for the
// soft filter's fetch test.
//
// Precondition: on the locked tracer thread; th is stopped (or gone).
func (t *Tracer) classify(th *thread, ws unix.WaitStatus) (stopKind, int, signalStop) {
	kind, sig := classifyStatus(ws)
	if kind == stopSeccomp {
		msg, err := unix.PtraceGetEventMsg(th.tid)
		return classifySeccomp(msg, err == nil), 0, signalStop{}
	}
	if kind != stopSignal {
		return kind, sig, signalStop{}
	}
	sp := th.proc.space
	own := sp != nil && !th.proc.helper
	s := signalStop{sig: sig, sp: sp, stale: th.wx,
		stepping: t.soft != nil && t.softEligible(th) && t.stepOf(th).active,
		filter:   own && sp.traceJITOnly(), // also a fault from code hidden before filterStepAll
		wx:       own && t.wxOn(),
	}
	if sig == int(unix.SIGTRAP) && s.stepping || sig == int(unix.SIGSEGV) && (s.filter || s.wx) {
		if si, err := getSiginfo(th.tid); err == nil {
			s.si = &si
		}
	}
	if sig == int(unix.SIGSEGV) && s.si != nil && s.si.Code == segvAccerr && (s.filter || s.wx && sp.fetchMatters(s.si.Addr)) {
		if regs, err := getRegs(th.tid); err == nil {
			s.regs, s.haveRIP = regs, true
		}
	}
	return classifySignal(s), sig, s
}
