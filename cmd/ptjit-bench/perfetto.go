package main

import (
	"fmt"
	"os"
	"path/filepath"
)

func init() {
	rows = append(rows, row{name: "export-perfetto", target: "≤ 1.5× decode --calls", measure: measurePerfetto})
}

// measurePerfetto: ptjit export perfetto of a soft-PT recording of
// ubpf-test 400 (about 1.3 million instructions, 45,000 calls), against
// decode --calls of the same recording (the same decode and call
// tracking, printed as text), both -j 1, alternating; CPU time (user +
// system) per call, and the JSON's bytes per slice.
func measurePerfetto(b *bench) ([]measurement, error) {
	dir, err := os.MkdirTemp(filepath.Dir(b.outDir), "perfetto-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rec, out := filepath.Join(dir, "rec"), filepath.Join(dir, "trace.json")
	if _, err := b.exec(b.ptjit, "run", "-q", "--pt=soft", "-o", rec, "--", b.prog("ubpf-test"), "400"); err != nil {
		return nil, err
	}
	rs, err := b.series(
		func() (run, error) {
			return b.exec("sh", "-c", `"$0" decode -i "$1" --calls -j 1 >/dev/null`, b.ptjit, rec)
		},
		func() (run, error) {
			return b.exec(b.ptjit, "export", "perfetto", "-i", rec, "-o", out, "--force", "-j", "1", "--max-slices", "0")
		},
	)
	if err != nil {
		return nil, err
	}
	n, ok := perfettoSlices(rs[1][0].stdout)
	if !ok {
		return nil, fmt.Errorf("export perfetto printed no slice count: %q", rs[1][0].stdout)
	}
	st, err := os.Stat(out)
	if err != nil || n == 0 {
		return nil, fmt.Errorf("export perfetto: no output or no slices (%v)", err)
	}
	perCall := func(r run) float64 { return r.cpu.Seconds() * 1e6 / n }
	export, calls := median(rs[1], perCall), median(rs[0], perCall)
	line := ratioLine(fmt.Sprintf("ubpf-test 400 (%.0f calls): export perfetto CPU µs/call, %.0f bytes/slice", n, float64(st.Size())/n),
		export, calls, "µs", "decode --calls", "≤ 1.5×", func(r float64) bool { return r <= 1.5 })
	return []measurement{line}, nil
}
