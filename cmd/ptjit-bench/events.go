package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

func init() {
	rows = append(rows,
		row{name: "events", target: "bpf ≤ 1.3× alone and ≤ 0.5× seccomp (LuaJIT)", measure: measureEvents},
		row{name: "events-runtimes", target: "ubpf-test ≈1×, node ≤ 1.1× alone, java ≤ seccomp", measure: measureEventsRuntimes})
}

// stringsRounds is strings.lua's rounds: ~21,000 versions of small
// string-heavy traces.
const stringsRounds = "5000"

// measureEvents runs two LuaJIT workloads alone, under ptjit run
// --events=seccomp and under --events=bpf, alternating: where the
// address-space calls come from a BPF ring buffer instead of a stop per
// code version. bench.lua compiles few number-heavy traces per chunk;
// strings.lua many small string-heavy ones. Where BPF events cannot run,
// the bpf runs fail and the row says why (ptjit's one line).
func measureEvents(b *bench) ([]measurement, error) {
	luajit, err := exec.LookPath("luajit")
	if err != nil {
		return nil, fmt.Errorf("luajit not found (apt-get install -y luajit)")
	}
	var out []measurement
	for _, w := range []struct{ name, script, rounds string }{
		{"luajit bench.lua", "bench.lua", luaRounds},
		{"luajit strings.lua", "strings.lua", stringsRounds},
	} {
		ms, err := eventsCompare(b, w.name, []string{luajit, filepath.Join(b.testdata, w.script), w.rounds},
			"≤1.3×", func(r float64) bool { return r <= luaNativeLimit }, "≤0.5×", func(r float64) bool { return r <= 0.5 })
		if err != nil {
			return nil, err
		}
		out = append(out, ms...)
	}
	return out, nil
}

// measureEventsRuntimes is measureEvents for ubpf-test ×10^6 (one
// compile: few versions), node hot.js and java Hot.
func measureEventsRuntimes(b *bench) ([]measurement, error) {
	var out []measurement
	add := func(name string, argv []string, aloneTarget string, aloneOK func(float64) bool, secTarget string, secOK func(float64) bool) error {
		ms, err := eventsCompare(b, name, argv, aloneTarget, aloneOK, secTarget, secOK)
		out = append(out, ms...)
		return err
	}
	anyRatio := func(float64) bool { return true }
	if err := add("ubpf-test ×10^6", []string{b.prog("ubpf-test"), ubpfRuns}, "≈1×", func(r float64) bool { return r <= 1.1 }, "-", anyRatio); err != nil {
		return out, err
	}
	if node, err := exec.LookPath("node"); err == nil {
		if err := add("node hot.js", []string{node, filepath.Join(b.testdata, "hot.js")}, "≤1.1×", func(r float64) bool { return r <= 1.1 }, "-", anyRatio); err != nil {
			return out, err
		}
	}
	if java, dir, err := compileHot(b); err == nil {
		if err := add("java Hot", []string{java, "-cp", dir, "Hot"}, "-", anyRatio, "≤1×", func(r float64) bool { return r <= 1 }); err != nil {
			return out, err
		}
	}
	return out, nil
}

// eventsCompare times argv alone, under --events=seccomp and under
// --events=bpf, alternating, and reports bpf/alone, bpf/seccomp and the
// stops of each (medians).
func eventsCompare(b *bench, name string, argv []string, aloneTarget string, aloneOK func(float64) bool, secTarget string, secOK func(float64) bool) ([]measurement, error) {
	ptjit := func(events string) func() (run, error) {
		return func() (run, error) {
			return b.ptjitExec(append([]string{"run", "--events=" + events, "-o", b.outDir, "--"}, argv...)...)
		}
	}
	rs, err := b.series(
		func() (run, error) { return b.exec(argv...) },
		ptjit("seccomp"),
		ptjit("bpf"),
	)
	if err != nil {
		return nil, err
	}
	alone, seccomp, bpf := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds)
	stops := func(rs []run) float64 { return median(rs, func(r run) float64 { return parseSummary(r.stderr).stops }) }
	return []measurement{
		ratioLine(name+": ptjit run --events=bpf / alone", bpf, alone, "s", "alone", aloneTarget, aloneOK),
		ratioLine(name+": --events=bpf / --events=seccomp", bpf, seccomp, "s", "seccomp", secTarget, secOK),
		{name: "  stops: bpf / seccomp", value: fmt.Sprintf("%.0f", stops(rs[2])), ref: fmt.Sprintf("seccomp %.0f", stops(rs[1])),
			ratio: "-", target: "-", met: "-"},
	}, nil
}
