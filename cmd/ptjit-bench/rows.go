package main

import (
	"fmt"
	"math"
	"os/exec"
	"strconv"
)

// row is one benchmark: a name, the target it is held to, and a function
// that measures it (one or more table lines).
type row struct {
	name    string
	target  string
	measure func(b *bench) ([]measurement, error)
}

// measurement is one table line.
type measurement struct {
	name, value, ref, ratio, target, met string
}

// ratioLine makes a line comparing value with ref (both in unit); within
// says whether the ratio meets the target ("-" when the row has none).
func ratioLine(name string, value, ref float64, unit, refName, target string, within func(ratio float64) bool) measurement {
	ratio := value / ref
	met := "-"
	if !(value > 0 && ref > 0) || math.IsInf(ratio, 0) {
		// noise larger than the effect (e.g. extra time ≤ 0)
		met = "n/a"
	} else if within != nil {
		met = "no"
		if within(ratio) {
			met = "yes"
		}
	}
	return measurement{
		name:   name,
		value:  fmt.Sprintf("%.3f %s", value, unit),
		ref:    fmt.Sprintf("%s %.3f %s", refName, ref, unit),
		ratio:  fmt.Sprintf("%.2f×", ratio),
		target: target,
		met:    met,
	}
}

// Workload sizes: each run takes around a second at most here.
const (
	ubpfRuns       = "1000000" // runs of the JIT code after one compile
	luaRounds      = "10000"   // bench.lua rounds: ~60000 mprotect calls
	stopIters      = 20000     // stopbench iterations: 2 mprotect calls each
	snapIters      = 100       // stopbench iterations on the big region
	snapPages      = 256       // 1 MiB region
	stopTarget     = 1.5       // ptjit stop ≤ 1.5 × bare seccomp stop
	luaNativeLimit = 1.3       // LuaJIT under ptjit ≤ 1.3 × alone
)

var rows = []row{
	{name: "ubpf-test", target: "≈1×", measure: measureUBPF},
	{name: "luajit", target: "≤1.3× native, <1× strace", measure: measureLuaJIT},
	{name: "stop", target: "≤1.5× bare stop", measure: measureStop},
	{name: "snapshot", target: "-", measure: measureSnapshot},
}

// measureUBPF: compile once, run the JIT code 10^6 times; no syscalls in the
// loop, so ptjit should cost only its start and end.
func measureUBPF(b *bench) ([]measurement, error) {
	argv := []string{b.prog("ubpf-test"), ubpfRuns}
	rs, err := b.series(
		func() (run, error) { return b.exec(argv...) },
		func() (run, error) { return b.ptjitRun(argv...) },
	)
	if err != nil {
		return nil, err
	}
	native, traced := median(rs[0], wallSeconds), median(rs[1], wallSeconds)
	return []measurement{ratioLine("ubpf-test ×10^6: ptjit run / alone", traced, native, "s", "alone", "≈1×",
		func(r float64) bool { return r <= 1.1 })}, nil
}

// measureLuaJIT: LuaJIT compiling thousands of traces, alone, under strace
// (tracing the same syscalls with a seccomp filter) and under ptjit.
func measureLuaJIT(b *bench) ([]measurement, error) {
	luajit, err := exec.LookPath("luajit")
	if err != nil {
		return nil, fmt.Errorf("luajit not found (apt-get install -y luajit)")
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		return nil, fmt.Errorf("strace not found (apt-get install -y strace)")
	}
	script := b.testdata + "/bench.lua"
	rs, err := b.series(
		func() (run, error) { return b.exec(luajit, script, luaRounds) },
		func() (run, error) {
			return b.exec(strace, "-f", "--seccomp-bpf", "-e", "trace=mprotect,mmap", "-o", "/dev/null", luajit, script, luaRounds)
		},
		func() (run, error) { return b.ptjitRun(luajit, script, luaRounds) },
	)
	if err != nil {
		return nil, err
	}
	native, viaStrace, traced := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds)
	out := []measurement{
		ratioLine("luajit bench.lua: ptjit run / alone", traced, native, "s", "alone", "≤1.3×",
			func(r float64) bool { return r <= luaNativeLimit }),
		ratioLine("luajit bench.lua: ptjit run / strace", traced, viaStrace, "s", "strace", "<1×",
			func(r float64) bool { return r < 1 }),
	}
	if s := parseSummary(rs[2][0].stderr); s.ok && s.stops > 0 {
		stopsPerSec := median(rs[2], func(r run) float64 { return parseSummary(r.stderr).stops }) / native
		out = append(out, measurement{
			name:   "luajit bench.lua: stops per second of native run",
			value:  fmt.Sprintf("%.0f /s", stopsPerSec),
			ref:    fmt.Sprintf("%.0f stops", s.stops),
			ratio:  "-",
			target: "-",
			met:    "-",
		})
	}
	return out, nil
}

// bareStop is the extra ns per stop of stopbench's own minimal tracer.
func bareStop(rs []run, native float64) (float64, error) {
	stops, ok := tracerStops(rs[0].stdout)
	if !ok || stops == 0 {
		return 0, fmt.Errorf("stopbench trace printed no stop count")
	}
	ns := median(rs, func(r run) float64 { _, ns, _ := workload(r); return ns })
	return (ns - native) / stops, nil
}

// measureStop: the extra cost per stop that a tracee sees, under ptjit and
// under a tracer that does nothing but continue.
func measureStop(b *bench) ([]measurement, error) {
	sb := b.prog("stopbench")
	iters := strconv.Itoa(stopIters)
	rs, err := b.series(
		func() (run, error) { return b.exec(sb, "run", iters, "1") },
		func() (run, error) { return b.exec(sb, "trace", "same", "entry", iters, "1") },
		func() (run, error) { return b.exec(sb, "trace", "any", "entry", iters, "1") },
		func() (run, error) { return b.ptjitRun(sb, "run", iters, "1") },
		func() (run, error) { return b.exec(sb, "trace", "same", "exit", iters, "1") },
		func() (run, error) {
			return b.ptjitExec("run", "--pin=on", "-o", b.outDir, "--", sb, "run", iters, "1")
		},
	)
	if err != nil {
		return nil, err
	}
	for _, series := range rs {
		for _, r := range series {
			if _, _, err := workload(r); err != nil {
				return nil, err
			}
		}
	}
	calls, _, _ := workload(rs[0][0])
	workNS := func(r run) float64 { _, ns, _ := workload(r); return ns }
	native := median(rs[0], workNS)
	same, err := bareStop(rs[1], native)
	if err != nil {
		return nil, err
	}
	anyCPU, err := bareStop(rs[2], native)
	if err != nil {
		return nil, err
	}
	// Stops ptjit makes inside the timed loop: the summary's count minus
	// what a one-iteration run costs (process start), scaled.
	loopStops, how := calls, "assuming 1 stop/mprotect"
	if s := parseSummary(rs[3][0].stderr); s.ok {
		one, err := b.ptjitRun(sb, "run", "1", "1")
		if err != nil {
			return nil, err
		}
		s1 := parseSummary(one.stderr)
		if perIter := (s.stops - s1.stops) / float64(stopIters-1); perIter > 0 {
			loopStops, how = perIter*stopIters, fmt.Sprintf("%.2f stops/mprotect", perIter*stopIters/calls)
		}
	}
	ptjitNS := median(rs[3], workNS)
	perStop := (ptjitNS - native) / loopStops
	pinnedPerStop := (median(rs[5], workNS) - native) / loopStops
	bareExitNS := median(rs[4], workNS)
	// Like with like: ptjit's default (--pin=auto is off: the scheduler
	// places tracer and tracee) against the bare tracer on any CPU, and
	// ptjit --pin=on against the bare tracer on one CPU.
	out := []measurement{
		{name: "bare seccomp stop, tracer and tracee on CPU 0", value: fmt.Sprintf("%.2f µs", same/1e3), ref: "-", ratio: "-", target: "~9 µs (brief)", met: "-"},
		{name: "bare seccomp stop, any CPU", value: fmt.Sprintf("%.2f µs", anyCPU/1e3), ref: "-", ratio: "-", target: "-", met: "-"},
		ratioLine("ptjit cost per stop, seen by the tracee ("+how+")", perStop/1e3, anyCPU/1e3, "µs", "bare, any CPU", "≤1.5×",
			func(r float64) bool { return r <= stopTarget }),
		ratioLine("ptjit --pin=on cost per stop, seen by the tracee", pinnedPerStop/1e3, same/1e3, "µs", "bare, same CPU", "≤1.5×",
			func(r float64) bool { return r <= stopTarget }),
		// What a recorder minimally needs per mprotect: the seccomp stop
		// and the syscall-exit stop that shows the result.
		ratioLine("ptjit extra µs per mprotect call", (ptjitNS-native)/calls/1e3, (bareExitNS-native)/calls/1e3, "µs",
			"bare entry+exit", "-", nil),
	}
	if s := parseSummary(rs[3][0].stderr); s.ok && s.stops > 0 && s.stopMS > 0 {
		own := median(rs[3], func(r run) float64 { s := parseSummary(r.stderr); return s.stopMS * 1e3 / s.stops })
		out = append(out, ratioLine("ptjit µs/stop, its own summary", own, min(same, anyCPU)/1e3, "µs", "bare, fastest", "-", nil))
	}
	return out, nil
}

// measureSnapshot: a 1 MiB region made RX 100 times (each time with new
// bytes): bytes snapshotted per second of extra run time.
func measureSnapshot(b *bench) ([]measurement, error) {
	sb := b.prog("stopbench")
	iters, pages := strconv.Itoa(snapIters), strconv.Itoa(snapPages)
	rs, err := b.series(
		func() (run, error) { return b.exec(sb, "run", iters, pages) },
		func() (run, error) { return b.ptjitRun(sb, "run", iters, pages) },
	)
	if err != nil {
		return nil, err
	}
	workNS := func(r run) float64 { _, ns, _ := workload(r); return ns }
	for _, series := range rs {
		for _, r := range series {
			if _, _, err := workload(r); err != nil {
				return nil, err
			}
		}
	}
	extra := (median(rs[1], workNS) - median(rs[0], workNS)) / 1e9
	bytes, how := float64(snapIters*snapPages*4096), "region size × RX calls"
	if s := parseSummary(rs[1][0].stderr); s.ok && s.snapBytes > 0 {
		bytes, how = s.snapBytes, "ptjit summary"
	}
	rate := "n/a (no extra time)"
	if extra > 0 {
		rate = fmt.Sprintf("%.1f MB/s", bytes/extra/1e6)
	}
	return []measurement{{
		name:   fmt.Sprintf("snapshot throughput (%d × %d KiB RX, bytes from %s)", snapIters, snapPages*4, how),
		value:  rate,
		ref:    fmt.Sprintf("%.3f s extra", extra),
		ratio:  "-",
		target: "-",
		met:    "-",
	}}, nil
}
