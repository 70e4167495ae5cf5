// Package ptrun starts a program under ptjit: it resolves the program like
// a shell, prepares the recording directory, launches the program so that
// the tracker traces it from its first instruction with the seccomp filter
// in place, handles ptjit's own signals, and prints the summary.
//
// Run is three steps. validate checks the options and resolves the
// program and touches nothing, so a refused command line leaves an
// earlier recording as it was. start prepares the directory (locked),
// code.db, the PT backend and the signal handling, and starts the
// program under the tracker; when it fails it leaves nothing behind.
// supervise waits for the program's end (passing signals on, below),
// then completes the recording: the PT trace, the run's statistics
// (tracker.Stats, to which it adds its own wall and CPU time and peak
// RSS) in code.db's meta table through Stats.WriteMeta, the TSC
// frequency measured over the whole run, code.db's close and the
// summary line.
//
// Launching. Go cannot run code between fork and exec, and the seccomp
// filter must be installed in the child before the program's execve. So
// ptjit re-executes itself (/proc/self/exe) with a hidden first argument;
// a C constructor (helper_linux_amd64.c) sees it before the Go runtime
// starts, so the helper costs one execve and no Go start, and the program
// is launched from a single-threaded process that never ran Go
// (docs/decisions.md has what that saved). It:
//  1. writes one byte on its handshake socket and blocks reading, until
//     the tracer thread has PTRACE_SEIZE'd it (with TRACESECCOMP,
//     TRACEEXEC, EXITKILL, ...) and sent the filter (tracker.LaunchRules,
//     compiled in Go) as a uint16 count and the sock_filter array; EOF
//     instead means the tracer is gone and the program must not run;
//  2. installs the filter — only now, because a SECCOMP_RET_TRACE syscall
//     with no tracer attached fails with ENOSYS; no_new_privs is set only
//     when the kernel demands it (no CAP_SYS_ADMIN);
//  3. execve's the program with the environment, cwd and file descriptors
//     it was given (fds 0-2 and every inherited fd ptjit did not open
//     itself; the socket is closed first). The helper is single-threaded,
//     never ran Go and installed no signal handler, so the program gets
//     the signal mask and dispositions Go's ForkExec gave the helper.
//
// The tracer sees the helper as a "helper" process and records nothing
// until its PTRACE_EVENT_EXEC.
//
// Never an orphan. The helper is forked from the tracker's locked OS
// thread with PR_SET_PDEATHSIG=SIGKILL (kept across the program's execve
// unless it is set-uid); PDEATHSIG is cleared in forked children, so
// children and threads of the program are covered by PTRACE_O_EXITKILL
// instead: every tracee gets SIGKILL when the tracer exits, however it
// exits. On SIGTERM, SIGINT or SIGHUP the program gets the signal once, as
// it would alone: from the kernel when it went to the process group
// (Ctrl-C), from ptjit when it went to ptjit alone (passSignal); ptjit then
// waits for it and exits with its status. On a second one ptjit kills
// every tracee with SIGKILL itself, waits for them, flushes code.db and
// exits 128+N.
//
// Signal dispositions: the program inherits SIG_IGN for SIGHUP and SIGINT
// when ptjit did; other signals ptjit's Go runtime handles (so an inherited
// SIG_IGN for, say, SIGTERM is lost), as for any Go program's children.
// ptjit catches its three signals first thing (catchSignals), before the
// BPF programs load or the directory is touched: one that comes before
// the program starts (or the attach) ends the run with an
// *InterruptedError, status 128+N, and nothing left (interrupted). An
// attach catches SIGINT and SIGTERM even where ptjit's parent made it
// ignore them (a shell's background job): the process attached to
// inherits nothing from ptjit, and they are how an attach ends.
//
// Attaching (Config.Attach, ptjit run -p; attach.go) replaces the
// launch: validateAttach refuses what an attach cannot do (no BPF events,
// --soft-filter=jit, --pt=intel where IntelPT fails: its error, status 2)
// before anything is touched, the tracker seizes the running process
// (tracker.Options.Attach) and ptjit's SIGINT, SIGTERM and SIGHUP, or
// Config.Duration, make it detach (Tracer.Detach) instead of reaching the
// process. The process is never killed by ptjit; code.db's meta has the
// attach and detach times.
//
// With --pt=intel (or auto where IntelPT succeeds) the order is
// (perfattach_linux_amd64.go):
//  1. the tracker attaches and snapshots the process's code
//     (attach_mono_ns); tracker.Start returns after the snapshot;
//  2. perf record -q -e <perfEvent> --switch-events -o DIR/perf.data
//     --delay=-1 --control=fd:CTL,ACK -p PID starts with its events off;
//     ptjit writes "enable" on CTL and the attach is done when perf's
//     "ack" comes on ACK (perf_enabled_mono_ns): perf writes it after the
//     ENABLE ioctl of every event, so from then on the process's user
//     code is traced. Code that ran before is not in the trace; every
//     version valid during the trace is in code.db (the snapshot, then
//     every change the tracker saw). perf.data's header or first AUX
//     record say nothing of that (the header is written before the
//     enable, a sleeping process writes no AUX data), hence the ack;
//  3. at the detach (--duration, a signal, perf's own exit) perf gets
//     SIGINT and ptjit waits for its exit (perfStopWait, then SIGKILL;
//     perf_stopped_mono_ns), and only then releases the threads
//     (detach_mono_ns): the trace holds nothing ptjit did not track. At
//     the process's end perf exits with it (or is stopped the same way).
//
// A perf that fails before the ack leaves nothing: the process is
// released at once, the recording removed, and ptjit exits 1 with one
// line (perf's status and first line of error). A perf that exits while
// attached ends the attach at once (the process released as at any
// detach, the recording kept) and ptjit exits 1 with one line. A signal
// for ptjit while perf starts stops perf, then detaches as usual. perf
// runs in a process group of its own (a Ctrl-C reaches ptjit alone,
// which stops perf in that order) with PDEATHSIG.
//
// Must not import: decode, ptfmt, recording. The launcher records; what
// reads a recording is above it.
package ptrun

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
