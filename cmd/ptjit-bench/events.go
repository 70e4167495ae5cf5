package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

func init() {
	rows = append(rows, row{name: "events", target: "bpf ≤ 1.3× alone and ≤ 0.5× seccomp", measure: measureEvents})
}

// measureEvents runs LuaJIT's bench.lua alone, under ptjit run
// --events=seccomp and under --events=bpf, alternating: where the
// address-space calls come from a BPF ring buffer instead of a stop per
// code version. Where BPF events cannot run, the bpf runs fail and the
// row says why (ptjit's one line).
func measureEvents(b *bench) ([]measurement, error) {
	luajit, err := exec.LookPath("luajit")
	if err != nil {
		return nil, fmt.Errorf("luajit not found (apt-get install -y luajit)")
	}
	script := filepath.Join(b.testdata, "bench.lua")
	ptjit := func(events string) func() (run, error) {
		return func() (run, error) {
			return b.ptjitExec("run", "--events="+events, "-o", b.outDir, "--", luajit, script, luaRounds)
		}
	}
	rs, err := b.series(
		func() (run, error) { return b.exec(luajit, script, luaRounds) },
		ptjit("seccomp"),
		ptjit("bpf"),
	)
	if err != nil {
		return nil, err
	}
	alone, seccomp, bpf := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds)
	stops := func(rs []run) float64 { return median(rs, func(r run) float64 { return parseSummary(r.stderr).stops }) }
	return []measurement{
		ratioLine("luajit bench.lua: ptjit run --events=bpf / alone", bpf, alone, "s", "alone", "≤1.3×",
			func(r float64) bool { return r <= luaNativeLimit }),
		ratioLine("luajit bench.lua: --events=bpf / --events=seccomp", bpf, seccomp, "s", "seccomp", "≤0.5×",
			func(r float64) bool { return r <= 0.5 }),
		{name: "  stops: bpf / seccomp", value: fmt.Sprintf("%.0f", stops(rs[2])), ref: fmt.Sprintf("seccomp %.0f", stops(rs[1])),
			ratio: "-", target: "-", met: "-"},
	}, nil
}
