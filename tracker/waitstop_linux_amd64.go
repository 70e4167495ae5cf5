package tracker

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Waiting for one thread. Injected syscalls, W^X single-steps and alias
// steps resume one stopped thread and wait for its next stop before the
// main loop goes on. That wait must not block forever, and must not lose
// another thread's stop:
//
//   - it waits for any tracee (wait4(-1)), never for th alone: a thread
//     group leader's exit is reported only after every other thread of the
//     group was reaped, and an exiting thread (PTRACE_EVENT_EXIT) is not
//     woken by SIGKILL — waiting for the leader alone while the others sit
//     in their exit stops never ends;
//   - another thread's PTRACE_EVENT_EXIT stop is handled at once (it is
//     resumed, so that the group can finish dying), also when that thread
//     has stops queued: SIGKILL woke it out of them, so they are stale and
//     are dropped from the queue (dropStale). Held back behind them, a
//     thread's exit stop kept the leader's exit report from ever coming
//     while ptjit waited for the leader (a hang of 1 in about 100 kills of
//     jit-storm, TestKillStress); its other stops are queued for the main
//     loop (Tracer.loop takes them before it waits), and that thread is
//     not resumed until the loop has handled them;
//   - th's own death (exit or kill report, PTRACE_EVENT_EXIT, or its tid
//     taken by another thread's execve) ends the operation with an error
//     that matches ErrThreadGone; so does ESRCH from a ptrace request;
//   - a signal th receives meanwhile is held (thread.held) and delivered
//     when th resumes;
//   - once ptjit is being stopped (Tracer.Kill), the wait polls (WNOHANG)
//     and gives up when th is a zombie or dead in /proc, or after
//     killWaitLimit: every tracee has SIGKILL, the main loop reaps them.

// ErrThreadGone: the thread ptjit was acting in died, or vanished with
// its thread group, during the operation. Callers treat it like the
// thread's exit: nothing to warn about, nothing to deliver.
var ErrThreadGone = errors.New("thread gone")

// ThreadGoneError is an operation that ended because its thread is gone.
type ThreadGoneError struct {
	TID int
	Why string // "exited", "killed", "exiting", "execve of another thread", "no such process", "killed by ptjit"
}

func (e *ThreadGoneError) Error() string {
	return "tid " + strconv.Itoa(e.TID) + ": thread gone (" + e.Why + ")"
}

// Is makes errors.Is(err, ErrThreadGone) true.
func (e *ThreadGoneError) Is(target error) bool { return target == ErrThreadGone }

// goneErr converts the error of a ptrace request on th: ESRCH means th is
// gone (or dying with SIGKILL pending).
func goneErr(tid int, err error) error {
	if errors.Is(err, unix.ESRCH) {
		return &ThreadGoneError{tid, "no such process"}
	}
	return err
}

// queuedStop is a stop of another thread, seen while ptjit waited for
// one thread; the main loop handles it.
type queuedStop struct {
	tid int
	ws  unix.WaitStatus
}

// killWaitLimit bounds a wait for one thread after Tracer.Kill.
const killWaitLimit = 500 * time.Millisecond

// waitThread waits for th's next stop and returns it classified by
// classifyStatus. Stops of other threads are handled or queued (see
// above); th's death returns a *ThreadGoneError and th is forgotten
// (threadGone) when its exit was reported here.
//
// Precondition: on the locked tracer thread; th was just resumed.
func (t *Tracer) waitThread(th *thread) (stopKind, int, error) {
	var deadline time.Time
	for {
		flags := unix.WALL | unix.WNOTHREAD
		polling := t.killRequested()
		if polling {
			flags |= unix.WNOHANG
			if deadline.IsZero() {
				deadline = time.Now().Add(killWaitLimit)
			}
		}
		var ws unix.WaitStatus
		tid, err := t.waitStop(&t.spinStep, flags, &ws)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: no tracee left at all
			return 0, 0, &ThreadGoneError{th.tid, err.Error()}
		}
		if tid == 0 {
			// polling, nothing yet
			if s := procState(th.tid); s == 'Z' || s == 'X' || s == 0 || time.Now().After(deadline) {
				return 0, 0, &ThreadGoneError{th.tid, "killed by ptjit"}
			}
			time.Sleep(time.Millisecond)
			continue
		}
		if t.bellWhileWaiting(tid, ws) {
			// the BPF events' doorbell (events_linux_amd64.go): no
			// draining in the middle of ptjit's work in th; with a
			// child of its own, wait4 never fails with ECHILD, so
			// th's liveness is looked at here
			if s := procState(th.tid); s == 'Z' || s == 'X' || s == 0 {
				return 0, 0, &ThreadGoneError{th.tid, "gone"}
			}
			continue
		}
		if tid != th.tid {
			t.otherStop(tid, ws)
			continue
		}
		kind, sig := classifyStatus(ws)
		switch kind {
		case stopExited, stopKilled:
			t.threadGone(th, kind, sig)
			return kind, sig, &ThreadGoneError{th.tid, kind.String()}
		case stopExit:
			// about to exit: the main loop resumes it and gets its
			// exit report
			th.dying = true
			t.queue(tid, ws)
			return kind, sig, &ThreadGoneError{th.tid, "exiting"}
		case stopExec:
			// Another thread's execve took th's tid (th was the
			// leader): th is gone, the exec is the loop's.
			t.queue(tid, ws)
			return kind, sig, &ThreadGoneError{th.tid, "execve of another thread"}
		}
		return kind, sig, nil
	}
}

// otherStop handles a stop of another thread that came while ptjit
// waited for one: an exit stop is resumed at once (the group may be
// dying, and its leader's report waits for it), even behind queued stops
// of the thread, which are dropped (dropStale); anything else is queued.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) otherStop(tid int, ws unix.WaitStatus) {
	if kind, _ := classifyStatus(ws); kind == stopExit {
		if o := t.threads[tid]; o != nil {
			t.result.Stats.Stops++
			o.dying = true
			t.dropStale(o)
			t.exitStop(o)
			return
		}
	}
	t.queue(tid, ws)
}

// staleStop reports whether a queued stop of th is one the thread has
// already left: th reached its exit stop after it (only SIGKILL moves a
// thread out of a stop ptjit has not resumed), so there is nothing to
// resume and nothing of the program's to act on. Its exit and kill
// reports still count.
func staleStop(th *thread, ws unix.WaitStatus) bool {
	if !th.dying {
		return false
	}
	switch kind, _ := classifyStatus(ws); kind {
	case stopExited, stopKilled, stopExit:
		return false
	}
	return true
}

// dropStale removes th's stale stops (staleStop) from the queue, so that
// its exit stop can resume it now.
func (t *Tracer) dropStale(th *thread) {
	t.dropQueued(th.tid, func(ws unix.WaitStatus) bool { return staleStop(th, ws) })
}

// dropQueued removes tid's queued stops for which drop is true.
func (t *Tracer) dropQueued(tid int, drop func(unix.WaitStatus) bool) {
	if t.later.per[tid] == 0 {
		return
	}
	kept := t.later.stops[:0]
	for _, q := range t.later.stops {
		if q.tid == tid && drop(q.ws) {
			if t.later.per[q.tid]--; t.later.per[q.tid] <= 0 {
				delete(t.later.per, q.tid)
			}
			continue
		}
		kept = append(kept, q)
	}
	t.later.stops = kept
}

// queue keeps a stop for the main loop; the thread stays stopped until
// then (resume skips it).
func (t *Tracer) queue(tid int, ws unix.WaitStatus) {
	t.later.stops = append(t.later.stops, queuedStop{tid, ws})
	if t.later.per == nil {
		t.later.per = map[int]int{}
	}
	t.later.per[tid]++
}

// nextQueued takes the oldest queued stop.
func (t *Tracer) nextQueued() (queuedStop, bool) {
	if len(t.later.stops) == 0 {
		return queuedStop{}, false
	}
	q := t.later.stops[0]
	t.later.stops = t.later.stops[1:]
	if t.later.per[q.tid]--; t.later.per[q.tid] <= 0 {
		delete(t.later.per, q.tid)
	}
	return q, true
}

// killRequested reports whether Tracer.Kill was called.
func (t *Tracer) killRequested() bool {
	t.shared.mu.Lock()
	defer t.shared.mu.Unlock()
	return t.shared.killing
}

// procState returns the state letter of /proc/TID/stat (R, S, t, Z, X,
// ...), or 0 when the thread is gone.
func procState(tid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		return 0
	}
	return statState(b)
}

// statusField returns the value of field key of the status file in dir
// (/proc/PID or /proc/self), trimmed; false when the file cannot be read
// or has no such field.
func statusField(dir, key string) (string, bool) {
	b, err := os.ReadFile(dir + "/status")
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// statState parses the state field of a /proc/PID/stat line: the first
// field after the command, which is in parentheses and may itself hold
// ") ".
func statState(b []byte) byte {
	for i := len(b) - 1; i > 0; i-- {
		if b[i] == ')' {
			if i+2 < len(b) {
				return b[i+2]
			}
			return 0
		}
	}
	return 0
}

// warnOp reports a failed operation in the tracee, unless its thread is
// gone: that is the thread's exit, not a problem.
func (t *Tracer) warnOp(err error) {
	var ref *FilterRefusedError
	if errors.As(err, &ref) && t.att.stay {
		return // lateFilter said it, once
	}
	if !errors.Is(err, ErrThreadGone) {
		t.warnf("%v", err)
	}
}
