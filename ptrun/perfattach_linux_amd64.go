package ptrun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ptjit/ptjit/clock"
)

// perf record for an attached process (ptjit run -p PID --pt=intel).
//
// The order, which is what makes every traced instruction's code known:
//
//  1. the tracker attaches and snapshots the process's code (tracker.Start
//     returns after it: code.db has every executable range as it is);
//  2. perf record -p PID starts with its events disabled (--delay=-1) and
//     a control pipe (--control=fd:CTL,ACK); ptjit writes "enable" and
//     waits for perf's "ack": perf writes it after the ENABLE ioctl on every
//     event it opened (every thread of the process, on every CPU; threads
//     and children created later inherit them), so from the ack on every
//     instruction the process runs in user space is traced. Only then is the
//     attach done (meta perf_enabled_mono_ns);
//  3. at the detach (--duration, ptjit's SIGINT, SIGTERM or SIGHUP, a
//     perf that died) perf gets SIGINT, which makes it disable its events,
//     write the rest of the trace and exit; ptjit waits for its exit
//     (perfStopWait, then SIGKILL, whose closing of perf's fds ends the
//     events too) and only then releases the threads (meta
//     perf_stopped_mono_ns, before detach_mono_ns). At the process's end
//     perf is stopped the same way.
//
// Why the control pipe and not perf.data: perf writes perf.data's header
// before it enables anything, and the first AUX record only comes when a
// thread has run and its buffer is flushed (a process asleep gives none),
// so no state of the file says "tracing now". The ack does: it follows
// the enable ioctls (evlist__ctlfd_process in tools/perf/util/evlist.c;
// perf 5.10 and later). A perf without --control or --delay=-1 fails at
// once with its usage error, which ptjit reports.
//
// perf runs in a process group of its own, so a Ctrl-C reaches ptjit
// alone, and ptjit decides when perf stops; PDEATHSIG kills it if ptjit
// dies. Code that ran before the ack is not in the trace; every version
// valid after it is in code.db.

// perfReadyWait bounds the wait for perf's ack; perfStopWait the wait for
// perf's exit after SIGINT (the launch path's minute; tests make them
// short).
var (
	perfReadyWait = 30 * time.Second
	perfStopWait  = time.Minute
)

// perfAttach is perf record -p PID running beside the tracker.
type perfAttach struct {
	cmd    *exec.Cmd
	done   chan struct{} // closed when perf has exited
	err    error         // perf's exit, once done
	stderr bytes.Buffer  // perf's stderr (written by exec until done)
	ctl    *os.File      // ptjit's end of the control pipe
	ack    *os.File      // ptjit's end of the ack pipe

	stopping bool // ptjit sent SIGINT
	ended    bool // the process ended first (End)
	killed   bool // ptjit sent SIGKILL after perfStopWait

	// EnabledAt is when perf acknowledged the enable; StoppedAt when it
	// had exited (CLOCK_MONOTONIC stamps).
	EnabledAt, StoppedAt clock.Stamp
}

// PerfAttachArgs is the perf command line for recording pid into out:
// PerfArgs' event and options, with the events disabled until "enable"
// comes on fd ctl (acknowledged on fd ack).
func PerfAttachArgs(out string, pid, ctl, ack int) []string {
	args := PerfArgs(out, nil)
	args = args[:len(args)-1] // the "--" before a workload
	return append(args, "--delay=-1", fmt.Sprintf("--control=fd:%d,%d", ctl, ack), "-p", strconv.Itoa(pid))
}

// startPerfAttach starts perf record on pid and waits until its events are
// enabled, perf exits, timeout passes or a signal comes on sigc. It
// returns the running perf, or why there is none. A signal (ptjit asked to
// detach meanwhile) is returned as sig: perf is then stopped and the
// caller detaches.
func startPerfAttach(perf, out string, pid int, sigc <-chan os.Signal) (p *perfAttach, sig os.Signal, err error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	ackR, ackW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, nil, err
	}
	// The goroutines below use pa, never the named result p, which the
	// returns of a failed start set to nil while they may still run (a
	// perf that exits at once: a nil dereference, seen under load).
	pa := &perfAttach{done: make(chan struct{}), ctl: ctlW, ack: ackR}
	p = pa
	// ExtraFiles are fds 3 and 4 in perf
	p.cmd = exec.Command(perf, PerfAttachArgs(out, pid, 3, 4)...)
	p.cmd.ExtraFiles = []*os.File{ctlR, ackW}
	p.cmd.Stderr = &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error, 1)
	go func() {
		// Never unlocked: perf's PDEATHSIG is tied to this thread.
		runtime.LockOSThread()
		err := pa.cmd.Start()
		started <- err
		if err != nil {
			return
		}
		pa.err = pa.cmd.Wait()
		pa.StoppedAt = clock.Now()
		close(pa.done)
	}()
	err = <-started
	ctlR.Close()
	ackW.Close()
	if err != nil {
		ctlW.Close()
		ackR.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", perf, err)
	}
	acked := make(chan error, 1)
	go func() {
		if _, err := pa.ctl.WriteString("enable\n"); err != nil {
			acked <- err
			return
		}
		// "ack\n" and a NUL
		buf := make([]byte, 16)
		n, err := pa.ack.Read(buf)
		if err == nil && !bytes.HasPrefix(buf[:n], []byte("ack")) {
			err = fmt.Errorf("answered %q to enable", buf[:n])
		}
		acked <- err
	}()
	tm := time.NewTimer(perfReadyWait)
	defer tm.Stop()
	select {
	case err = <-acked:
		if err == nil {
			p.EnabledAt = clock.Now()
			return p, nil, nil
		}
		// perf exited (EOF, EPIPE): its status says why
		select {
		case <-p.done:
			err = nil
		case <-time.After(time.Second):
		}
	case <-p.done:
	case <-tm.C:
		err = fmt.Errorf("its events were not enabled within %v", perfReadyWait)
	case sig = <-sigc:
		p.Stop()
		return p, sig, nil
	}
	p.Stop()
	if err == nil {
		err = p.exitError("exited before it was recording")
	} else {
		err = fmt.Errorf("perf record -p %d: %v", pid, err)
	}
	return nil, nil, err
}

// Done is closed when perf has exited.
func (p *perfAttach) Done() <-chan struct{} { return p.done }

// Stop stops perf (SIGINT: it disables its events, writes the rest of the
// trace and exits) and waits for its exit: perfStopWait, then SIGKILL.
// Once Stop returns, perf's events are closed: nothing more is traced.
func (p *perfAttach) Stop() {
	select {
	case <-p.done:
	default:
		p.stopping = true
		p.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(perfStopWait):
			p.killed = true
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	p.ctl.Close()
	p.ack.Close()
}

// End is Stop at the process's end: perf then exits by itself (its
// events hang up), which is no error.
func (p *perfAttach) End() {
	p.ended = true
	p.Stop()
}

// Err says, in one line, what went wrong with perf, or nil: a perf that
// exited by itself before ptjit stopped it, failed, or had to be killed.
// Call after Stop.
func (p *perfAttach) Err() error {
	switch {
	case p.killed:
		return fmt.Errorf("perf record: still running %v after SIGINT, killed: perf.data may be incomplete", perfStopWait)
	case p.stopping && (p.err == nil || stoppedBySIGINT(p.err)), p.ended && p.err == nil:
		return nil
	case !p.stopping && !p.ended:
		return p.exitError("exited while attached, the trace ends there")
	}
	return p.exitError("failed")
}

// stoppedBySIGINT reports an exit perf makes at SIGINT: it writes the file
// and raises SIGINT again.
func stoppedBySIGINT(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

// exitError is what perf's exit says, in one line: its status and its
// first line of error (perf -q says little; "Error:" and hint lines are
// skipped).
func (p *perfAttach) exitError(what string) error {
	status := "exit status 0"
	if p.err != nil {
		status = p.err.Error()
	}
	msg := ""
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l == "Error:" || strings.HasPrefix(l, "Hint:") {
			continue
		}
		msg = ": " + strings.TrimPrefix(l, "Error:\t")
		break
	}
	return fmt.Errorf("perf record %s (%s)%s", what, status, msg)
}
