package tracker

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/ptjit/ptjit/clock"
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
// event source, every open version ends (cause "detach"), and every
// thread is detached with signal 0: a thread in a group-stop stays
// stopped (the kernel keeps it so). With W^X off and without the soft
// filter (plain --pt=soft only steps), ptjit changes no protection and
// injects nothing in an attached process (injectFilter refuses), so
// nothing is left to undo but a step in flight (detachPark).

// attachState: the attached process (Options.Attach).
type attachState struct {
	on        bool
	detaching bool
	// stopped: tids in the interrupt stop they are detached from;
	// asked: tids PTRACE_INTERRUPT was sent to for the detach
	stopped map[int]unix.WaitStatus
	asked   map[int]bool
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
	t.att.asked = map[int]bool{}
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
				return &AttachError{pid, "no such process"}
			}
			return &AttachError{pid, err.Error()}
		}
		added := false
		for _, tid := range tids {
			if seized[tid] {
				continue
			}
			_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(tid), 0, attachOptions, 0, 0)
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
	t.syncSpace(p, stampAt(p.threads[pid], 0, at).because("attach"))
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// Attached reports whether the trace attached to a running process
// (Options.Attach).
func (t *Tracer) Attached() bool { return t.opts.Attach != 0 }

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
	if !t.att.on || t.att.detaching || !t.shared.attach.detach.Load() {
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
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigPnd:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && mask&(1<<(uint(sig)-1)) != 0
		}
	}
	return false
}

// detachReady asks every thread not stopped yet to stop, and detaches
// once all are (after handle, and when the detach starts).
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
		if !t.att.asked[tid] {
			t.att.asked[tid] = true
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
