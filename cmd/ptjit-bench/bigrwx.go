package main

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/ptjit/ptjit/db"
)

func init() {
	rows = append(rows, row{name: "bigrwx", target: "≤ 10× alone; stop ≤ 1.5× at 16 MiB; RSS ≤ 0.25× region", measure: measureBigRWX})
}

// The bigrwx row (does the cost of a stop grow with the region's size?):
// testdata/bigrwx maps a large RWX area and stores one byte per page, so
// that under W^X (--wx default, auto) every page is one store stop.
const (
	bigRWXSmall = 16  // MiB: the reference for the cost of a stop
	bigRWXLarge = 512 // MiB
)

// measureBigRWX reports three lines: bigrwx 512 under ptjit against alone
// (wall time), ptjit's µs per stop at 512 MiB against 16 MiB (from its
// summary line), and ptjit's own peak RSS (meta tracer_maxrss_kb; not the
// program's, which /usr/bin/time would report) against the region. The
// 512 MiB run is repeated at most 3 times.
func measureBigRWX(b *bench) ([]measurement, error) {
	prog := b.prog("bigrwx")
	mib := func(n int) string { return strconv.Itoa(n) }
	var alone, large, small []run
	var rssKB []float64
	for i := 0; i < b.runs; i++ {
		r, err := b.exec(prog, mib(bigRWXLarge))
		if err != nil {
			return nil, err
		}
		alone = append(alone, r)
		if r, err = b.ptjitRun(prog, mib(bigRWXSmall)); err != nil {
			return nil, err
		}
		small = append(small, r)
		if i >= 3 {
			continue
		}
		if r, err = b.ptjitRun(prog, mib(bigRWXLarge)); err != nil {
			return nil, err
		}
		large = append(large, r)
		kb, err := tracerRSS(filepath.Join(b.outDir, "code.db"))
		if err != nil {
			return nil, err
		}
		rssKB = append(rssKB, kb)
	}
	perStop := func(r run) float64 {
		s := parseSummary(r.stderr)
		if !s.ok || s.stops == 0 {
			return 0
		}
		return s.stopMS * 1e3 / s.stops
	}
	region := float64(bigRWXLarge << 10) // KiB
	return []measurement{
		ratioLine(fmt.Sprintf("bigrwx %d MiB, one store per page: ptjit vs alone", bigRWXLarge),
			median(large, wallSeconds), median(alone, wallSeconds), "s", "alone", "≤ 10×", func(r float64) bool { return r <= 10 }),
		ratioLine(fmt.Sprintf("bigrwx: µs per stop at %d MiB vs %d MiB", bigRWXLarge, bigRWXSmall),
			median(large, perStop), median(small, perStop), "µs", fmt.Sprintf("%d MiB", bigRWXSmall), "≤ 1.5×", func(r float64) bool { return r <= 1.5 }),
		ratioLine(fmt.Sprintf("bigrwx %d MiB: ptjit peak RSS vs the region", bigRWXLarge),
			medianOf(rssKB)/1024, region/1024, "MiB", "region", "≤ 0.25×", func(r float64) bool { return r <= 0.25 }),
	}, nil
}

// tracerRSS reads ptjit's own peak RSS (KiB) from a recording's meta.
func tracerRSS(path string) (float64, error) {
	d, err := db.Open(path)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	m, err := d.Meta()
	if err != nil {
		return 0, err
	}
	kb, err := strconv.ParseFloat(m["tracer_maxrss_kb"], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: meta tracer_maxrss_kb %q: %v", path, m["tracer_maxrss_kb"], err)
	}
	return kb, nil
}
