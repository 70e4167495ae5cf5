package ptrun

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/softpt"
	"github.com/ptjit/ptjit/tracker"
	"golang.org/x/sys/unix"
)

// Config is one `ptjit run`.
type Config struct {
	OutDir string   // recording directory (created; an old recording is replaced)
	Argv   []string // the program and its arguments, argv[0] as typed
	Quiet  bool     // no summary, no warnings
	Pin    tracker.PinMode
	WX     tracker.WXMode // W^X write tracking; "" is off
	// Proxy is where W^X's protection changes run (--proxy; "" is auto)
	Proxy tracker.ProxyMode
	// PT is where the Intel PT trace comes from ("" is off); GroundTruth,
	// with PTSoft, names a file for the instructions actually executed.
	PT          PTMode
	GroundTruth string
	// SoftFilter, with PTSoft, steps and traces only JIT code (--soft-filter=jit).
	SoftFilter bool
	// SoftLayout, with PTSoft, is perf.data's layout ("" is per-thread);
	// SoftCPUs, with the per-cpu layout, the number of virtual CPUs with
	// deterministic placement (0: the CPUs threads really ran on).
	SoftLayout softpt.Layout
	SoftCPUs   int
	// Copy is how later versions of a JIT range are read (--copy; "" is
	// auto).
	Copy tracker.CopyMode
	// Events is where the address-space calls come from (--events; ""
	// is seccomp): auto is bpf where bpfev.Available, else seccomp with
	// one line saying why. BPF configures the event source (tests force
	// its fallbacks with a small budget or ring).
	Events tracker.EventsMode
	BPF    bpfev.Config
	Stderr io.Writer // ptjit's messages; nil: os.Stderr
	// Attach, if not 0, is a running process to record instead of Argv
	// (ptjit run -p; attach.go), until Duration (0: until ptjit's
	// SIGINT, SIGTERM or SIGHUP, or the process's end).
	Attach   int
	Duration time.Duration
}

// KilledError says ptjit was stopped by a signal; the program was killed
// and the recording flushed.
type KilledError struct{ Sig syscall.Signal }

func (e *KilledError) Error() string {
	return fmt.Sprintf("%v: the program was killed; the recording holds everything up to now", sigName(e.Sig))
}

func sigName(s syscall.Signal) string {
	if name := unix.SignalName(s); name != "" {
		return name
	}
	return "signal " + strconv.Itoa(int(s))
}

// Run records cfg.Argv and returns the program's exit status (128+N when
// signal N killed it). A non-nil error is either a *StartError (status
// 126/127), an *OutDirError, a *KilledError (status 128+N), or a failure
// of ptjit itself; status is then what ptjit should exit with.
func Run(cfg Config) (status int, err error) {
	if cfg.Attach != 0 {
		return runAttach(cfg)
	}
	if cfg.Duration != 0 {
		return 2, errors.New("--duration needs -p")
	}
	path, status, err := validate(cfg)
	if err != nil {
		return status, err
	}
	r, status, err := start(cfg, path)
	if err != nil {
		return status, err
	}
	defer r.release()
	return r.supervise()
}

// validate checks cfg before anything is touched (an earlier recording
// in cfg.OutDir stays) and resolves the program like a shell. It returns
// the program's path, or the status ptjit exits with and why: 2 for a
// usage error, 126 or 127 with the *StartError of a program that cannot
// be run.
func validate(cfg Config) (path string, status int, err error) {
	if len(cfg.Argv) == 0 {
		return "", 2, errors.New("no program to run (usage: ptjit run [-o DIR] [-q] [--] PROGRAM ARGS...)")
	}
	// Options that only mean something with the soft backend.
	if cfg.GroundTruth != "" && cfg.PT != PTSoft {
		return "", 2, errors.New("--ground-truth needs --pt=soft")
	}
	if cfg.SoftFilter && cfg.PT != PTSoft {
		return "", 2, errors.New("--soft-filter=jit needs --pt=soft")
	}
	if (cfg.SoftLayout != "" || cfg.SoftCPUs != 0) && cfg.PT != PTSoft {
		return "", 2, errors.New("--soft-layout and --soft-cpus need --pt=soft")
	}
	if cfg.SoftCPUs < 0 || cfg.SoftCPUs > 4096 {
		return "", 2, fmt.Errorf("--soft-cpus: %d is not between 0 and 4096", cfg.SoftCPUs)
	}
	path, err = Resolve(cfg.Argv[0])
	if err != nil {
		var se *StartError
		errors.As(err, &se)
		return "", se.Code, err
	}
	return path, 0, nil
}

// run is one recording from start to the end of supervise.
type run struct {
	cfg      Config
	stderr   io.Writer
	out      *OutDir
	rec      *db.Recorder
	pt       *ptBackend
	tr       *tracker.Tracer
	sigc     chan os.Signal // SIGINT, SIGTERM, SIGHUP for ptjit
	calStart clock.Stamp    // the start of the TSC calibration
	t0       time.Time      // when the tracker started
	// events: where the address-space calls come from; src, with
	// EventsBPF, the BPF event source until the tracker takes it
	events tracker.EventsMode
	src    *bpfev.Source
}

// start prepares the recording directory, code.db and the PT backend,
// catches ptjit's signals and starts the program at path under the
// tracker. On error nothing is left: no half recording, the directory
// unlocked, the signals as they were; status is then what ptjit exits
// with (2 where the machine cannot record --pt=intel, else 1). Otherwise
// the program runs; the caller calls supervise, then release.
func start(cfg Config, path string) (r *run, status int, err error) {
	r = &run{cfg: cfg, stderr: cfg.Stderr}
	if r.stderr == nil {
		r.stderr = os.Stderr
	}
	// ptjit's signals are its own from here: one that comes before the
	// program starts leaves nothing (interrupted)
	r.catchSignals(false)
	if r.events, r.src, err = resolveEvents(cfg, r.stderr); err != nil {
		signal.Stop(r.sigc)
		return nil, 2, err
	}
	if r.out, err = PrepareOutDir(cfg.OutDir); err != nil {
		if r.src != nil {
			r.src.Close()
		}
		signal.Stop(r.sigc)
		return nil, 1, err
	}
	if status, err := r.open(); err != nil {
		r.abandon()
		return nil, status, err
	}
	if err := r.interrupted("the program started"); err != nil {
		r.abandon()
		return nil, 128 + int(err.Sig), err
	}
	if err := r.launch(path); err != nil {
		r.abandon()
		return nil, 1, err
	}
	return r, 0, nil
}

// InterruptedError says ptjit got SIGINT, SIGTERM or SIGHUP before it
// started recording (the program started, or the attach): nothing was
// recorded, nothing is left, and a process to attach to was not touched.
type InterruptedError struct {
	Sig    syscall.Signal
	Before string
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("%v before %s: nothing recorded", sigName(e.Sig), e.Before)
}

// catchSignals makes SIGINT, SIGTERM and SIGHUP ptjit's, from its start:
// the first ends the recording (supervise, waitAttached), or, before it
// started, the run (interrupted). Launching, a signal ptjit's parent made
// it ignore stays ignored, and the program inherits it so, as it would
// alone. Attached, SIGINT and SIGTERM are ptjit's whatever its parent did
// (a shell starts a background job with SIGINT ignored; the process
// attached to inherits nothing from ptjit); SIGHUP stays ignored under
// nohup.
func (r *run) catchSignals(attach bool) {
	var sigs []os.Signal
	for _, s := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) || attach && s != syscall.SIGHUP {
			sigs = append(sigs, s)
		}
	}
	r.sigc = make(chan os.Signal, 1)
	signal.Notify(r.sigc, sigs...)
}

// interrupted returns the signal that came before the recording started,
// if any (it is then consumed).
func (r *run) interrupted(before string) *InterruptedError {
	select {
	case s := <-r.sigc:
		return &InterruptedError{Sig: s.(syscall.Signal), Before: before}
	default:
		return nil
	}
}

// open creates code.db, with a first estimate of the TSC frequency, and
// the PT backend. On error it returns the status ptjit exits with.
func (r *run) open() (status int, err error) {
	cwd, _ := os.Getwd()
	// The TSC frequency is measured over the whole life of ptjit (from
	// the process's start, clock.ProcessStart, to the program's end):
	// code.db first gets an estimate over at least 1 ms, in case ptjit is
	// killed, and the run's figure at the end, over at least
	// minCalibration. Spans taken from the process's start instead of
	// from here leave nothing to sleep for on most runs (a 10 ms sleep
	// before the launch cost every run 10 ms; from here, a run of
	// /bin/true still slept 5 ms at its end).
	r.calStart = clock.ProcessStart()
	if d := time.Millisecond - time.Duration(clock.Mono()-r.calStart.MonoNS); d > 0 {
		time.Sleep(d)
	}
	hz := clock.HzBetween(r.calStart, clock.Now())
	dbPath := filepath.Join(r.cfg.OutDir, "code.db")
	if r.rec, err = db.Create(dbPath, db.Meta{Command: r.cfg.Argv, Cwd: cwd, TSCHz: hz, Start: clock.Now()}); err != nil {
		return 1, err
	}
	// A write error on code.db or perf.data (disk full, I/O error) is told
	// at once, -q or not: the program keeps running, that file's recording
	// stops at its last complete write, and ptjit exits non-zero.
	var errMu sync.Mutex
	onWriteErr := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		fmt.Fprintf(r.stderr, "ptjit: %v; recording stopped there, the program keeps running\n", err)
	}
	r.rec.SetOnError(onWriteErr)
	if r.pt, err = startPT(r.cfg, r.warnf, onWriteErr); err != nil {
		if errors.Is(err, ErrNoIntelPT) {
			return 2, err
		}
		return 1, err
	}
	return 0, nil
}

// launch starts the program at path under the tracker.
func (r *run) launch(path string) error {
	pin := r.cfg.Pin
	if pin == "" || pin == tracker.PinAuto {
		pin = autoPin
	}
	r.t0 = time.Now()
	tr, err := tracker.Start(tracker.Options{Recorder: r.rec, Pin: pin, WX: r.cfg.WX, Warnf: r.warnf, SoftPT: r.pt.soft,
		SoftFilter: r.cfg.SoftFilter, Copy: r.cfg.Copy, Proxy: r.cfg.Proxy, Events: r.events, Source: r.src}, r.pt.launch(path, r.cfg.Argv, r.events))
	r.src = nil // the tracker's now, started or not
	if err != nil {
		// The program never ran.
		r.pt.finish()
		return err
	}
	r.tr = tr
	return nil
}

// abandon undoes what start did before it failed: the code.db just
// created goes (nothing half-recorded), the signals are ptjit's again, and
// the directory is unlocked.
func (r *run) abandon() {
	if r.src != nil { // not handed to the tracker
		r.src.Close()
	}
	if r.rec != nil {
		r.rec.Close()
		removeRecording(r.cfg.OutDir)
	}
	if r.sigc != nil {
		signal.Stop(r.sigc)
	}
	r.out.Release()
}

// warnf prints a warning unless the run is quiet.
func (r *run) warnf(format string, args ...any) {
	if !r.cfg.Quiet {
		fmt.Fprintf(r.stderr, "ptjit: "+format+"\n", args...)
	}
}

// release stops catching ptjit's signals and unlocks the recording
// directory.
func (r *run) release() {
	signal.Stop(r.sigc)
	r.out.Release()
}

// supervise waits for the program's end (wait), then completes the
// recording (finish). It returns what Run returns.
func (r *run) supervise() (status int, err error) {
	res, sig, werr := r.wait()
	return r.finish(res, sig, werr)
}

// wait waits for the program's end while ptjit's signals arrive: the
// first is passed on to the program (passSignal), unless the program
// does not run yet; a second, or one the program cannot get, kills every
// tracee. It returns the tracker's result, the signal ptjit killed the
// program for (0 when none), and the tracker's error.
func (r *run) wait() (res tracker.Result, sig syscall.Signal, err error) {
	var got syscall.Signal // written by the goroutine, read after done
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		passed := false
		for {
			select {
			case s := <-r.sigc:
				sig := s.(syscall.Signal)
				if !passed {
					passed = true
					if passSignal(r.tr, sig, stop) {
						continue // the program has it: wait for its end
					}
				}
				got = sig
				r.tr.Kill()
				return
			case <-stop:
				return
			}
		}
	}()
	res, err = r.tr.Wait()
	close(stop)
	<-done
	return res, got, err
}

// finish completes the recording after the program's end: the PT trace,
// the statistics and the TSC frequency in code.db's meta table, code.db's
// close, and the summary line. sig is the signal ptjit killed the
// program for (0 when none) and werr the tracker's error. It returns the
// program's status, or ptjit's when the recording failed.
func (r *run) finish(res tracker.Result, sig syscall.Signal, werr error) (status int, err error) {
	perr := r.pt.finish()
	st := res.Stats
	st.WX = r.cfg.WX
	st.Wall = time.Since(r.t0)
	st.TracerMaxRSSKB = maxRSSKB()
	st.TracerUser, st.TracerSys = selfCPU()
	st.WriteMeta(r.rec)
	if d := minCalibration - time.Duration(clock.Mono()-r.calStart.MonoNS); d > 0 {
		time.Sleep(d)
	}
	if hz := clock.HzBetween(r.calStart, clock.Now()); hz != 0 {
		r.rec.SetStat("tsc_hz", strconv.FormatUint(hz, 10))
	}
	if res.Refused != nil {
		r.rec.Refuse(res.Refused.Error())
	}
	cerr := r.rec.Close()
	if !r.cfg.Quiet && res.Refused == nil {
		// (a refused run says so in one line, its error, and nothing
		// else: what it recorded is the refused exec)
		s := Summary(st)
		if cerr != nil {
			// What code.db really holds, not what was recorded.
			saved := r.rec.Saved()
			s = fmt.Sprintf("code.db holds %d of %d versions and %d of %d writes (it stopped at a write error); %s",
				saved.Versions, st.Versions, saved.Writes, st.Writes, s)
		}
		fmt.Fprintf(r.stderr, "ptjit: %s\n", s)
		if s := r.pt.summary(); s != "" {
			fmt.Fprintf(r.stderr, "ptjit: %s\n", s)
		}
	}
	switch {
	case werr != nil:
		return 1, werr
	case cerr != nil:
		return 1, cerr // it names code.db
	case perr != nil:
		return 1, perr
	case res.Refused != nil:
		// a program ptjit cannot record: killed at its exec
		return RefusedStatus, res.Refused
	case sig != 0:
		return 128 + int(sig), &KilledError{sig}
	}
	return res.Status, nil
}

// RefusedStatus is ptjit run's exit status when it refused the program
// (a 32-bit one: tracker.RefusedError) and killed it: the shell's status
// for a command found but not executable.
const RefusedStatus = 126

// minCalibration is the shortest span the TSC frequency is measured over,
// from the process's start. A span S read with a jitter j (the two clock
// reads of a stamp, well under a microsecond on a quiet machine) is off by
// about j/S: 0.003 % at 5 ms here (2596.17–2596.23 MHz against the kernel's
// 2596.146 on /bin/true runs). The error this puts on a time in the
// recording is that fraction of the time since the start, so at most about
// j for a run as long as the span. A longer run gives a better figure.
const minCalibration = 5 * time.Millisecond

// signalGrace is how long ptjit waits, after a SIGINT, SIGTERM or SIGHUP
// of its own, to see the program receive the same signal (Ctrl-C, a hangup
// and kill -- -PGID reach the whole process group) before it passes the
// signal on itself.
const signalGrace = 250 * time.Millisecond

// passSignal handles the first SIGINT, SIGTERM or SIGHUP ptjit receives:
// the program must see it as it would alone, once. If the program got it
// too (from the terminal or a kill of the process group), nothing more is
// sent; otherwise (kill of ptjit's pid) ptjit sends it to the program's
// process, as kill(1) of the program alone would. Either way ptjit then
// waits for the program to end, and exits with its status; a second signal
// kills it. passSignal reports false where the program does not run yet
// (ptjit's launcher): the caller kills it.
func passSignal(tr *tracker.Tracer, sig syscall.Signal, stop <-chan struct{}) bool {
	since := time.Now().Add(-signalGrace)
	deadline := time.NewTimer(signalGrace)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !tr.SignalSeen(sig, since) {
		select {
		case <-stop:
			return true
		case <-tick.C:
			continue
		case <-deadline.C:
		}
		return tr.Signal(sig)
	}
	return true
}

// Summary formats the end-of-run line (without the "ptjit: " prefix).
func Summary(st tracker.Stats) string {
	per := 0.0
	if st.Stops > 0 {
		per = float64(st.StopNS) / float64(st.Stops) / 1e3
	}
	s := fmt.Sprintf("%s, %s, %s, %s, %s, %s, %.1f ms in stops (%.1f µs/stop), %.1f MB snapshotted",
		plural(st.Processes, "process", "processes"), plural(st.Threads, "thread", "threads"),
		plural(st.Regions, "region", "regions"), plural(st.Versions, "version", "versions"),
		plural(st.FileMaps, "file mapping", "file mappings"), plural(int(st.Stops), "stop", "stops"),
		float64(st.StopNS)/1e6, per, float64(st.Bytes)/1e6)
	s += ", " + tracker.CopySummary(st.Copy)
	if st.Events.Mode == tracker.EventsBPF {
		s += fmt.Sprintf(", BPF events: %d calls, %d applied without a stop, %d fallbacks", st.Events.Calls, st.Events.Applied, st.Events.Fallbacks)
		if st.Events.Lost > 0 {
			s += fmt.Sprintf(", %d lost (ring full)", st.Events.Lost)
		}
	}
	if st.FullProtect > 0 {
		s += fmt.Sprintf(", every mprotect stopped in %s (managed memory)", plural(st.FullProtect, "process", "processes"))
	}
	if st.RangeProtect > 0 {
		s += fmt.Sprintf(", mprotect stopped in %s of managed memory in %s", plural(st.RangeFilters, "range", "ranges"),
			plural(st.RangeProtect, "process", "processes"))
	}
	if st.Writes > 0 || st.BatchWrites > 0 {
		s += fmt.Sprintf(", %s (%d emulated, %d stepped), %s",
			plural(st.Writes, "write", "writes"), st.Emulated, st.Stepped,
			plural(st.BatchWrites, "batch-writable page", "batch-writable pages"))
	}
	if st.KernelWrites > 0 {
		s += ", " + plural(st.KernelWrites, "page", "pages") + " of code opened for the kernel's copies (read(2) and the like)"
	}
	if st.FreshMapped > 0 {
		s += fmt.Sprintf(", %d of %s of fresh RWX memory recorded at first execution",
			st.FreshExecuted, plural(st.FreshMapped, "page", "pages"))
	}
	if st.TCBPages > 0 {
		s += fmt.Sprintf(", %s of thread stacks and control blocks kept writable for the kernel (%d run)",
			plural(st.TCBPages, "page", "pages"), st.TCBExecuted)
	}
	if st.Names > 0 {
		s += ", " + plural(st.Names, "name", "names") + " from perf maps"
	}
	if st.WriterWaits > 0 {
		s += fmt.Sprintf(", waited %.1f ms for the database writer (%s)", float64(st.WriterWaitNS)/1e6, plural(st.WriterWaits, "time", "times"))
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// maxRSSKB returns this process's peak resident set size in KiB (its
// threads, not its children).
func maxRSSKB() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Maxrss
}

// selfCPU returns the user and system CPU time ptjit itself (all its
// threads: tracer, database writer, Go runtime; not the program) used so
// far: what the recording cost in CPU, beside the wall time the program
// lost.
func selfCPU() (user, sys time.Duration) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// resolveEvents decides where the address-space calls come from, and
// opens the BPF event source where they come from it: auto is bpf where
// the source opens and the options allow it, else seccomp, said in one
// line on stderr (not with -q); bpf where it cannot run is an error with
// the reason (bpfev.Available's).
func resolveEvents(cfg Config, stderr io.Writer) (tracker.EventsMode, *bpfev.Source, error) {
	switch cfg.Events {
	case "", tracker.EventsSeccomp:
		if cfg.BPF != (bpfev.Config{}) {
			return "", nil, errors.New("--bpf-budget and --bpf-cache need --events=bpf or auto")
		}
		return tracker.EventsSeccomp, nil, nil
	case tracker.EventsBPF, tracker.EventsAuto:
	default:
		return "", nil, fmt.Errorf("--events: %q is not auto, bpf or seccomp", cfg.Events)
	}
	var why string
	switch {
	case cfg.PT == PTSoft:
		why = "--pt=soft needs every call that adds PROT_EXEC at its entry"
	case cfg.Copy == tracker.CopyChanged:
		why = "--copy=changed reads changed pages at stops"
	default:
		src, err := bpfev.Open(tracker.SourceConfig(cfg.BPF))
		if err == nil {
			return tracker.EventsBPF, src, nil
		}
		why = err.Error()
		if aerr := bpfev.Available(); aerr != nil {
			why = aerr.Error() // the reason in one line
		}
	}
	if cfg.Events == tracker.EventsBPF {
		return "", nil, fmt.Errorf("--events=bpf: %s (--events=seccomp runs without BPF)", why)
	}
	if !cfg.Quiet {
		fmt.Fprintf(stderr, "ptjit: events from seccomp stops, not BPF: %s\n", why)
	}
	return tracker.EventsSeccomp, nil, nil
}
