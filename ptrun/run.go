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
	stderr := cfg.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	if len(cfg.Argv) == 0 {
		return 2, errors.New("no program to run (usage: ptjit run [-o DIR] [-q] [--] PROGRAM ARGS...)")
	}
	// Options that only mean something with the soft backend are refused
	// before anything is touched (an earlier recording in DIR stays).
	if cfg.GroundTruth != "" && cfg.PT != PTSoft {
		return 2, errors.New("--ground-truth needs --pt=soft")
	}
	if cfg.SoftFilter && cfg.PT != PTSoft {
		return 2, errors.New("--soft-filter=jit needs --pt=soft")
	}
	if (cfg.SoftLayout != "" || cfg.SoftCPUs != 0) && cfg.PT != PTSoft {
		return 2, errors.New("--soft-layout and --soft-cpus need --pt=soft")
	}
	if cfg.SoftCPUs < 0 || cfg.SoftCPUs > 4096 {
		return 2, fmt.Errorf("--soft-cpus: %d is not between 0 and 4096", cfg.SoftCPUs)
	}
	events, src, err := resolveEvents(cfg, stderr)
	if err != nil {
		return 2, err
	}
	if src != nil {
		defer func() {
			if src != nil { // not handed to the tracker
				src.Close()
			}
		}()
	}
	path, err := Resolve(cfg.Argv[0])
	if err != nil {
		var se *StartError
		errors.As(err, &se)
		return se.Code, err
	}
	out, err := PrepareOutDir(cfg.OutDir)
	if err != nil {
		return 1, err
	}
	defer out.Release()
	cwd, _ := os.Getwd()
	// The TSC frequency is measured over the whole life of ptjit (from
	// the process's start, clock.ProcessStart, to the program's end):
	// code.db first gets an estimate over at least 1 ms, in case ptjit is
	// killed, and the run's figure at the end, over at least
	// minCalibration. Spans taken from the process's start instead of
	// from here leave nothing to sleep for on most runs (a 10 ms sleep
	// before the launch cost every run 10 ms; from here, a run of
	// /bin/true still slept 5 ms at its end).
	calStart := clock.ProcessStart()
	if d := time.Millisecond - time.Duration(clock.Mono()-calStart.MonoNS); d > 0 {
		time.Sleep(d)
	}
	hz := clock.HzBetween(calStart, clock.Now())
	dbPath := filepath.Join(cfg.OutDir, "code.db")
	rec, err := db.Create(dbPath, db.Meta{Command: cfg.Argv, Cwd: cwd, TSCHz: hz, Start: clock.Now()})
	if err != nil {
		return 1, err
	}
	warnf := func(format string, args ...any) {
		if !cfg.Quiet {
			fmt.Fprintf(stderr, "ptjit: "+format+"\n", args...)
		}
	}
	// A write error on code.db or perf.data (disk full, I/O error) is told
	// at once, -q or not: the program keeps running, that file's recording
	// stops at its last complete write, and ptjit exits non-zero.
	var errMu sync.Mutex
	onWriteErr := func(err error) {
		errMu.Lock()
		defer errMu.Unlock()
		fmt.Fprintf(stderr, "ptjit: %v; recording stopped there, the program keeps running\n", err)
	}
	rec.SetOnError(onWriteErr)
	pt, err := startPT(cfg, warnf, onWriteErr)
	if err != nil {
		// Nothing half-recorded: the code.db just created goes too.
		rec.Close()
		removeRecording(cfg.OutDir)
		if errors.Is(err, ErrNoIntelPT) {
			return 2, err
		}
		return 1, err
	}
	pin := cfg.Pin
	if pin == "" || pin == tracker.PinAuto {
		pin = autoPin
	}

	// Catch the signals that should stop ptjit; a signal ptjit's parent
	// made it ignore stays ignored (and is inherited so by the program).
	var sigs []os.Signal
	for _, s := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) {
			sigs = append(sigs, s)
		}
	}
	sigc := make(chan os.Signal, 1)
	signal.Notify(sigc, sigs...)
	defer signal.Stop(sigc)

	t0 := time.Now()
	tr, err := tracker.Start(tracker.Options{Recorder: rec, Pin: pin, WX: cfg.WX, Warnf: warnf, SoftPT: pt.soft,
		SoftFilter: cfg.SoftFilter, Copy: cfg.Copy, Events: events, Source: src}, pt.launch(path, cfg.Argv, events))
	src = nil // the tracker's now
	if err != nil {
		// The program never ran: leave no half recording behind.
		rec.Close()
		pt.finish()
		removeRecording(cfg.OutDir)
		return 1, err
	}
	var mu sync.Mutex
	var got syscall.Signal // the signal ptjit killed the program for
	stop := make(chan struct{})
	go func() {
		passed := false
		for {
			select {
			case s := <-sigc:
				sig := s.(syscall.Signal)
				if !passed {
					passed = true
					if passSignal(tr, sig, stop) {
						continue // the program has it: wait for its end
					}
				}
				mu.Lock()
				got = sig
				mu.Unlock()
				tr.Kill()
				return
			case <-stop:
				return
			}
		}
	}()
	res, werr := tr.Wait()
	close(stop)
	perr := pt.finish()
	elapsed := time.Since(t0)

	st := res.Stats
	cpuUser, cpuSys := selfCPU()
	for k, v := range map[string]string{
		"processes": strconv.Itoa(st.Processes), "threads": strconv.Itoa(st.Threads),
		"regions": strconv.Itoa(st.Regions), "versions": strconv.Itoa(st.Versions),
		"file_maps": strconv.Itoa(st.FileMaps), "stops": strconv.FormatInt(st.Stops, 10),
		"stop_ns": strconv.FormatInt(st.StopNS, 10), "snapshot_bytes": strconv.FormatInt(st.Bytes, 10),
		"read_errors": strconv.Itoa(st.ReadErrors), "pinned": strconv.FormatBool(st.Pinned),
		"wall_ns": strconv.FormatInt(elapsed.Nanoseconds(), 10),
		"wx":      string(cfg.WX), "wx_writes": strconv.Itoa(st.Writes), "wx_emulated": strconv.Itoa(st.Emulated),
		"wx_stepped": strconv.Itoa(st.Stepped), "wx_batch_pages": strconv.Itoa(st.BatchWrites),
		"wx_fresh_pages": strconv.Itoa(st.FreshMapped), "wx_fresh_executed": strconv.Itoa(st.FreshExecuted),
		"wx_tcb_pages": strconv.Itoa(st.TCBPages), "wx_tcb_executed": strconv.Itoa(st.TCBExecuted),
		"wx_kernel_write_pages": strconv.Itoa(st.KernelWrites),
		"injected_syscalls":     strconv.Itoa(st.Injected),
		// processes where every mprotect stops (ptjit managed memory
		// there); elsewhere only those adding PROT_EXEC (tracker/doc.go)
		"full_protect_processes": strconv.Itoa(st.FullProtect),
		// processes and ranges where only the mprotects of the memory
		// ptjit manages stop (tracker/fullprotect_linux_amd64.go)
		"range_protect_processes": strconv.Itoa(st.RangeProtect), "range_protect_filters": strconv.Itoa(st.RangeFilters),
		// how versions were read (tracker/pages_linux_amd64.go)
		"copy_mode": string(st.Copy.Mode), "copy_changed_ranges": strconv.Itoa(st.Copy.Ranges),
		"copy_changed_versions": strconv.Itoa(st.Copy.Versions), "copy_pages_read": strconv.FormatInt(st.Copy.PagesRead, 10),
		"copy_pages": strconv.FormatInt(st.Copy.Pages, 10), "copy_fallback": st.Copy.Fallback,
		// where the address-space calls came from (tracker's
		// events_linux_amd64.go): events read, applied from the ring,
		// bytes taken from them, fallbacks to a stop, records lost
		"events": string(st.Events.Mode), "events_calls": strconv.FormatInt(st.Events.Calls, 10),
		"events_applied": strconv.FormatInt(st.Events.Applied, 10), "events_bytes": strconv.FormatInt(st.Events.Bytes, 10),
		"events_fallbacks": strconv.FormatInt(st.Events.Fallbacks, 10), "events_lost": strconv.FormatUint(st.Events.Lost, 10),
		// ptjit's own peak RSS (not the program's, which /usr/bin/time
		// reports instead when it is larger): what the recording cost
		"tracer_maxrss_kb": strconv.FormatInt(maxRSSKB(), 10),
		// ptjit's own CPU time (user, system) up to the program's end
		"tracer_user_ns": strconv.FormatInt(cpuUser.Nanoseconds(), 10),
		"tracer_sys_ns":  strconv.FormatInt(cpuSys.Nanoseconds(), 10),
	} {
		rec.SetStat(k, v)
	}
	if d := minCalibration - time.Duration(clock.Mono()-calStart.MonoNS); d > 0 {
		time.Sleep(d)
	}
	if hz := clock.HzBetween(calStart, clock.Now()); hz != 0 {
		rec.SetStat("tsc_hz", strconv.FormatUint(hz, 10))
	}
	if res.Refused != nil {
		rec.Refuse(res.Refused.Error())
	}
	cerr := rec.Close()
	if !cfg.Quiet && res.Refused == nil {
		// (a refused run says so in one line, its error, and nothing
		// else: what it recorded is the refused exec)
		s := Summary(st)
		if cerr != nil {
			// What code.db really holds, not what was recorded.
			saved := rec.Saved()
			s = fmt.Sprintf("code.db holds %d of %d versions and %d of %d writes (it stopped at a write error); %s",
				saved.Versions, st.Versions, saved.Writes, st.Writes, s)
		}
		fmt.Fprintf(stderr, "ptjit: %s\n", s)
		if s := pt.summary(); s != "" {
			fmt.Fprintf(stderr, "ptjit: %s\n", s)
		}
	}
	mu.Lock()
	sig := got
	mu.Unlock()
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
			return "", nil, errors.New("--bpf-budget needs --events=bpf or auto")
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
		src, err := bpfev.Open(cfg.BPF)
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
