package ptrun

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/softpt"
	"github.com/ptjit/ptjit/tracker"
)

// PTMode is --pt: where the Intel PT trace comes from.
type PTMode string

const (
	PTAuto  PTMode = "auto"  // intel when the CPU has Intel PT and perf can use it, else off
	PTIntel PTMode = "intel" // the hardware, through perf record -e intel_pt//u
	PTSoft  PTMode = "soft"  // ptjit single-steps the program and writes the packets itself
	PTOff   PTMode = "off"   // code history only
)

// ParsePT parses --pt.
func ParsePT(s string) (PTMode, error) {
	switch PTMode(s) {
	case PTAuto, PTIntel, PTSoft, PTOff:
		return PTMode(s), nil
	}
	return "", fmt.Errorf("--pt: %q is not intel, soft, off or auto", s)
}

// ErrNoIntelPT reports a machine on which --pt=intel cannot record.
var ErrNoIntelPT = errors.New("no Intel PT on this machine")

// PTError explains why a PT backend cannot record. Is(ErrNoIntelPT) holds
// for every reason the hardware path is unavailable. ptjit exits with
// status 2 and records nothing.
type PTError struct {
	Reason string
}

func (e *PTError) Error() string { return "--pt=intel: " + e.Reason }

// Is makes errors.Is(err, ErrNoIntelPT) match.
func (e *PTError) Is(target error) bool { return target == ErrNoIntelPT }

// sysfsPMU is where the kernel lists the intel_pt PMU (tests point it
// elsewhere).
var sysfsPMU = "/sys/bus/event_source/devices/intel_pt"

// paranoidPath is perf_event_paranoid.
var paranoidPath = "/proc/sys/kernel/perf_event_paranoid"

// IntelPT checks that `perf record -e intel_pt//u` can run here: the PMU
// exists, perf is installed, and perf_event_paranoid lets this user trace
// its own processes. It returns the perf binary's path.
func IntelPT() (perf string, err error) {
	if _, err := os.Stat(filepath.Join(sysfsPMU, "type")); err != nil {
		return "", &PTError{"this CPU has no Intel PT (no intel_pt PMU in " + filepath.Dir(sysfsPMU) + "); use --pt=soft to trace in software"}
	}
	perf, err = lookPerf()
	if err != nil {
		return "", &PTError{"perf is not installed (Debian: apt-get install linux-perf)"}
	}
	if os.Geteuid() != 0 {
		b, err := os.ReadFile(paranoidPath)
		if err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 2 {
				return "", &PTError{fmt.Sprintf("perf_event_paranoid is %d; user-space tracing needs 2 or less (sysctl kernel.perf_event_paranoid=2)", v)}
			}
		}
	}
	return perf, nil
}

// perfBinary is the perf executable to use: $PTJIT_PERF, else perf on PATH.
func lookPerf() (string, error) {
	if p := os.Getenv("PTJIT_PERF"); p != "" {
		return Resolve(p)
	}
	return Resolve("perf")
}

// ptBackend is the PT side of one `ptjit run`.
type ptBackend struct {
	mode PTMode
	soft *softpt.Session
	perf *perfRecord // --pt=intel
}

// startPT prepares the trace backend: it decides auto, and opens the soft
// session's files. A stale perf.data of an earlier recording is removed
// when this one records no trace.
func startPT(cfg Config, warnf func(string, ...any), onWriteErr func(error)) (*ptBackend, error) {
	mode := cfg.PT
	if mode == "" {
		mode = PTOff
	}
	perfData := filepath.Join(cfg.OutDir, "perf.data")
	b := &ptBackend{mode: mode}
	if mode == PTAuto {
		if _, err := IntelPT(); err != nil {
			warnf("no PT trace recorded: %v", strings.TrimPrefix(err.Error(), "--pt=intel: "))
			mode = PTOff
		} else {
			mode = PTIntel
		}
		b.mode = mode
	}
	switch mode {
	case PTOff:
		if err := os.Remove(perfData); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	case PTSoft:
		s, err := softpt.NewSession(softpt.DefaultConfig, softpt.Options{PerfData: perfData, GroundTruth: cfg.GroundTruth, Cmdline: cfg.Argv, OnError: onWriteErr,
			Layout: cfg.SoftLayout, CPUs: cfg.SoftCPUs})
		if err != nil {
			return nil, err
		}
		b.soft = s
	case PTIntel:
		perf, err := IntelPT()
		if err != nil {
			return nil, err
		}
		b.perf = &perfRecord{perf: perf, out: perfData}
	}
	return b, nil
}

// ParseSoftLayout parses --soft-layout; a value not given explicitly is
// "" (the default, per-thread), so that it needs no --pt=soft.
func ParseSoftLayout(s string, given bool) (softpt.Layout, error) {
	if !given {
		return "", nil
	}
	return softpt.ParseLayout(s)
}

// ParseSoftFilter parses --soft-filter: "jit" traces only JIT code, "off"
// (or empty) everything.
func ParseSoftFilter(s string) (bool, error) {
	switch s {
	case "jit":
		return true, nil
	case "off", "":
		return false, nil
	}
	return false, fmt.Errorf("--soft-filter: %q is not jit or off", s)
}

// launch returns how to start the program: through perf record for
// --pt=intel, directly otherwise.
func (b *ptBackend) launch(path string, argv []string, events tracker.EventsMode) tracker.Launch {
	if b.perf != nil {
		return b.perf.launcher(path, argv, events)
	}
	return LauncherEvents(path, argv, nil, events)
}

// finish completes the trace after the program ended.
func (b *ptBackend) finish() error {
	switch {
	case b.soft != nil:
		return b.soft.Close(clock.RDTSC())
	case b.perf != nil:
		return b.perf.wait()
	}
	return nil
}

// summary is the PT part of the end-of-run line, or "".
func (b *ptBackend) summary() string {
	if b.soft != nil {
		steps, bytes, mtc := b.soft.Stats()
		per, perNoMTC := 0.0, 0.0
		if steps > 0 {
			per, perNoMTC = float64(bytes)/float64(steps), float64(bytes-min(mtc, bytes))/float64(steps)
		}
		return fmt.Sprintf("soft PT: %d instructions, %d trace bytes (%.2f B/insn, %.2f B/insn without MTC)", steps, bytes, per, perNoMTC)
	}
	if b.perf != nil {
		return "Intel PT: " + b.perf.out
	}
	return ""
}
