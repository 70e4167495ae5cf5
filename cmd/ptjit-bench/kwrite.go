package main

import (
	"strconv"
)

func init() {
	rows = append(rows, row{name: "kwrite-vec", target: "measured (a stop per readv in a process whose code W^X protects)", measure: measureKwriteVec})
}

// kwriteVecCalls is kwrite readv's calls.
const kwriteVecCalls = 20000

// measureKwriteVec: the cost of the stop every readv-family call makes in a
// process whose code W^X protects (tracker/kwrite_linux_amd64.go): kwrite
// readv N (RWX code run once, then N one-byte readv calls from a pipe)
// alone, under ptjit run (W^X on: every readv stops), and under ptjit run
// --wx=off (no kernel-write filter: the reference without the stops),
// alternating, with a minimal tracer's stop (stopbench trace any entry:
// a seccomp RET_TRACE stop and PTRACE_CONT, nothing else) in the same
// series, as this VM's stop cost varies by the hour; µs per call is
// (ptjit run − --wx=off) / N.
func measureKwriteVec(b *bench) ([]measurement, error) {
	argv := []string{b.prog("kwrite"), "readv", strconv.Itoa(kwriteVecCalls)}
	floorIters := kwriteVecCalls / 2 // two mprotect stops an iteration
	rs, err := b.series(
		func() (run, error) { return b.exec(argv...) },
		func() (run, error) { return b.ptjitRun(argv...) },
		func() (run, error) {
			return b.ptjitExec(append([]string{"run", "--wx=off", "-o", b.outDir, "--"}, argv...)...)
		},
		func() (run, error) {
			return b.exec(b.prog("stopbench"), "trace", "any", "entry", strconv.Itoa(floorIters), "1")
		},
	)
	if err != nil {
		return nil, err
	}
	alone, wx, off, floor := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds), median(rs[3], wallSeconds)
	any := func(float64) bool { return true }
	perCall := (wx - off) * 1e6 / kwriteVecCalls
	perStop := floor * 1e6 / float64(2*floorIters)
	return []measurement{
		ratioLine("kwrite readv ×20,000: ptjit run / alone", wx, alone, "s", "alone", "-", any),
		ratioLine("kwrite readv ×20,000: ptjit run / --wx=off (no stop per call)", wx, off, "s", "--wx=off", "-", any),
		ratioLine("  µs per readv / a minimal tracer's µs per stop", perCall, perStop, "µs", "stop", "-", any),
	}, nil
}
