package ptrun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ptjit/ptjit/tracker"
)

// perfRecord is the --pt=intel backend: `perf record -e intel_pt//u` runs
// the launcher helper as its workload, so the trace covers the helper's
// exec of the program and everything after it, every thread and child
// (perf's inherit), with perf's own sideband (MMAP2, COMM, ITRACE_START,
// SWITCH, TIME_CONV). The synchronisation:
//
//  1. ptjit starts perf on an OS thread of its own (not the tracer thread:
//     the tracker waits with __WNOTHREAD, so it never reaps perf);
//  2. perf sets up the events and execs the helper (enable_on_exec: the
//     trace starts there); the helper says hello on the handshake socket,
//     and ptjit learns its pid from the kernel (SO_PASSCRED);
//  3. the tracer seizes the helper and releases it; the helper installs
//     the seccomp filter and execs the program;
//  4. when the program's last process exits, perf writes the rest of the
//     trace and exits; wait collects perf's status.
//
// ptjit itself is not traced (it is not perf's workload). What ptjit does
// inside the program — injected syscalls of W^X, its protection changes —
// runs as the program's threads and appears in the trace between a
// TIP.PGD and a TIP.PGE, and in the MMAP2 records perf writes for
// protection changes; code.db marks them (ptjit_prot, by_ptjit) so the
// decoder can tell them from the program's own.
type perfRecord struct {
	perf string // the perf binary
	out  string // DIR/perf.data

	cmd    *exec.Cmd
	done   chan error
	stderr bytes.Buffer
}

// perfEvent is the event ptjit records: user-space only, with TSC and MTC
// timing (mtc_period 3), return compression and branch tracing on: the
// configuration code.db's TSC stamps and the decoder's timing assume.
const perfEvent = "intel_pt/tsc=1,mtc=1,mtc_period=3,branch=1,noretcomp=0/u"

// PerfArgs is the perf command line for recording workload into out.
//
// perf records a workload per CPU (one AUX queue per CPU, shared by every
// thread and child that runs there; a workload's AUX event cannot be
// inherited into per-thread buffers), so the decoder needs the
// context-switch records to tell the threads of a CPU's queue apart.
// perf's intel_pt recording options (tools/perf/arch/x86/util/intel-pt.c,
// intel_pt_recording_options) add them by themselves when the event has
// tsc=1 and the recording is per CPU: a system-wide dummy:u event with
// context_switch=1 (SWITCH_CPU_WIDE records, have_sched_switch 3) where
// the user may record CPU-wide (perf_event_paranoid <= 0 or CAP_PERFMON),
// else PERF_RECORD_SWITCH of the traced tasks (have_sched_switch 2); and
// TIME and CPU in the sample_id of the sideband. --no-switch-events, or a
// kernel without switch events (before 4.3), would leave the decoder
// nothing to split a CPU's queue with. ptjit asks with --switch-events
// all the same: it says what the decoder relies on, and a perf that cannot
// record them fails rather than writing a trace nobody can attribute.
func PerfArgs(out string, workload []string) []string {
	return append([]string{"record", "-q", "-e", perfEvent, "--switch-events", "-o", out, "--"}, workload...)
}

func (r *perfRecord) launcher(path string, argv []string, events tracker.EventsMode) tracker.Launch {
	return func() (int, func() error, error) {
		filter, err := filterMessage(events)
		if err != nil {
			return 0, nil, err
		}
		self, err := os.Executable()
		if err != nil {
			self = "/proc/self/exe"
		}
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("socketpair: %w", err)
		}
		unix.CloseOnExec(sp[0])
		if err := unix.SetsockoptInt(sp[0], unix.SOL_SOCKET, unix.SO_PASSCRED, 1); err != nil {
			unix.Close(sp[0])
			unix.Close(sp[1])
			return 0, nil, fmt.Errorf("SO_PASSCRED: %w", err)
		}
		workload := helperArgs(self, sp[1], path, argv)
		r.cmd = exec.Command(r.perf, PerfArgs(r.out, workload)...)
		r.cmd.Stdin, r.cmd.Stdout = os.Stdin, os.Stdout
		r.cmd.Stderr = &teeWriter{w: os.Stderr, copy: &r.stderr}
		r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		// The helper's end of the socket is not close-on-exec, so perf
		// and its workload inherit it at the same number (ExtraFiles
		// would renumber it).
		started := make(chan error, 1)
		r.done = make(chan error, 1)
		go func() {
			// Never unlocked: perf's PDEATHSIG is tied to this thread.
			runtime.LockOSThread()
			err := r.cmd.Start()
			started <- err
			if err != nil {
				return
			}
			r.done <- r.cmd.Wait()
		}()
		err = <-started
		unix.Close(sp[1])
		if err != nil {
			unix.Close(sp[0])
			return 0, nil, fmt.Errorf("starting %s: %w", r.perf, err)
		}
		pid, err := recvHello(sp[0])
		if err != nil {
			unix.Close(sp[0])
			perr := r.wait()
			if perr != nil {
				return 0, nil, perr
			}
			return 0, nil, fmt.Errorf("perf record never started the program: %w", err)
		}
		release := func() error {
			defer unix.Close(sp[0])
			return writeAll(sp[0], filter)
		}
		return pid, release, nil
	}
}

// recvHello reads the helper's hello byte and returns the pid the kernel
// attached to it.
func recvHello(fd int) (int, error) {
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(unix.SizeofUcred))
	for {
		n, oobn, _, _, err := unix.Recvmsg(fd, buf, oob, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n != 1 {
			return 0, errors.New("the launcher exited")
		}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil || len(msgs) == 0 {
			return 0, errors.New("no credentials on the handshake")
		}
		cred, err := unix.ParseUnixCredentials(&msgs[0])
		if err != nil {
			return 0, err
		}
		return int(cred.Pid), nil
	}
}

// wait waits for perf record to finish writing (it exits after its
// workload); a perf that is still running a minute after the program is
// gone is stopped with SIGINT, which makes it finish the file.
func (r *perfRecord) wait() error {
	if r.cmd == nil || r.done == nil {
		return nil
	}
	var err error
	select {
	case err = <-r.done:
	case <-time.After(time.Minute):
		r.cmd.Process.Signal(syscall.SIGINT)
		err = <-r.done
	}
	r.done = nil
	if err != nil {
		msg := strings.TrimSpace(r.stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg != "" {
			return fmt.Errorf("perf record: %v: %s", err, msg)
		}
		return fmt.Errorf("perf record: %w", err)
	}
	return nil
}

// teeWriter passes perf's stderr through and keeps a copy for errors.
type teeWriter struct {
	w    *os.File
	copy *bytes.Buffer
}

func (t *teeWriter) Write(b []byte) (int, error) {
	if t.copy.Len() < 1<<16 {
		t.copy.Write(b)
	}
	return t.w.Write(b)
}
