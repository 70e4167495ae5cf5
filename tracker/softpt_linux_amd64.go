package tracker

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/snapshot"
	"github.com/ptjit/ptjit/softpt"
	"github.com/ptjit/ptjit/x86"
	"golang.org/x/sys/unix"
)

// Software PT (ptjit run --pt=soft). Every thread of the program is
// resumed with PTRACE_SINGLESTEP instead of PTRACE_CONT; each step is one
// instruction, read from the tracee (so self-modified code is seen as it
// executes) before the step and reported to the softpt.Session with the IP
// execution continued at. The session turns that into the packets a CPU
// would emit. The places where a step meets the rest of the tracker:
//
//   - a step trap (SIGTRAP with si_code TRAP_TRACE, or TRAP_BRKPT for the
//     report after a stepped syscall) completes the step and is consumed;
//   - a syscall-exit stop completes a stepped syscall (resuming from it
//     with PTRACE_SINGLESTEP would run one more instruction before the
//     trap); the step is reported when the thread resumes, after the
//     tracker recorded the syscall's effect, so that the TIP.PGE's time
//     is after every version the syscall made valid;
//   - any other stop while a step is in flight and the thread is still at
//     the instruction means the instruction did not retire (a fault, a
//     signal): the trace gets FUP+TIP.PGD there and TIP.PGE when the thread
//     resumes — the gap in which code versions recorded meanwhile apply;
//   - a signal delivered with a handler: the kernel reports a trap at the
//     handler's first instruction before running it (TIP.PGE there);
//   - exec ends the old image's trace (TIP.PGD) and the new image starts
//     with COMM(exec) and its MMAP2 records; exit ends the thread's trace.
//
// A rep-prefixed string instruction traps after each iteration with the IP
// unchanged: a non-branch instruction that traps at its own IP has not
// retired yet and is stepped again.
//
// A step can also run past its instruction. The SDM (Vol. 3B, 17.3.1.4)
// makes the single-step #DB a trap after every instruction that starts with
// TF set, but a hypervisor that intercepts an instruction and emulates it
// must raise that trap itself, and some do not: on PVM guests (and other
// VMMs with the same omission) the trap after CPUID is lost, and the thread
// stops only after the next instruction. A step that ends where its
// instruction cannot lead is explained by lostTrapPath (the instructions
// between are read from the tracee); one that cannot be explained becomes
// a gap in the trace (FUP, TIP.PGD, TIP.PGE), never a flow that decodes
// wrongly.

type softState struct {
	s   *softpt.Session
	buf [x86.MaxInsnLen]byte
	// code caches decoded instructions of file-backed, read-only code,
	// whose bytes cannot change while mapped; any file mapping change
	// clears it. Other code is read from the tracee at every step.
	code map[*space]map[uint64]x86.Insn
	// path is lostTrapPath's buffer; lostWarned: the one warning about a
	// step that could not be explained was given.
	path       []x86.Insn
	lostWarned bool
}

type stepState struct {
	started bool     // the session knows the thread
	active  bool     // a PTRACE_SINGLESTEP is in flight
	valid   bool     // insn holds the instruction being stepped
	handler bool     // the resume delivers a signal to a handler
	exiting bool     // past PTRACE_EVENT_EXIT: nothing more runs
	exited  bool     // the stepped syscall reached its syscall-exit stop
	insn    x86.Insn // the instruction being stepped
	ip      uint64   // where the thread is, when haveIP (read at the last step trap)
	haveIP  bool
	progTF  bool   // the program's last popf set the trap flag (stepFlags)
	gen     uint64 // the space's Gen when the thread last stepped
}

func newSoftState(s *softpt.Session) *softState {
	return &softState{s: s, code: map[*space]map[uint64]x86.Insn{}}
}

// softEligible: the thread runs the program (not the launcher).
func (t *Tracer) softEligible(th *thread) bool {
	return th != nil && th.proc != nil && !th.proc.helper && !th.helper && th.recorded
}

// stepOf returns th's single-stepping state, made at its first use.
func (t *Tracer) stepOf(th *thread) *stepState {
	if th.step == nil {
		th.step = &stepState{}
	}
	return th.step
}

// The stops of a thread that runs the program, as software PT sees them
// (Tracer.handle calls these before its own handling of the stop).

// softStepTrap handles a stopStepTrap: the step in flight completed.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) softStepTrap(th *thread) {
	t.softComplete(th, t.stepOf(th))
	t.filterMaybeClose(th)
	t.resume(th.tid, 0)
}

// softSignal: a signal-delivery-stop that is not a step trap came while a
// step was in flight.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) softSignal(th *thread) {
	if t.soft == nil || !t.softEligible(th) {
		return
	}
	if st := t.stepOf(th); st.active {
		t.softNotRetired(th, st)
	}
}

// softFaultDone: a W^X fault stopped th's step in flight (the fault is
// ptjit's own, the program never sees it), and ptjit handled it. Where it
// carried the instruction out (emulated its store, or stepped it with the
// page opened) the thread is past it: the instruction retired, as it does
// without W^X. Where it made the page writable, or executable again, the
// thread is still at it: the step is ended as interrupted there, and the
// instruction is stepped anew at the resume, after a PSB+ that times it
// after the version the fault may have recorded (a batch page run: perf,
// reading the code from the exported jitdump by time, found no code for
// it when the step simply went on). Found by
// the new-user trial: an emulated store in JIT code was missing from both
// the trace and the ground truth (the step was taken as interrupted), so
// the flow differed with the W^X mode.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) softFaultDone(th *thread) {
	if t.soft == nil || !t.softEligible(th) || t.threads[th.tid] != th {
		return
	}
	st := t.stepOf(th)
	if !st.active {
		return
	}
	regs, err := getRegs(th.tid)
	if err != nil {
		return
	}
	if st.valid && regs.Rip == st.insn.IP {
		t.softNotRetired(th, st)
		return
	}
	t.softComplete(th, st)
}

// softSyscallExit: the stepped syscall is done, but the tracker records its
// effect (new code versions) only now: the step completes when the thread
// is resumed, so that the trace's TIP.PGE (and its TSC) comes after those
// versions became valid.
func (t *Tracer) softSyscallExit(th *thread) {
	if t.soft == nil || !t.softEligible(th) {
		return
	}
	if st := t.stepOf(th); st.active && st.valid && (st.insn.Class == x86.ClassSyscall || !st.insn.Class.IsBranch()) {
		// A stepped non-branch lost its trap and the syscall after it
		// ran (lostTrapPath).
		st.exited = true
	}
}

// softExec ends the old image's trace; the new one starts with COMM(exec).
func (t *Tracer) softExec(th *thread) {
	if t.soft == nil || !t.softEligible(th) {
		return
	}
	st := t.stepOf(th)
	tsc := clock.RDTSC()
	if st.active && st.valid && st.insn.Class == x86.ClassSyscall {
		t.soft.s.StepExit(th.tid, &st.insn, tsc) // the execve
	}
	t.soft.s.Disable(th.tid, tsc)
	st.active, st.valid = false, false
	t.soft.s.Comm(th.proc.pid, th.tid, t.commOf(th), true, tsc)
}

// softExit ends the thread's trace at PTRACE_EVENT_EXIT.
func (t *Tracer) softExit(th *thread) {
	if t.soft == nil || !t.softEligible(th) {
		return
	}
	st := t.stepOf(th)
	tsc := clock.RDTSC()
	if st.active && st.valid && st.insn.Class == x86.ClassSyscall {
		t.soft.s.StepExit(th.tid, &st.insn, tsc) // exit or exit_group
	} else if regs, err := getRegs(th.tid); err == nil && t.soft.s.Enabled(th.tid) {
		// The thread dies elsewhere (a fatal signal, a kill, another
		// thread's exit) before the instruction at its IP: the step in
		// flight retired if the IP moved on, and the trace ends with
		// FUP and TIP.PGD there, so that a decoder stops at that
		// instruction instead of running on to the next branch.
		if st.active && st.valid && regs.Rip != st.insn.IP && follows(&st.insn, regs.Rip) {
			t.softRetire(th, &st.insn, regs.Rip, tsc)
		}
		t.soft.s.Interrupt(th.tid, regs.Rip, tsc)
	}
	t.soft.s.Disable(th.tid, tsc)
	st.active, st.exiting = false, true
}

// softComplete ends the step in flight: the instruction retired unless the
// thread is still at it.
func (t *Tracer) softComplete(th *thread, st *stepState) {
	st.active, st.exited = false, false
	regs, err := getRegs(th.tid)
	if err != nil {
		return
	}
	tsc := clock.RDTSC()
	st.ip, st.haveIP = regs.Rip, true
	sp := th.proc.space
	filter := sp.traceJITOnly()
	if filter {
		th.filter.inJIT = sp.inJIT(regs.Rip)
	}
	if st.handler {
		// Signal delivery: the thread is at the handler's first
		// instruction, nothing retired.
		st.handler = false
		if !filter || th.filter.inJIT {
			t.soft.s.Enable(th.tid, regs.Rip, tsc)
		}
		return
	}
	if !st.valid {
		return
	}
	if regs.Rip == st.insn.IP && !st.insn.Class.IsBranch() {
		return // a rep iteration, or a report before anything ran
	}
	if !follows(&st.insn, regs.Rip) {
		t.softLostTrap(th, &st.insn, regs.Rip, tsc)
		return
	}
	t.stepFlags(th, st, &regs)
	t.softRetire(th, &st.insn, regs.Rip, tsc)
}

// flagTF is the trap flag in RFLAGS.
const flagTF = 0x100

// stepFlags keeps the trap flag (TF) ptjit sets to step th out of the
// program's view, after st.insn retired (regs are th's registers now):
//
//   - a pushf stores the flags with TF set: cleared in the stored copy
//     (unstepPushf);
//   - a popf sets TF as the program asked, which progTF records. The
//     kernel then no longer counts TF as the tracer's (TIF_FORCED_TF is
//     cleared when it steps a popf), and TF was seen left set after the
//     next step although the popf cleared it: PTRACE_GETREGS reports it,
//     and PTRACE_CONT would leave it set, a SIGTRAP for the program at
//     its next instruction once it runs free. A TF reported while the
//     program's last popf cleared it is ptjit's, and is cleared.
//
// Precondition: on the locked tracer thread; th is stopped at a step trap.
func (t *Tracer) stepFlags(th *thread, st *stepState, regs *unix.PtraceRegs) {
	if st.insn.IsPushf() {
		t.unstepPushf(th, st, regs)
		return
	}
	if pop, size := st.insn.IsPopf(); pop {
		var b [1]byte // bits 8–15 of the flags popped, below the stack top now
		if snapshot.ReadMem(th.tid, regs.Rsp-uint64(size)+1, b[:]) == nil {
			st.progTF = b[0]&(flagTF>>8) != 0
		}
	}
	if regs.Eflags&flagTF != 0 && !st.progTF {
		regs.Eflags &^= flagTF
		if err := unix.PtraceSetRegs(th.tid, regs); err != nil && !errors.Is(err, unix.ESRCH) {
			t.warnf("soft PT: tid %d: clearing the trap flag left after a step: %v", th.tid, err)
		}
	}
}

// unstepPushf clears the trap flag in the flags a stepped pushf stored at
// the top of th's stack: the kernel set TF for ptjit's step, and the
// program's own flags (what PTRACE_GETREGS reports) have it clear. Left
// there, the program would read a flag it never set, and a popf of that
// copy would keep TF set once ptjit lets the thread run free: a SIGTRAP at
// its next instruction (HotSpot's CPU probe does pushf; ...; popf).
//
// Precondition: on the locked tracer thread; th is stopped right after
// the pushf retired (regs are its registers now).
func (t *Tracer) unstepPushf(th *thread, st *stepState, regs *unix.PtraceRegs) {
	if regs.Eflags&flagTF != 0 && st.progTF {
		return // the program set TF itself
	}
	var b [1]byte // bits 8–15 of the flags stored, whatever the operand size
	if err := snapshot.ReadMem(th.tid, regs.Rsp+1, b[:]); err != nil || b[0]&(flagTF>>8) == 0 {
		return
	}
	b[0] &^= flagTF >> 8
	if err := t.memWrite(th, regs.Rsp+1, b[:]); err != nil {
		t.warnf("soft PT: tid %d: clearing the trap flag a stepped pushf stored at %#x: %v", th.tid, regs.Rsp, err)
	}
}

// softRetire reports that in retired on th and execution went on at next:
// with --soft-filter, a next outside JIT code leaves the traced range.
func (t *Tracer) softRetire(th *thread, in *x86.Insn, next, tsc uint64) {
	if sp := th.proc.space; sp.traceJITOnly() && !sp.inJIT(next) {
		t.soft.s.Leave(th.tid, in, next, tsc) // nothing when not traced
		return
	}
	t.soft.s.Step(th.tid, in, next, tsc)
}

// softLostTrap handles a step of in that ended at rip, where in cannot
// lead: the step's trap was lost and more instructions ran (see the
// comment at the top of the file).
func (t *Tracer) softLostTrap(th *thread, in *x86.Insn, rip, tsc uint64) {
	fetch := func(ip uint64, x *x86.Insn) error { return t.softInsn(th, ip, x) }
	path, ok := lostTrapPath(in, rip, fetch, t.soft.path[:0])
	t.soft.path = path[:0]
	if !ok {
		if !t.soft.lostWarned {
			t.soft.lostWarned = true
			t.warnf("soft PT: tid %d: the step of %s at %#x ended at %#x, where it cannot lead; the trace has a gap there (further cases are not reported)",
				th.tid, in.Class, in.IP, rip)
		}
		// The thread resumes with TIP.PGE at rip (softResume).
		t.soft.s.Interrupt(th.tid, in.IP, tsc)
		return
	}
	for i := range path {
		t.softRetire(th, in, path[i].IP, tsc)
		in = &path[i]
	}
	t.softRetire(th, in, rip, tsc)
}

// maxLostTraps bounds the instructions in a row whose step trap may have
// been lost (CPUID; CPUID), in lostTrapPath.
const maxLostTraps = 4

// follows reports whether execution can go on at next right after in
// retired, without an exception: its fall-through for a non-branch, the
// fall-through or the target of a conditional branch, the target of a
// direct jump or call, anywhere for an indirect or far branch.
func follows(in *x86.Insn, next uint64) bool {
	switch {
	case !in.Class.IsBranch():
		return next == in.Next()
	case in.Class == x86.ClassCondJump:
		return next == in.Next() || next == in.Target
	case in.Class.IsDirect():
		return next == in.Target
	}
	return true
}

// lostTrapPath explains a step of in that ended at rip although in cannot
// lead there (follows is false): the trap after in was lost, in retired at
// its fall-through and the thread ran on to the trap of a later
// instruction. Only a non-branch can lose its trap this way (the
// hypervisor emulates it and moves the IP past it), so in and every
// instruction of the path but the last are non-branches, each continuing
// at its fall-through; the last is the first one, at most maxLostTraps
// after in, that can lead to rip. fetch reads the instruction at an
// address. lostTrapPath appends the instructions that retired after in,
// in order, to path and returns it; false when no such path exists.
func lostTrapPath(in *x86.Insn, rip uint64, fetch func(uint64, *x86.Insn) error, path []x86.Insn) ([]x86.Insn, bool) {
	if in.Class.IsBranch() {
		return path, false
	}
	ip := in.Next()
	for range maxLostTraps {
		path = append(path, x86.Insn{})
		x := &path[len(path)-1]
		if fetch(ip, x) != nil {
			return path, false
		}
		if follows(x, rip) {
			return path, true
		}
		if x.Class.IsBranch() {
			return path, false
		}
		ip = x.Next()
	}
	return path, false
}

// softNotRetired handles a stop (a signal) that came while a step was in
// flight: if the thread is still at the instruction, it did not retire and
// the thread entered the kernel there.
func (t *Tracer) softNotRetired(th *thread, st *stepState) {
	st.haveIP = false
	regs, err := getRegs(th.tid)
	if err != nil || !st.valid {
		return
	}
	tsc := clock.RDTSC()
	switch {
	case regs.Rip == st.insn.IP:
	case !st.insn.Class.IsBranch() && regs.Rip == st.insn.Next():
		// The instruction retired and its trap was lost (see the top
		// of the file): the stop came at the next one.
		t.softRetire(th, &st.insn, regs.Rip, tsc)
	default:
		return
	}
	st.active = false
	t.soft.s.Interrupt(th.tid, regs.Rip, tsc)
}

// softResume resumes th with one PTRACE_SINGLESTEP, delivering sig.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) softResume(th *thread, sig int) {
	st := t.stepOf(th)
	s := t.soft.s
	if st.exiting {
		t.resumeCont(th.tid, sig)
		return
	}
	if st.exited {
		st.exited = false
		t.softComplete(th, st)
	}
	sp := th.proc.space
	if sp.filterOn() && !sp.filter.shown && !sp.filter.opening {
		// --soft-filter: JIT code is hidden; run free until the thread
		// enters it.
		t.softStart(th, st, clock.RDTSC())
		st.active, st.valid, st.haveIP = false, false, false
		th.filter.free = true
		t.resumeCont(th.tid, sig)
		return
	}
	if !st.active && t.filterPark(th, sp, sig) {
		return // outside JIT code while it is shown: wait, don't step
	}
	if !st.active {
		ip := st.ip
		if !st.haveIP {
			regs, err := getRegs(th.tid)
			if err != nil {
				t.resumeCont(th.tid, sig)
				return
			}
			ip = regs.Rip
		}
		st.haveIP = false
		tsc := clock.RDTSC()
		t.softStart(th, st, tsc)
		if sig != 0 && caughtSignal(th.proc.pid, sig) {
			// The kernel will build the handler's frame and report a
			// trap at its first instruction.
			s.Interrupt(th.tid, ip, tsc)
			st.handler = true
			st.valid = false
		} else {
			st.valid = t.softInsn(th, ip, &st.insn) == nil
			if !s.Enabled(th.tid) && (!sp.traceJITOnly() || sp.inJIT(ip)) {
				s.Enable(th.tid, ip, tsc) // a TIP.PGE: timed
			} else if g := sp.Gen(); g != st.gen {
				// The code changed since the thread's last step (a
				// store of another thread, emulated): a PSB+ times
				// the instruction about to run after the change.
				s.Sync(th.tid, ip, tsc)
			}
			st.gen = sp.Gen()
			if th.filter.inJIT {
				t.filterJITStep(sp, st.valid && st.insn.Class == x86.ClassSyscall)
			}
		}
		st.active = true
	}
	// unix.PtraceSingleStep cannot deliver a signal: the raw request can.
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SINGLESTEP, uintptr(th.tid), 0, uintptr(sig), 0, 0)
	if e != 0 && e != unix.ESRCH {
		t.warnf("PTRACE_SINGLESTEP %d: %v", th.tid, e)
	}
}

// softStart announces th to the trace the first time it runs.
func (t *Tracer) softStart(th *thread, st *stepState, tsc uint64) {
	if !st.started {
		st.started = true
		t.soft.s.StartThread(th.proc.pid, th.tid, tsc)
		t.soft.s.Comm(th.proc.pid, th.tid, t.commOf(th), false, tsc)
	}
}

// softInsn returns the instruction at ip: from the cache for file-backed
// read-only code, else read from the tracee.
func (t *Tracer) softInsn(th *thread, ip uint64, in *x86.Insn) error {
	sp := th.proc.space
	if sp == nil {
		return t.softFetch(th, ip, in)
	}
	i := sp.first(ip)
	if i >= len(sp.pieces) || sp.pieces[i].Start > ip || sp.pieces[i].Kind != File || sp.pieces[i].Prot&unix.PROT_WRITE != 0 {
		return t.softFetch(th, ip, in)
	}
	cache := t.soft.code[sp]
	if c, ok := cache[ip]; ok {
		*in = c
		return nil
	}
	if err := t.softFetch(th, ip, in); err != nil {
		return err
	}
	if ip+uint64(in.Len) <= sp.pieces[i].End {
		if cache == nil {
			cache = map[uint64]x86.Insn{}
			t.soft.code[sp] = cache
		}
		cache[ip] = *in
	}
	return nil
}

// softInvalidate forgets cached instructions: a file mapping changed.
func (t *Tracer) softInvalidate() {
	if t.soft != nil && len(t.soft.code) > 0 {
		clear(t.soft.code)
	}
}

// softFetch reads and decodes the instruction at ip in th's memory. An
// instruction whose bytes cannot be read will fault; the fault's stop
// tells the rest.
func (t *Tracer) softFetch(th *thread, ip uint64, in *x86.Insn) error {
	buf := t.soft.buf[:]
	err := snapshot.ReadMem(th.tid, ip, buf)
	if rem := 4096 - int(ip&4095); err != nil && rem < len(buf) {
		// The next page may be unmapped: the instruction can still be
		// whole in this one.
		buf = buf[:rem]
		err = snapshot.ReadMem(th.tid, ip, buf)
	}
	if err != nil {
		return err
	}
	return x86.DecodeInsn(buf, ip, x86.Mode64, in)
}

// softGone ends a thread's trace when it is gone.
func (t *Tracer) softGone(th *thread, pid int) {
	if t.soft == nil {
		return
	}
	if st := th.step; st != nil {
		th.step = nil
		if st.started {
			t.soft.s.EndThread(pid, th.tid, clock.RDTSC())
		}
	}
}

// softFork announces a new process to the trace.
func (t *Tracer) softFork(pid, ppid, ptid int) {
	if t.soft != nil {
		t.soft.s.Fork(pid, ppid, ptid, clock.RDTSC())
	}
}

// softMmap records a file-backed executable mapping in the trace (MMAP2).
func (t *Tracer) softMmap(pid, tid int, start, end uint64, prot int, f FileInfo) {
	if t.soft == nil {
		return
	}
	t.softInvalidate()
	t.soft.s.Mmap(&perf.PerfMmap{
		Pid: uint32(pid), Tid: uint32(tid), Addr: start, Len: end - start, Pgoff: f.Offset,
		Maj: unix.Major(f.Dev), Min: unix.Minor(f.Dev), Ino: f.Inode,
		Prot: uint32(prot), Flags: unix.MAP_PRIVATE, Filename: f.Path,
	}, clock.RDTSC())
}

func (t *Tracer) commOf(th *thread) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(th.proc.pid) + "/task/" + strconv.Itoa(th.tid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}

// caughtSignal reports whether pid has a handler for sig (SigCgt in
// /proc/PID/status).
func caughtSignal(pid, sig int) bool {
	v, ok := statusField("/proc/"+strconv.Itoa(pid), "SigCgt")
	mask, err := strconv.ParseUint(v, 16, 64)
	return ok && err == nil && mask>>(sig-1)&1 == 1
}
