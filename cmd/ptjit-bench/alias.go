package main

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/ptjit/ptjit/db"
)

func init() {
	rows = append(rows, row{name: "alias-bulk", target: "versions and time ≤ 2× the RWX fill", measure: measureAliasBulk})
}

// aliasBulkPages is the bulk fill's size in the alias-bulk row: 4 MiB.
const aliasBulkPages = 1024

// measureAliasBulk: testdata/alias-jit fills aliasBulkPages pages through
// the writable view of a memfd mapped twice (8-byte stores) and runs each
// page once, under ptjit run (default --wx=auto), alternating with the
// same fill into one RWX mapping (alias-jit N rwx) under ptjit and both
// alone. Two lines: ptjit's time with the alias against with RWX memory,
// and the versions recorded in the bulk fill's executable view (the last
// run of each).
func measureAliasBulk(b *bench) ([]measurement, error) {
	prog, n := b.prog("alias-jit"), strconv.Itoa(aliasBulkPages)
	var vAlias, vRWX int
	rs, err := b.series(
		func() (run, error) { return b.exec(prog, n) },
		func() (run, error) {
			r, err := b.ptjitRun(prog, n)
			if err == nil {
				vAlias, err = bulkVersions(b.outDir, r.stdout)
			}
			return r, err
		},
		func() (run, error) { return b.exec(prog, n, "rwx") },
		func() (run, error) {
			r, err := b.ptjitRun(prog, n, "rwx")
			if err == nil {
				vRWX, err = bulkVersions(b.outDir, r.stdout)
			}
			return r, err
		},
	)
	if err != nil {
		return nil, err
	}
	within2 := func(r float64) bool { return r <= 2 }
	alias, rwx := median(rs[1], wallSeconds), median(rs[3], wallSeconds)
	return []measurement{
		ratioLine(fmt.Sprintf("alias-jit %d pages through an alias: ptjit vs the RWX fill under ptjit", aliasBulkPages),
			alias, rwx, "s", "rwx", "≤ 2×", within2),
		ratioLine("  the same, alone", median(rs[0], wallSeconds), median(rs[2], wallSeconds), "s", "rwx", "-", nil),
		ratioLine("  ptjit vs alone, through the alias", alias, median(rs[0], wallSeconds), "s", "alone", "-", nil),
		ratioLine("  versions in the bulk fill's executable view", float64(vAlias), float64(vRWX), "", "rwx", "≤ 2×", within2),
	}, nil
}

// bulkVersions counts the versions recorded in the range alias-jit's
// "BULK ADDR PAGES" line names.
func bulkVersions(dir, stdout string) (int, error) {
	lo, pages, err := bulkRange(stdout)
	if err != nil {
		return 0, err
	}
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		return 0, err
	}
	defer d.Close()
	vs, err := d.Versions(db.VersionFilter{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range vs {
		if v.Addr >= lo && v.Addr < lo+uint64(pages)*4096 {
			n++
		}
	}
	return n, nil
}
