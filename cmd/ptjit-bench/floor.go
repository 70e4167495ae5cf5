package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// The floor rows: each program alone, under
// testdata/floor (the least a recorder must do: a stop per exec-adding
// mprotect/pkey_mprotect/mmap and a copy of the range) in both of its
// modes, and under ptjit run, alternating, so that every ratio compares
// runs taken under the same load. This machine's stop cost drifts 2–4×
// over an hour; only same-run ratios are stable.

// floorMinRuns: the floor rows take at least this many runs.
const floorMinRuns = 7

func init() {
	rows = append(rows,
		row{name: "floor-luajit", target: "ptjit ≤1.1× notif floor", measure: func(b *bench) ([]measurement, error) {
			luajit, err := exec.LookPath("luajit")
			if err != nil {
				return nil, fmt.Errorf("luajit not found (apt-get install -y luajit)")
			}
			return measureFloor(b, "luajit bench.lua", 1.1, luajit, filepath.Join(b.testdata, "bench.lua"), luaRounds)
		}},
		row{name: "floor-java", target: "-", measure: func(b *bench) ([]measurement, error) {
			java, dir, err := compileHot(b)
			if err != nil {
				return nil, err
			}
			return measureFloor(b, "java Hot", 0, java, "-cp", dir, "Hot")
		}},
		row{name: "floor-node", target: "-", measure: func(b *bench) ([]measurement, error) {
			node, err := exec.LookPath("node")
			if err != nil {
				return nil, fmt.Errorf("node not found (apt-get install -y nodejs)")
			}
			return measureFloor(b, "node hot.js", 0, node, filepath.Join(b.testdata, "hot.js"))
		}},
		row{name: "floor-ubpf-test", target: "-", measure: func(b *bench) ([]measurement, error) {
			return measureFloor(b, "ubpf-test ×10^6", 0, b.prog("ubpf-test"), ubpfRuns)
		}},
	)
}

// measureFloor times argv alone, under floor trace, under floor notif and
// under ptjit run (-q, default options), in that order, max(runs, 7) times
// alternating, and reports ptjit/alone, each floor/alone and ptjit/each
// floor (medians). notifLimit > 0 holds ptjit/notif-floor to it.
func measureFloor(b *bench, name string, notifLimit float64, argv ...string) ([]measurement, error) {
	floor := b.prog("floor")
	if _, err := os.Stat(floor); err != nil {
		return nil, fmt.Errorf("%s missing (run make first)", floor)
	}
	saved := b.runs
	b.runs = max(b.runs, floorMinRuns)
	defer func() { b.runs = saved }()
	rs, err := b.series(
		func() (run, error) { return b.exec(argv...) },
		func() (run, error) { return b.exec(append([]string{floor, "trace", "--"}, argv...)...) },
		func() (run, error) { return b.exec(append([]string{floor, "notif", "--"}, argv...)...) },
		func() (run, error) {
			return b.ptjitExec(append([]string{"run", "-q", "-o", b.outDir, "--"}, argv...)...)
		},
	)
	if err != nil {
		return nil, err
	}
	alone, trace, notif, ptjit := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds), median(rs[3], wallSeconds)
	load := loadavg()
	n := fmt.Sprintf("%s (%d runs, load %s)", name, b.runs, load)
	notifTarget, within := "-", func(float64) bool { return true }
	if notifLimit > 0 {
		notifTarget = fmt.Sprintf("≤%.1f×", notifLimit)
		within = func(r float64) bool { return r <= notifLimit }
	}
	out := []measurement{
		ratioLine(n+": ptjit / alone", ptjit, alone, "s", "alone", "-", nil),
		ratioLine(n+": floor trace / alone", trace, alone, "s", "alone", "-", nil),
		ratioLine(n+": floor notif / alone", notif, alone, "s", "alone", "-", nil),
		ratioLine(n+": ptjit / floor trace", ptjit, trace, "s", "floor trace", "-", nil),
		ratioLine(n+": ptjit / floor notif", ptjit, notif, "s", "floor notif", notifTarget, within),
	}
	if notifLimit == 0 {
		out[4].met = "-"
	}
	return out, nil
}

// loadavg returns the 1-minute load average, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil || len(b) == 0 {
		return "?"
	}
	return firstField(string(b))
}
