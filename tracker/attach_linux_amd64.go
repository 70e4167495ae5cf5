package tracker

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"golang.org/x/sys/unix"
)

// Attaching to a running process (Options.Attach, ptjit run -p PID) and
// detaching from it (Tracer.Detach). The launch path's seccomp filter can
// never be removed from a process, so attach records without one: every
// address-space call comes from the BPF event source (Options.Events must
// be EventsBPF), and ptjit leaves nothing in the process when it detaches.
//
// Attach (attachTo): every thread listed in /proc/PID/task is seized
// (PTRACE_SEIZE, without PTRACE_O_EXITKILL: a ptjit that dies leaves the
// process running) and interrupted (PTRACE_INTERRUPT); the listing is
// read again until it shows no tid not yet seized (a thread created
// before its creator was seized). Once every thread has reported its
// first stop, the process and its threads are recorded, its tgid is added
// to the event source, and its executable memory is snapshotted as it is
// (versions with cause "attach"). Each thread's first stop is then
// handled by the main loop like any other: an interrupt stop resumes it,
// a signal that was pending is delivered, a group-stop stays a
// group-stop. New threads and processes are followed by the ptrace
// options as in the launch path.
//
// Detach (Tracer.Detach, from any goroutine): the request wakes the
// tracer through the events' doorbell; the tracer interrupts every
// thread and handles stops as usual until each one is in an interrupt
// stop (a signal that arrives meanwhile is delivered first, as it would
// be without ptjit). Then the ring is drained, the process leaves the
// event source, W^X's protections are undone (detachWX, below), every
// open version ends (cause "detach"), and every thread is detached with
// signal 0: a thread in a group-stop stays stopped (the kernel keeps it
// so). ptjit adds no filter to an attached process (injectFilter and
// ensureProtectSeen refuse), plain --pt=soft changes nothing, and a
// W^X step or injected call completes within the stop that started it,
// so what is left to undo is W^X's protections and a soft-PT step in
// flight (detachPark).

// attachState: the attached process (Options.Attach).
type attachState struct {
	on        bool
	detaching bool
	// stay: a detach would break the process (lateFilter): ptjit stays
	// attached until it exits, whatever asks for the detach
	stay bool
	// stopped: tids in the interrupt stop they are detached from
	stopped map[int]unix.WaitStatus
}

// attachShared is what other goroutines use to ask for the detach.
type attachShared struct {
	detach atomic.Bool
	bell   atomic.Int64 // the doorbell's pid, rung to wake the tracer
}

// attachOptions are ptraceOptions without PTRACE_O_EXITKILL: ptjit's end
// must not kill a process it did not start.
const attachOptions = ptraceOptions &^ unix.PTRACE_O_EXITKILL

// AttachError says why ptjit cannot attach to a process: one line that
// names the pid.
type AttachError struct {
	PID int
	Why string
}

func (e *AttachError) Error() string { return fmt.Sprintf("pid %d: %s", e.PID, e.Why) }

// CheckAttach reports whether pid can be attached to: it exists, is not a
// thread of ptjit itself, and no tracer holds it (TracerPid in
// /proc/PID/status). PTRACE_SEIZE may still refuse (permissions).
func CheckAttach(pid int) error {
	if pid <= 0 {
		return &AttachError{pid, "not a process id"}
	}
	if pid == os.Getpid() {
		return &AttachError{pid, "that is ptjit itself"}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return &AttachError{pid, "no such process"}
		}
		return &AttachError{pid, err.Error()}
	}
	tgid, tracer := -1, 0
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			continue
		}
		switch k {
		case "Tgid":
			tgid = n
		case "TracerPid":
			tracer = n
		}
	}
	if tgid != pid {
		return &AttachError{pid, fmt.Sprintf("a thread of process %d, not a process (attach to %d)", tgid, tgid)}
	}
	if tracer != 0 {
		return &AttachError{pid, fmt.Sprintf("already traced by pid %d (a process has one tracer)", tracer)}
	}
	if statState(readStat(pid)) == 'Z' {
		return &AttachError{pid, "a zombie (it has exited)"}
	}
	return nil
}

func readStat(pid int) []byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return b
}

// statPPID parses the parent pid of a /proc/PID/stat line (0 when it
// cannot).
func statPPID(b []byte) int {
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// listTasks returns the tids of /proc/PID/task, sorted.
func listTasks(pid int) ([]int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		return nil, err
	}
	var tids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	sort.Ints(tids)
	return tids, nil
}

// attachTo seizes and stops every thread of pid, records the process and
// its executable memory, and queues each thread's first stop for the
// main loop, which resumes them. On error nothing of pid stays traced.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) attachTo(pid int) error {
	if t.events == nil {
		return &AttachError{pid, "attach needs BPF events"}
	}
	if err := CheckAttach(pid); err != nil {
		return err
	}
	t.startBell()
	if t.events.bell == nil {
		return &AttachError{pid, "attach needs the BPF events' doorbell child, which could not be started"}
	}
	t.att.on = true
	t.att.stopped = map[int]unix.WaitStatus{}
	// every version is read whole: changed-page tracking would leave its
	// userfaultfd in the process
	t.opts.Copy = CopyFull
	t.result.Stats.Copy.Mode = CopyFull
	t.copyFallback("attached: nothing of ptjit's may stay in the process")
	t.shared.attach.bell.Store(int64(t.events.bell.pid))
	p := &process{pid: pid, ppid: statPPID(readStat(pid)), threads: map[int]*thread{}}
	seized := map[int]bool{}
	undo := func() {
		for tid := range seized {
			unix.PtraceDetach(tid)
		}
	}
	for {
		tids, err := listTasks(pid)
		if err != nil {
			undo()
			if errors.Is(err, os.ErrNotExist) {
				// it was there at CheckAttach, before the BPF
				// programs loaded and code.db was made
				return &AttachError{pid, "the process exited before ptjit could attach"}
			}
			return &AttachError{pid, err.Error()}
		}
		added := false
		for _, tid := range tids {
			if seized[tid] {
				continue
			}
			_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, uintptr(t.ptraceOpts(attachOptions)), 0, 0)
			switch {
			case e == unix.ESRCH:
				continue // the thread exited
			case e == unix.EPERM && tid != pid && len(seized) > 0 && tracerOf(tid) == os.Getpid():
				// a thread a seized one created: traced already
				// (PTRACE_O_TRACECLONE), it stops by itself
			case e != 0:
				undo()
				return &AttachError{pid, fmt.Sprintf("cannot trace it: PTRACE_SEIZE of thread %d: %v", tid, e)}
			default:
				unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_INTERRUPT, uintptr(tid), 0, 0, 0, 0)
			}
			seized[tid] = true
			added = true
		}
		if !added {
			break
		}
	}
	// every thread's first stop (an interrupt stop, or whatever came
	// first: a pending signal, a group-stop, a clone event)
	first := map[int]unix.WaitStatus{}
	var order []int
	for tid := range seized {
		order = append(order, tid)
	}
	sort.Ints(order)
	for _, tid := range order {
		var ws unix.WaitStatus
		for {
			_, err := unix.Wait4(tid, &ws, unix.WALL, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				ws = 0
			}
			break
		}
		if ws == 0 || ws.Exited() || ws.Signaled() {
			delete(seized, tid)
			if tid == pid {
				undo()
				return &AttachError{pid, "the process exited while ptjit attached"}
			}
			continue
		}
		first[tid] = ws
	}
	at := clock.Now()
	t.result.AttachedAt = at
	t.root.pid = pid
	for _, tid := range order {
		if _, ok := first[tid]; !ok {
			continue
		}
		th := &thread{tid: tid, proc: p}
		p.threads[tid] = th
		t.threads[tid] = th
	}
	t.procs[pid] = p
	t.setLive(pid, true)
	t.shared.running.Store(true)
	t.recordProcess(p, at)
	pidStr := strconv.Itoa(pid)
	path, _ := os.Readlink("/proc/" + pidStr + "/exe")
	var argv []string
	if b, err := os.ReadFile("/proc/" + pidStr + "/cmdline"); err == nil {
		argv = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	t.rec.Exec(pid, path, argv, at)
	t.eventsAdd(pid)
	p.space = t.newSpace(pid)
	p.space.namesAtAttach(pid)
	t.syncSpace(p, stampAt(p.threads[pid], 0, at).because("attach"))
	t.attachWX(p, first)
	for _, tid := range order {
		if ws, ok := first[tid]; ok {
			t.queue(tid, ws)
		}
	}
	if t.opts.OnStart != nil {
		t.opts.OnStart(pid)
	}
	return nil
}

// tracerOf returns TracerPid of tid (0 when none or unknown).
func tracerOf(tid int) int {
	v, _ := statusField("/proc/"+strconv.Itoa(tid), "TracerPid")
	n, _ := strconv.Atoi(v)
	return n
}

// Detach asks the tracer to detach from the attached process and end the
// trace; Wait returns once every thread is detached (or the process
// exited first). Safe from any goroutine; a no-op for a launched program.
func (t *Tracer) Detach() {
	if t.opts.Attach == 0 || t.shared.attach.detach.Swap(true) {
		return
	}
	if pid := t.shared.attach.bell.Load(); pid > 0 {
		unix.Kill(int(pid), unix.SIGUSR1) // wakes the tracer's wait4
	}
}

// attachPoll starts the detach once it was asked for (loop, before each
// wait).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) attachPoll() {
	if t.att.detaching {
		t.detachReady() // the interrupts again: one may have been consumed (below)
		return
	}
	if !t.att.on || !t.shared.attach.detach.Load() || t.att.stay {
		return
	}
	t.att.detaching = true
	if t.soft != nil {
		for _, th := range t.threads {
			// --pt=soft: a step in flight completes, no new one starts
			// (softResume continues an exiting thread)
			t.stepOf(th).exiting = true
		}
	}
	t.detachReady()
}

// detachPark keeps a thread in the interrupt stop the detach asked for,
// and reports true; false for any other stop, handled as usual.
//
// Precondition: on the locked tracer thread.
//
// A thread single-stepped by --pt=soft may have the trap of its last step
// pending (a step over a syscall the interrupt ended): detached with it,
// the program would die of that SIGTRAP. Such a thread is continued
// instead, without a step (no thread steps again once the detach started:
// attachPoll), and
// interrupted again: its trap stop comes first and is consumed as a step's
// (stopStepTrap), then the interrupt stop parks it.
func (t *Tracer) detachPark(tid int, ws unix.WaitStatus) bool {
	if !t.att.detaching || t.threads[tid] == nil || !ws.Stopped() || int(ws>>16) != unix.PTRACE_EVENT_STOP {
		return false
	}
	if th := t.threads[tid]; th.step != nil && th.step.active && sigPending(tid, unix.SIGTRAP) {
		unix.PtraceCont(tid, 0)
		unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_INTERRUPT, uintptr(tid), 0, 0, 0, 0)
		return true
	}
	t.att.stopped[tid] = ws
	return true
}

// sigPending reports whether sig is pending for thread tid itself
// (SigPnd in /proc/TID/status).
func sigPending(tid int, sig unix.Signal) bool {
	v, ok := statusField("/proc/"+strconv.Itoa(tid), "SigPnd")
	mask, err := strconv.ParseUint(v, 16, 64)
	return ok && err == nil && mask&(1<<(uint(sig)-1)) != 0
}

// detachReady asks every thread not stopped yet to stop, and detaches
// once all are (after handle, and at every turn of the loop while
// detaching: an interrupt stop that comes while ptjit waits for the
// thread itself, injecting a call in it, is consumed there, so the
// request is repeated; the doorbell turns the loop every 100 ms at
// least).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) detachReady() {
	if !t.att.detaching {
		return
	}
	all := true
	for tid := range t.threads {
		if _, ok := t.att.stopped[tid]; ok {
			continue
		}
		all = false
		if t.later.per[tid] == 0 {
			unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_INTERRUPT, uintptr(tid), 0, 0, 0, 0)
		}
	}
	if all && len(t.pending) == 0 && len(t.newborn) == 0 && len(t.later.stops) == 0 {
		t.detachAll()
	}
}

// detachAll detaches every thread, all of them in an interrupt stop: the
// last events are applied, the processes leave the event source, their
// open versions end (cause "detach"), and the threads run on untraced.
//
// Precondition: on the locked tracer thread; every thread is stopped.
func (t *Tracer) detachAll() {
	t.drainEvents()
	at := clock.Now()
	for pid, p := range t.procs {
		t.eventsRemove(pid)
		t.detachWX(p)
		t.setLive(pid, false)
		if sp := p.space; sp != nil {
			p.space = nil
			if sp.refs--; sp.refs == 0 {
				t.pollNames(sp, at)
				sp.Clear(Stamp{At: at}.because("detach"))
				sp.namesClose()
				sp.inj.close()
				sp.alias.close()
				sp.pages.close()
			}
		}
		for tid, th := range p.threads {
			t.softGone(th, pid) // the thread's trace ends here
			delete(t.threads, tid)
		}
		delete(t.procs, pid)
	}
	for tid := range t.att.stopped {
		if err := unix.PtraceDetach(tid); err != nil && !errors.Is(err, unix.ESRCH) {
			t.warnf("PTRACE_DETACH %d: %v", tid, err)
		}
	}
	for tid := range t.threads { // none: every thread was stopped
		delete(t.threads, tid)
	}
	t.att.stopped = nil
	t.root.done = true
	t.result.Status = 0
	t.result.Detached = true
	t.result.DetachedAt = at
}

// W^X in an attached process (Options.WX on). Without a filter no call
// stops at its entry, so what the launch path does there (wxEntryProt:
// the kernel gets RX for RWX) happens after the fact, in the stopped
// thread: at the attach for the memory that is RWX then, and for a call
// made while attached at the SIGSTOP the BPF program sends at its exit
// (bpfev.AddStopping: the thread has not run on; other threads may store
// into the range meanwhile, unseen). At the detach every piece the
// program has RWX gets RWX back in the kernel. Memory holding a thread's
// stack pointer, or W^X's kernel-written memory (wx_tcb_linux_amd64.go),
// is left as the program asked: the kernel writes there (signal frames,
// syscall output), and no filter can stop those writes under attach.

// attachStopCall is a call whose SIGSTOP (bpfev.FlagStop) is due: W^X's
// protection is applied to its range at that stop.
type attachStopCall struct {
	rng  ival
	prot int
}

// attachNoteStop notes, when the ring gives a FlagStop event, the range
// the call made writable and executable.
func (t *Tracer) attachNoteStop(th *thread, e *bpfev.Event) {
	r := ival{e.Args[0], e.Args[0] + pageUp(e.Args[1])}
	if e.Nr == unix.SYS_MMAP {
		r = ival{uint64(e.Ret), uint64(e.Ret) + pageUp(e.Args[1])}
	}
	th.att = append(th.att, attachStopCall{r, int(e.Args[2])})
}

// attachStopped applies W^X to the ranges of th's calls whose SIGSTOP
// this is (every one noted so far: the signal is sent once).
//
// Precondition: on the locked tracer thread; th is in the signal-delivery
// stop of the BPF program's SIGSTOP.
func (t *Tracer) attachStopped(th *thread) {
	calls := th.att
	th.att = nil
	if len(calls) == 0 || !t.wxOn() || th.proc.space == nil {
		return
	}
	regs, err := getRegs(th.tid)
	if err != nil {
		return
	}
	for _, c := range calls {
		if c.prot&protGrowsdown != 0 {
			continue // a stack (glibc's execstack): as asked
		}
		t.wxAttachProtect(th, c.rng.s, c.rng.e, []uint64{regs.Rsp}, "wx: the program asked for write+exec (applied after the call: attached)")
	}
}

// wxAttachProtect gives the kernel W^X's protection for the RWX pieces of
// th's space in [lo, hi), but for a piece holding one of the stack
// pointers rsps or W^X's kernel-written memory.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) wxAttachProtect(th *thread, lo, hi uint64, rsps []uint64, reason string) {
	sp := th.proc.space
	var todo []Piece
	for k := sp.first(lo); k < len(sp.pieces) && sp.pieces[k].Start < hi; k++ {
		p := sp.pieces[k]
		if !isWX(p.Prot) || p.End <= lo {
			continue
		}
		keep := false
		for _, r := range rsps {
			keep = keep || r >= p.Start && r < p.End
		}
		for _, r := range sp.wx.kw {
			keep = keep || r.s < p.End && r.e > p.Start
		}
		if !keep {
			todo = append(todo, p)
		}
	}
	for _, p := range todo {
		s, e := max(p.Start, lo), min(p.End, hi)
		if err := t.protect(th, s, e, actualProt(p.Prot), reason); err != nil {
			t.warnOp(err)
		}
	}
}

// attachWX applies W^X, at the attach, to the memory that is RWX then.
//
// Precondition: on the locked tracer thread; every thread of p is in its
// first stop (first).
func (t *Tracer) attachWX(p *process, first map[int]unix.WaitStatus) {
	if !t.wxOn() || p.space == nil {
		return
	}
	var rsps []uint64
	for tid := range first {
		if regs, err := getRegs(tid); err == nil {
			rsps = append(rsps, regs.Rsp)
		}
	}
	th := t.actingThread(p, first)
	if th == nil {
		// (a process stopped by SIGSTOP: its threads are in a group-stop)
		if slices.ContainsFunc(p.space.pieces, func(pc Piece) bool { return isWX(pc.Prot) }) {
			t.warnf("pid %d: no thread ptjit can act in at the attach: W^X is not applied to its RWX memory", p.pid)
		}
		return
	}
	if !t.wxAttachAllowed(th) {
		return
	}
	t.wxAttachProtect(th, 0, ^uint64(0), rsps, "wx: RWX at the attach")
}

// wxAttachAllowed reports whether the attached process's seccomp filters
// (progfilter_linux_amd64.go) let W^X run the protection changes it
// would make in its RWX memory: to executable, to writable, and back to
// the program's own at the detach. Where one would be refused, W^X is
// off in its space: its RWX memory stays as the program has it, and
// ptjit says why, once.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) wxAttachAllowed(th *thread) bool {
	sp := th.proc.space
	insn, err := t.syscallInsn(th)
	if err != nil {
		return true // inject says why at the first change
	}
	for _, pc := range sp.pieces {
		if !isWX(pc.Prot) {
			continue
		}
		for _, prot := range []int{actualProt(pc.Prot), unix.PROT_READ | unix.PROT_WRITE, pc.Prot & protRWX} {
			args := [6]uint64{pc.Start, pc.End - pc.Start, uint64(prot), 0, 0, InjectCookie}
			var ref *FilterRefusedError
			if err := t.verdict(th, insn, unix.SYS_MPROTECT, args); errors.As(err, &ref) {
				sp.WritesSeen = false
				t.warnf("pid %d: W^X is off for this process: its seccomp filter would answer mprotect(%#x, %#x, %s) with %s; stores into its code are not seen",
					th.proc.pid, pc.Start, pc.End-pc.Start, protString(prot), actionName(ref.Action))
				return false
			}
		}
	}
	return true
}

// actingThread picks a thread of p stopped in an interrupt stop (ws: its
// stop), where syscalls can be injected; nil when none is.
func (t *Tracer) actingThread(p *process, ws map[int]unix.WaitStatus) *thread {
	var best *thread
	for tid, w := range ws {
		th := p.threads[tid]
		if th == nil || th.dying || int(w>>16) != unix.PTRACE_EVENT_STOP || w.StopSignal() != unix.SIGTRAP {
			continue
		}
		if best == nil || tid < best.tid {
			best = th
		}
	}
	return best
}

// detachWX gives every piece the program has RWX its protection back in
// the kernel (W^X made it RX, or RW for a batch page), with mprotects
// injected in a thread of the process in its interrupt stop.
//
// Precondition: on the locked tracer thread; every thread is stopped for
// the detach, and the process is out of the event source (an RWX
// mprotect would stop its thread again).
func (t *Tracer) detachWX(p *process) {
	if !t.wxOn() || p.space == nil || p.space.owner != p.pid || !p.space.WritesSeen {
		return // (WritesSeen false: W^X was off in the space, wxAttachAllowed)
	}
	var ws map[int]unix.WaitStatus = t.att.stopped
	th := t.actingThread(p, ws)
	var runs []Piece
	for _, pc := range p.space.pieces {
		if !isWX(pc.Prot) {
			continue
		}
		if k := len(runs) - 1; k >= 0 && runs[k].End == pc.Start && runs[k].Prot == pc.Prot {
			runs[k].End = pc.End
			continue
		}
		runs = append(runs, pc)
	}
	if len(runs) == 0 {
		return
	}
	if th == nil {
		t.warnf("pid %d: no thread ptjit can act in at the detach: its writable and executable memory stays as W^X left it", p.pid)
		return
	}
	at := clock.Now()
	for _, r := range runs {
		prot := r.Prot & protRWX
		if _, err := t.inject(th, unix.SYS_MPROTECT, r.Start, r.End-r.Start, uint64(prot)); err != nil {
			t.warnf("pid %d: giving %#x-%#x its protection back: %v", p.pid, r.Start, r.End, err)
			continue
		}
		t.rec.ProtChange(db.ProtChange{PID: p.pid, At: at, Addr: r.Start, Size: r.End - r.Start, Prot: prot,
			Reason: "detach: the program's protection back"})
	}
}
