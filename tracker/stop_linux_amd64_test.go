package tracker

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestClassify: every wait status the tracer asks for, classified.
func TestClassify(t *testing.T) {
	const trap = int(unix.SIGTRAP)
	stopped := func(sig, event int) unix.WaitStatus { return unix.WaitStatus(0x7f | sig<<8 | event<<16) }
	cases := []struct {
		ws   unix.WaitStatus
		kind stopKind
		sig  int
	}{
		{unix.WaitStatus(3 << 8), stopExited, 3},
		{unix.WaitStatus(int(unix.SIGKILL)), stopKilled, int(unix.SIGKILL)},
		{stopped(int(unix.SIGSEGV), 0), stopSignal, int(unix.SIGSEGV)},
		{stopped(trap, 0), stopSignal, trap}, // a real SIGTRAP (int3)
		{stopped(trap|0x80, 0), stopSyscallExit, 0},
		{stopped(trap, unix.PTRACE_EVENT_SECCOMP), stopSeccomp, 0},
		{stopped(trap, unix.PTRACE_EVENT_CLONE), stopClone, 0},
		{stopped(trap, unix.PTRACE_EVENT_FORK), stopFork, 0},
		{stopped(trap, unix.PTRACE_EVENT_VFORK), stopVfork, 0},
		{stopped(trap, unix.PTRACE_EVENT_EXEC), stopExec, 0},
		{stopped(trap, unix.PTRACE_EVENT_EXIT), stopExit, 0},
		{stopped(int(unix.SIGSTOP), unix.PTRACE_EVENT_STOP), stopGroup, int(unix.SIGSTOP)},
		{stopped(int(unix.SIGTSTP), unix.PTRACE_EVENT_STOP), stopGroup, int(unix.SIGTSTP)},
		{stopped(trap, unix.PTRACE_EVENT_STOP), stopTrap, 0},
	}
	for _, c := range cases {
		k, sig := classifyStatus(c.ws)
		if k != c.kind || sig != c.sig {
			t.Errorf("status %#x: %v %d, want %v %d", uint32(c.ws), k, sig, c.kind, c.sig)
		}
	}
}

// TestStaleStop: a stop queued for a thread that has since reached its exit
// stop (SIGKILL woke it out of the queued one) is dropped by the loop; its
// exit and kill reports, and the stops of a thread not dying, are not.
func TestStaleStop(t *testing.T) {
	const trap = int(unix.SIGTRAP)
	stopped := func(sig, event int) unix.WaitStatus { return unix.WaitStatus(0x7f | sig<<8 | event<<16) }
	for _, c := range []struct {
		ws    unix.WaitStatus
		dying bool
		want  bool
	}{
		{stopped(int(unix.SIGSEGV), 0), true, true}, // a W^X fault queued before the kill
		{stopped(trap, unix.PTRACE_EVENT_SECCOMP), true, true},
		{stopped(trap|0x80, 0), true, true},
		{stopped(int(unix.SIGSTOP), unix.PTRACE_EVENT_STOP), true, true},
		{stopped(trap, unix.PTRACE_EVENT_EXIT), true, false},
		{unix.WaitStatus(int(unix.SIGKILL)), true, false},
		{unix.WaitStatus(3 << 8), true, false},
		{stopped(int(unix.SIGSEGV), 0), false, false},
		{stopped(trap, unix.PTRACE_EVENT_EXIT), false, false},
	} {
		if got := staleStop(&thread{dying: c.dying}, c.ws); got != c.want {
			t.Errorf("status %#x, dying %v: stale %v, want %v", uint32(c.ws), c.dying, got, c.want)
		}
	}
}

// TestClassifySeccomp: a seccomp stop is ptjit's when its event message is
// TraceData; any other is a RET_TRACE of the program's own filter, which
// fails with ENOSYS as with no tracer.
func TestClassifySeccomp(t *testing.T) {
	for _, c := range []struct {
		msg  uint
		ok   bool
		want stopKind
	}{
		{TraceData, true, stopSeccomp},
		{0, true, stopProgramTrace},  // RET_TRACE|0, libseccomp's SCMP_ACT_TRACE(0)
		{42, true, stopProgramTrace}, // the program's own data
		{0xffff, true, stopProgramTrace},
		{TraceData | 1, true, stopProgramTrace},
		{0, false, stopSeccomp}, // unreadable (thread gone): ptjit's path copes
	} {
		if got := classifySeccomp(c.msg, c.ok); got != c.want {
			t.Errorf("event message %#x (read %v): %v, want %v", c.msg, c.ok, got, c.want)
		}
	}
}

// TestPtraceWarning: which ptrace calls of the program get ptjit's warning.
func TestPtraceWarning(t *testing.T) {
	traced := func(tid int) bool { return tid == 200 || tid == 201 }
	for _, c := range []struct {
		req, target uint64
		want        string // a substring; "" for no warning
	}{
		{unix.PTRACE_TRACEME, 0, "ptrace(PTRACE_TRACEME) fails with EPERM"},
		{unix.PTRACE_ATTACH, 201, "ptrace(PTRACE_ATTACH, 201) fails with EPERM"},
		{unix.PTRACE_SEIZE, 200, "ptrace(PTRACE_SEIZE, 200) fails with EPERM"},
		{unix.PTRACE_SEIZE, 300, ""}, // a process ptjit does not trace: may work
		{unix.PTRACE_ATTACH, 300, ""},
		{unix.PTRACE_PEEKDATA, 200, ""},
		{unix.PTRACE_SEIZE, 200 | 1<<40, "PTRACE_SEIZE, 200)"}, // pid_t is 32 bits
	} {
		got := ptraceWarning(100, c.req, c.target, traced)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("ptrace(%#x, %d): %q, want %q", c.req, c.target, got, c.want)
		}
		if got != "" && !strings.Contains(got, "already traced by ptjit") {
			t.Errorf("ptrace(%#x, %d): %q does not say why", c.req, c.target, got)
		}
	}
}

// TestClassifySignal: whose a signal-delivery-stop is, from the signal, its
// siginfo, the thread's RIP and the tracer's state — no process needed.
func TestClassifySignal(t *testing.T) {
	const (
		segv = int(unix.SIGSEGV)
		trap = int(unix.SIGTRAP)
		rwx  = unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC
		rx   = unix.PROT_READ | unix.PROT_EXEC
		rw   = unix.PROT_READ | unix.PROT_WRITE
	)
	// One address space: RWX JIT code at 0x10000 (W^X keeps it RX), RX
	// JIT code at 0x20000, a write-protected alias at 0x30000 of the file
	// pages executable at 0x40000, a writable alias at 0x50000 that lost
	// its twin. The twin's page is being written through the alias
	// (batch: not executable until it runs).
	sp := &space{Space: NewSpace(&logSink{})}
	sp.Map(0x10000, 0x11000, rwx, nil, why("test"))
	sp.Map(0x20000, 0x21000, rx, nil, why("test"))
	sp.Map(0x40000, 0x41000, rx, nil, why("test"))
	sp.wxs().batch.set(0x40000, batchPage{alias: true})
	sp.alias.shared = []sharedMap{
		{start: 0x30000, end: 0x31000, dev: 1, inode: 2, view: rw, ro: true},
		{start: 0x40000, end: 0x41000, dev: 1, inode: 2, view: rx},
		{start: 0x50000, end: 0x51000, dev: 1, inode: 3, view: rw},
	}
	si := func(code int32, addr uint64) *siginfo { return &siginfo{Code: code, Addr: addr} }
	cases := []struct {
		name string
		s    signalStop
		want stopKind
	}{
		{"SIGTRAP ending a step", signalStop{sig: trap, si: si(trapTrace, 0), stepping: true}, stopStepTrap},
		{"SIGTRAP after a stepped syscall", signalStop{sig: trap, si: si(trapBrkpt, 0), stepping: true}, stopStepTrap},
		{"SIGTRAP, no step in flight (int3)", signalStop{sig: trap, si: si(trapBrkpt, 0)}, stopSignal},
		{"SIGTRAP sent by kill during a step", signalStop{sig: trap, si: si(0, 0), stepping: true}, stopSignal},
		{"SIGTRAP during a step, siginfo unreadable", signalStop{sig: trap, stepping: true}, stopSignal},
		{"SIGSEGV during a step, W^X off", signalStop{sig: segv, si: si(segvAccerr, 0x10008), stepping: true, sp: sp}, stopSignal},
		{"SIGUSR1", signalStop{sig: int(unix.SIGUSR1), wx: true, filter: true, sp: sp}, stopSignal},
		{"W^X store into RWX code", signalStop{sig: segv, si: si(segvAccerr, 0x10008), wx: true, sp: sp}, stopWXFault},
		{"W^X fetch from a batch page", signalStop{sig: segv, si: si(segvAccerr, 0x10000), regs: unix.PtraceRegs{Rip: 0x10000}, haveRIP: true, wx: true, sp: sp}, stopWXFault},
		{"W^X on, SEGV_MAPERR (null check)", signalStop{sig: segv, si: si(1, 0x8), wx: true, sp: sp}, stopSignal},
		{"W^X on, store into RX code (program's)", signalStop{sig: segv, si: si(segvAccerr, 0x20008), wx: true, sp: sp}, stopSignal},
		{"W^X on, SIGSEGV without siginfo", signalStop{sig: segv, wx: true, sp: sp}, stopSignal},
		{"store through a write-protected alias", signalStop{sig: segv, si: si(segvAccerr, 0x30010), wx: true, sp: sp}, stopAliasFault},
		{"store through an alias made writable, first", signalStop{sig: segv, si: si(segvAccerr, 0x50010), wx: true, sp: sp}, stopAliasFault},
		{"store through an alias made writable, retried", signalStop{sig: segv, si: si(segvAccerr, 0x50010), wx: true, sp: sp,
			stale: threadWX{lastStale: [2]uint64{0, 0x50010}}}, stopSignal},
		{"alias, W^X off", signalStop{sig: segv, si: si(segvAccerr, 0x30010), sp: sp}, stopSignal},
		{"fetch from an alias twin being written", signalStop{sig: segv, si: si(segvAccerr, 0x40000), regs: unix.PtraceRegs{Rip: 0x40000}, haveRIP: true, wx: true, sp: sp}, stopWXFault},
		{"fetch crossing into an alias twin being written", signalStop{sig: segv, si: si(segvAccerr, 0x40000), regs: unix.PtraceRegs{Rip: 0x3fffc}, haveRIP: true, wx: true, sp: sp}, stopWXFault},
		{"store into an alias twin being written (program's)", signalStop{sig: segv, si: si(segvAccerr, 0x40010), regs: unix.PtraceRegs{Rip: 0x20000}, haveRIP: true, wx: true, sp: sp}, stopSignal},
		{"alias twin being written, RIP unreadable", signalStop{sig: segv, si: si(segvAccerr, 0x40010), wx: true, sp: sp}, stopSignal},
		{"alias twin being written, W^X off", signalStop{sig: segv, si: si(segvAccerr, 0x40000), regs: unix.PtraceRegs{Rip: 0x40000}, haveRIP: true, sp: sp}, stopSignal},
		{"fetch from RX code: stale, retried", signalStop{sig: segv, si: si(segvAccerr, 0x20010), regs: unix.PtraceRegs{Rip: 0x20010}, haveRIP: true, wx: true, sp: sp}, stopWXFault},
		{"fetch from RX code, stale again: the program's", signalStop{sig: segv, si: si(segvAccerr, 0x20010), regs: unix.PtraceRegs{Rip: 0x20010}, haveRIP: true, wx: true, sp: sp,
			stale: threadWX{lastStale: [2]uint64{0x20010, 0x20010}}}, stopSignal},
		// a thread calling one function over and over while another's
		// batch cycles toggle its page (found by the new-user trial)
		{"fetch from RX code, the same fault after protections changed: stale again", signalStop{sig: segv, si: si(segvAccerr, 0x20010), regs: unix.PtraceRegs{Rip: 0x20010}, haveRIP: true, wx: true, sp: sp,
			stale: threadWX{lastStale: [2]uint64{0x20010, 0x20010}, staleGen: 7}}, stopWXFault},
		{"fetch from RX code, stale again too often: the program's", signalStop{sig: segv, si: si(segvAccerr, 0x20010), regs: unix.PtraceRegs{Rip: 0x20010}, haveRIP: true, wx: true, sp: sp,
			stale: threadWX{lastStale: [2]uint64{0x20010, 0x20010}, staleGen: 7, staleRepeats: maxStaleRepeats}}, stopSignal},
		{"fetch from RX code, W^X off", signalStop{sig: segv, si: si(segvAccerr, 0x20010), regs: unix.PtraceRegs{Rip: 0x20010}, haveRIP: true, sp: sp}, stopSignal},
		{"filter: fetch from an alias twin being written", signalStop{sig: segv, si: si(segvAccerr, 0x40000), regs: unix.PtraceRegs{Rip: 0x40000}, haveRIP: true, filter: true, wx: true, sp: sp}, stopFilterFault},
		{"filter: fetch from hidden JIT code", signalStop{sig: segv, si: si(segvAccerr, 0x20010), regs: unix.PtraceRegs{Rip: 0x20010}, haveRIP: true, filter: true, sp: sp}, stopFilterFault},
		{"filter: fetch crossing into a hidden page", signalStop{sig: segv, si: si(segvAccerr, 0x20000), regs: unix.PtraceRegs{Rip: 0x1fffe}, haveRIP: true, filter: true, sp: sp}, stopFilterFault},
		{"filter: fetch before W^X", signalStop{sig: segv, si: si(segvAccerr, 0x10000), regs: unix.PtraceRegs{Rip: 0x10000}, haveRIP: true, filter: true, wx: true, sp: sp}, stopFilterFault},
		{"filter: a store, W^X on", signalStop{sig: segv, si: si(segvAccerr, 0x10008), regs: unix.PtraceRegs{Rip: 0x20000}, haveRIP: true, filter: true, wx: true, sp: sp}, stopWXFault},
		{"filter: a store, W^X off", signalStop{sig: segv, si: si(segvAccerr, 0x10008), regs: unix.PtraceRegs{Rip: 0x20000}, haveRIP: true, filter: true, sp: sp}, stopSignal},
		{"filter: fetch from untracked memory", signalStop{sig: segv, si: si(segvAccerr, 0x60000), regs: unix.PtraceRegs{Rip: 0x60000}, haveRIP: true, filter: true, sp: sp}, stopSignal},
		{"filter: RIP unreadable", signalStop{sig: segv, si: si(segvAccerr, 0x20010), filter: true, sp: sp}, stopSignal},
	}
	for _, c := range cases {
		if got := classifySignal(c.s); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStopKindString: every kind has its own name.
func TestStopKindString(t *testing.T) {
	seen := map[string]stopKind{}
	for k := stopExited; k <= stopOther; k++ {
		s := k.String()
		if prev, dup := seen[s]; dup || strings.HasPrefix(s, "stopKind(") {
			t.Errorf("stopKind %d: name %q (also %d)", k, s, prev)
		}
		seen[s] = k
	}
	if got := stopKind(200).String(); got != "stopKind(200)" {
		t.Errorf("stopKind(200).String() = %q", got)
	}
}
