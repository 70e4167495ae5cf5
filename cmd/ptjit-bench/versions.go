package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

func init() {
	rows = append(rows, row{name: "versions", target: "10× versions: decode ≤ 12× CPU, ≤ 2× peak RSS; code.db ≤ 1 KiB/version", measure: measureVersions})
}

// Versions of one address made by 4-byte stores: patch-imm N patches an
// immediate N times and calls the function after each patch.
const versionsN = 2000

// measureVersions records patch-imm N and 10N under --pt=soft
// --wx=precise --soft-filter=jit (N and 10N executed versions at one
// address, two JIT instructions each), then alternates decode --stat of
// the two: CPU time (user + system) and peak RSS, medians, and code.db's
// bytes per version.
func measureVersions(b *bench) ([]measurement, error) {
	dir, err := os.MkdirTemp(filepath.Dir(b.outDir), "versions-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	recs := [2]string{filepath.Join(dir, "n"), filepath.Join(dir, "10n")}
	var perVersion [2]float64
	for i, n := range []int{versionsN, 10 * versionsN} {
		if _, err := b.exec(b.ptjit, "run", "-q", "--pt=soft", "--wx=precise", "--soft-filter=jit", "-o", recs[i], "--",
			b.prog("patch-imm"), strconv.Itoa(n)); err != nil {
			return nil, err
		}
		st, err := os.Stat(filepath.Join(recs[i], "code.db"))
		if err != nil {
			return nil, err
		}
		perVersion[i] = float64(st.Size()) / float64(n)
	}
	decode := func(rec string) func() (run, error) {
		return func() (run, error) {
			return b.exec("sh", "-c", `exec "$0" decode -i "$1" --stat >/dev/null`, b.ptjit, rec)
		}
	}
	rs, err := b.series(decode(recs[0]), decode(recs[1]))
	if err != nil {
		return nil, err
	}
	cpu := func(r run) float64 { return r.cpu.Seconds() }
	rss := func(r run) float64 { return float64(r.maxRSS) / 1024 }
	name := fmt.Sprintf("patch-imm %d vs %d versions at one address", 10*versionsN, versionsN)
	return []measurement{
		ratioLine(name+": decode --stat CPU", median(rs[1], cpu), median(rs[0], cpu), "s", fmt.Sprintf("%d versions", versionsN),
			"≤ 12×", func(r float64) bool { return r <= 12 }),
		ratioLine(name+": decode --stat peak RSS", median(rs[1], rss), median(rs[0], rss), "MiB", fmt.Sprintf("%d versions", versionsN),
			"≤ 2×", func(r float64) bool { return r <= 2 }),
		{name: fmt.Sprintf("patch-imm %d: code.db bytes per version", 10*versionsN), value: fmt.Sprintf("%.0f B", perVersion[1]),
			ref: fmt.Sprintf("%d versions: %.0f B", versionsN, perVersion[0]), ratio: "-", target: "≤ 1024 B",
			met: map[bool]string{true: "yes", false: "no"}[perVersion[1] <= 1024]},
	}, nil
}
