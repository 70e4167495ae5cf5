package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
)

// The copy row: ptjit run --copy=full against
// --copy=changed, alternating with the program alone, on jit-pages (a
// region of which each version rewrites two or three pages) at 4 MiB,
// where reading only the written pages should win, and at 64 KiB, where
// the scan and the program's write faults should cost more than the copy
// they save; and on LuaJIT, whose 64 KiB areas --copy=auto leaves to full
// copies. Reported: each mode's extra time over alone, changed/full, and
// ptjit's own time in stops (the summary's) in each mode.

// copyVersions: jit-pages versions per run.
const copyVersions = "300"

func init() {
	rows = append(rows, row{name: "copy", target: "changed < full at 4 MiB (auto's threshold: tracker/doc.go)", measure: measureCopy})
}

func measureCopy(b *bench) ([]measurement, error) {
	var out []measurement
	cases := []struct {
		name string
		argv []string
		less bool // changed must cost less here
	}{
		{"jit-pages 4 MiB ×" + copyVersions, []string{b.prog("jit-pages"), copyVersions, "4096"}, true},
		{"jit-pages 1 MiB ×" + copyVersions, []string{b.prog("jit-pages"), copyVersions, "1024"}, false},
		{"jit-pages 64 KiB ×" + copyVersions, []string{b.prog("jit-pages"), copyVersions, "64"}, false},
	}
	if luajit, err := exec.LookPath("luajit"); err == nil {
		cases = append(cases, struct {
			name string
			argv []string
			less bool
		}{"luajit bench.lua 2000", []string{luajit, filepath.Join(b.testdata, "bench.lua"), "2000"}, false})
	}
	for _, c := range cases {
		rs, err := b.series(
			func() (run, error) { return b.exec(c.argv...) },
			func() (run, error) {
				return b.ptjitExec(append([]string{"run", "--pt=off", "--copy=full", "-o", b.outDir, "--"}, c.argv...)...)
			},
			func() (run, error) {
				return b.ptjitExec(append([]string{"run", "--pt=off", "--copy=changed", "-o", b.outDir, "--"}, c.argv...)...)
			},
		)
		if err != nil {
			return nil, err
		}
		alone, full, changed := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds)
		var within func(float64) bool
		target := "-"
		if c.less {
			within, target = func(r float64) bool { return r < 1 }, "<1×"
		}
		out = append(out,
			measurement{name: c.name + ": --copy=full / alone", value: fmt.Sprintf("%.3f s", full), ref: fmt.Sprintf("alone %.3f s", alone),
				ratio: fmt.Sprintf("%.2f×", full/alone), target: "-", met: "-"},
			ratioLine(c.name+": --copy=changed extra / --copy=full extra", changed-alone, full-alone, "s", "full", target, within),
			// ptjit's own time in stops (the summary's): the copy, the
			// scan and the db hand-off, without the program's write faults
			ratioLine(c.name+": ms in stops, changed / full", median(rs[2], stopMS), median(rs[1], stopMS), "ms", "full", "-", nil))
	}
	return out, nil
}

func stopMS(r run) float64 { return parseSummary(r.stderr).stopMS }
