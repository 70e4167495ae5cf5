package ptrun

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/tracker"
)

// Attaching to a running process (Config.Attach, ptjit run -p PID): the
// recording starts at the attach and ends at the detach (Config.Duration,
// or ptjit's SIGINT, SIGTERM or SIGHUP), or at the process's end. The
// process gets none of ptjit's signals and is never killed by ptjit: it
// runs on untraced after the detach, as if never traced. Attach needs BPF
// events (the seccomp filter of the launch path cannot be removed from a
// process), applies W^X from the attach and undoes it at the detach
// (tracker/attach_linux_amd64.go), and traces with --pt=soft (not its JIT
// filter), with --pt=intel (perf record -p PID, started after the attach's
// snapshot and stopped before the threads are released:
// perfattach_linux_amd64.go), or not at all.

// validateAttach checks an attach's options before anything is touched; it
// returns the status ptjit exits with and why (2 for a usage error, 1 for
// a process that cannot be attached to).
func validateAttach(cfg Config) (status int, err error) {
	if cfg.Attach < 0 {
		return 2, errors.New("-p: not a process id")
	}
	if len(cfg.Argv) > 0 {
		return 2, errors.New("-p and a PROGRAM: give one (usage: ptjit run -p PID [flags], or ptjit run [flags] [--] PROGRAM [ARGS...])")
	}
	if cfg.Duration < 0 {
		return 2, fmt.Errorf("--duration: %v is negative", cfg.Duration)
	}
	switch cfg.Events {
	case tracker.EventsSeccomp:
		return 2, errors.New("attach needs BPF events: --events=seccomp stops calls with a seccomp filter, which cannot be removed from a running process (use --events=bpf or auto)")
	}
	if cfg.PT == PTSoft && cfg.SoftFilter {
		return 2, errors.New("--soft-filter=jit: not with -p (it rewrites every call that adds PROT_EXEC at its entry, and an attached process has no filter to stop them; plain --pt=soft works)")
	}
	if cfg.PT == PTIntel {
		if _, err := IntelPT(); err != nil {
			return 2, err
		}
	}
	if cfg.PT != PTSoft && (cfg.GroundTruth != "" || cfg.SoftFilter || cfg.SoftLayout != "" || cfg.SoftCPUs != 0) {
		return 2, errors.New("--ground-truth, --soft-filter, --soft-layout and --soft-cpus need --pt=soft")
	}
	if err := tracker.CheckAttach(cfg.Attach); err != nil {
		return 1, err
	}
	return 0, nil
}

// attachEvents opens the BPF event source an attach needs: --events auto
// and bpf alike; where it cannot run, the reason in one line (status 2).
func attachEvents(cfg Config) (*bpfev.Source, error) {
	if cfg.Copy == tracker.CopyChanged {
		return nil, errors.New("--copy=changed: not with -p (its userfaultfd would stay in the process; an attached process's versions are read whole)")
	}
	src, err := bpfev.Open(tracker.SourceConfig(cfg.BPF))
	if err == nil {
		return src, nil
	}
	why := err.Error()
	if aerr := bpfev.Available(); aerr != nil {
		why = aerr.Error()
	}
	return nil, fmt.Errorf("attach needs BPF events: %s", why)
}

// runAttach is Run for Config.Attach.
func runAttach(cfg Config) (status int, err error) {
	if status, err := validateAttach(cfg); err != nil {
		return status, err
	}
	// --copy=auto would track large ranges with a userfaultfd made in
	// the process, which would stay there after the detach
	cfg.Copy = tracker.CopyFull
	r := &run{cfg: cfg, stderr: cfg.Stderr, events: tracker.EventsBPF}
	if r.stderr == nil {
		r.stderr = os.Stderr
	}
	r.catchSignals(true) // from here: one before the attach leaves nothing (interrupted)
	if r.src, err = attachEvents(cfg); err != nil {
		signal.Stop(r.sigc)
		return 2, err
	}
	if r.out, err = PrepareOutDir(cfg.OutDir); err != nil {
		r.src.Close()
		signal.Stop(r.sigc)
		return 1, err
	}
	r.cfg.Argv = []string{"-p", strconv.Itoa(cfg.Attach)} // code.db's command: what was recorded
	if status, err := r.open(); err != nil {
		r.abandon()
		return status, err
	}
	if err := r.interrupted(fmt.Sprintf("the attach (pid %d untouched)", cfg.Attach)); err != nil {
		r.abandon()
		return 128 + int(err.Sig), err
	}
	r.t0 = time.Now()
	tr, err := tracker.Start(tracker.Options{Recorder: r.rec, Pin: tracker.PinOff, WX: cfg.WX, Warnf: r.warnf,
		SoftPT: r.pt.soft, Copy: cfg.Copy, Events: tracker.EventsBPF, Source: r.src, Attach: cfg.Attach}, nil)
	r.src = nil // the tracker's now
	if err != nil {
		r.pt.finish()
		r.abandon()
		return 1, err
	}
	r.tr = tr
	defer r.release()
	// --pt=intel: perf starts now, after the attach's snapshot, and the
	// attach is done once its events are enabled
	var perf *perfAttach
	if r.pt.perf != nil {
		p, sig, err := startPerfAttach(r.pt.perf.perf, r.pt.perf.out, cfg.Attach, r.sigc)
		if err != nil {
			// no trace: the attach is undone and nothing is left
			tr.Detach()
			tr.Wait()
			r.abandon()
			return 1, err
		}
		perf = p
		if sig != nil {
			tr.Detach() // asked for during the attach: perf is stopped already
		}
	}
	res, werr := r.waitAttached(perf)
	// the recording's window (CLOCK_MONOTONIC ns)
	r.rec.SetStat("attached", strconv.Itoa(cfg.Attach))
	if res.AttachedAt.MonoNS != 0 {
		r.rec.SetStat("attach_mono_ns", strconv.FormatInt(res.AttachedAt.MonoNS, 10))
	}
	if res.Detached {
		r.rec.SetStat("detached", "1")
		r.rec.SetStat("detach_mono_ns", strconv.FormatInt(res.DetachedAt.MonoNS, 10))
	}
	var perr error
	if perf != nil {
		if perf.EnabledAt.MonoNS != 0 {
			r.rec.SetStat("perf_enabled_mono_ns", strconv.FormatInt(perf.EnabledAt.MonoNS, 10))
		}
		r.rec.SetStat("perf_stopped_mono_ns", strconv.FormatInt(perf.StoppedAt.MonoNS, 10))
		perr = perf.Err()
	}
	status, err = r.finish(res, 0, werr)
	if (err == nil || perr != nil) && werr == nil && res.Detached && !cfg.Quiet {
		fmt.Fprintf(r.stderr, "ptjit: detached from pid %d; it runs on\n", cfg.Attach)
	}
	if err == nil && perr != nil {
		return 1, perr
	}
	return status, err
}

// waitAttached waits for the attached process's end or the detach, which
// the first of --duration, ptjit's SIGINT, SIGTERM and SIGHUP, and perf's
// exit (with perf) asks for. The process gets none of these signals. perf
// is stopped before the detach starts, and after the process's end.
func (r *run) waitAttached(perf *perfAttach) (tracker.Result, error) {
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		var timeout <-chan time.Time
		if r.cfg.Duration > 0 {
			tm := time.NewTimer(r.cfg.Duration)
			defer tm.Stop()
			timeout = tm.C
		}
		var perfDone <-chan struct{}
		if perf != nil {
			perfDone = perf.Done()
		}
		select {
		case <-r.sigc:
		case <-timeout:
		case <-perfDone: // no trace from now on: detach at once
		case <-stop:
			return
		}
		if perf != nil {
			perf.Stop() // the trace ends before any thread is released
		}
		r.tr.Detach()
	}()
	res, err := r.tr.Wait()
	close(stop)
	<-done
	if perf != nil && !res.Detached {
		perf.End() // the process ended: perf exits with it
	}
	return res, err
}
