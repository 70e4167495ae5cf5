package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"
)

// The samples below are the commands' real output, as they printed it on
// this project's VM (2026-11-26): bin/ptjit and testdata/bin of this tree.

// ptjit run --pt=soft -o rec -- testdata/bin/ubpf-test (stderr)
const sampleSoftRun = "ptjit: 1 process, 1 thread, 3 regions, 4 versions, 3 file mappings, 272633 stops, 5443.1 ms in stops (20.0 µs/stop), 0.0 MB snapshotted, copy: full (no range of 1 MiB or more made executable)\n" +
	"ptjit: soft PT: 270992 instructions, 622827 trace bytes (2.30 B/insn, 0.30 B/insn without MTC)\n"

// ptjit decode -i rec --stat (stdout)
const sampleStat = "instructions: 270992\nevents: 98\nerrors: 0\ncond-jump: 55691\njump: 6197\nind-jump: 4021\ncall: 1111\nind-call: 758\nret: 1864\nsyscall: 48\n"

func TestStatCounts(t *testing.T) {
	for _, tc := range []struct {
		name, stdout string
		insns, errs  float64
		ok           bool
	}{
		{"decode --stat", sampleStat, 270992, 0, true},
		{"with errors", "instructions: 1200\nevents: 3\nerrors: 2\n", 1200, 2, true},
		{"no errors line", "instructions: 5\n", 5, 0, true},
		// a count inside another line is not the count
		{"not at line start", "decoded instructions: 5\n", 0, 0, false},
		{"empty", "", 0, 0, false},
	} {
		insns, errs, ok := statCounts(tc.stdout)
		if insns != tc.insns || errs != tc.errs || ok != tc.ok {
			t.Errorf("%s: %v %v %v, want %v %v %v", tc.name, insns, errs, ok, tc.insns, tc.errs, tc.ok)
		}
	}
}

func TestParseSoftPT(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		want         softPT
		ok           bool
	}{
		{"ubpf-test", sampleSoftRun, softPT{insns: 270992, bytes: 622827, perInsn: 2.30, perInsnNoMTC: 0.30}, true},
		{"default mode", "ptjit: 1 process, 1 thread, 2 regions, 5 versions, 48 stops, 3.0 ms in stops\n", softPT{}, false},
		{"empty", "", softPT{}, false},
	} {
		got, ok := parseSoftPT(tc.stderr)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	// The same run's summary line: the versions the decoders-jit row reads.
	if s := parseSummary(sampleSoftRun); !s.ok || s.versions != 4 || s.stops != 272633 || s.stopMS != 5443.1 {
		t.Errorf("parseSummary(soft run) = %+v", s)
	}
}

func TestStopbenchLines(t *testing.T) {
	// stepbench --trace 2000
	rate, ok := stepRate("steps: 17610 in 1168980422 ns\n")
	if want := 17610 / 1.168980422; !ok || math.Abs(rate-want) > 1e-6 {
		t.Errorf("stepRate = %v %v, want %v", rate, ok, want)
	}
	for _, bad := range []string{"", "steps: 5 in 0 ns\n", "usage: stepbench [--trace] ITERS\n"} {
		if _, ok := stepRate(bad); ok {
			t.Errorf("stepRate(%q) ok", bad)
		}
	}

	// stopbench trace same entry 2000 1 (stdout: the workload, then its tracer)
	out := "workload: 4000 mprotect calls in 150441430 ns\ntracer: 4000 stops\n"
	calls, ns, err := workload(run{stdout: out})
	if err != nil || calls != 4000 || ns != 150441430 {
		t.Errorf("workload = %v %v %v", calls, ns, err)
	}
	if n, ok := tracerStops(out); !ok || n != 4000 {
		t.Errorf("tracerStops = %v %v", n, ok)
	}
	// stopbench run 2000 1: no tracer line
	if _, ok := tracerStops("workload: 4000 mprotect calls in 271033058 ns\n"); ok {
		t.Error("tracerStops found a count in stopbench run's output")
	}
	if _, _, err := workload(run{stdout: "usage: stopbench run ITERS PAGES\n"}); err == nil {
		t.Error("workload: no error without the line")
	}

	// bareStop: the extra ns per stop of the traced runs over the native
	// time, from the medians of the runs' own workload times.
	rs := []run{{stdout: out}, {stdout: "workload: 4000 mprotect calls in 150000000 ns\n"}, {stdout: "workload: 4000 mprotect calls in 190000000 ns\n"}}
	got, err := bareStop(rs, 110441430)
	if want := (150441430.0 - 110441430) / 4000; err != nil || got != want {
		t.Errorf("bareStop = %v %v, want %v", got, err, want)
	}
	if _, err := bareStop([]run{{stdout: "workload: 4000 mprotect calls in 1 ns\n"}}, 0); err == nil {
		t.Error("bareStop: no error without the tracer's stop count")
	}
}

func TestHelperCount(t *testing.T) {
	// libipt-helper bench-block synthetic/small.pt synthetic/small.bin 0x400000
	if n, err := helperCount("22069 2512943\n"); err != nil || n != 22069 {
		t.Errorf("helperCount = %v %v", n, err)
	}
	for _, bad := range []string{"", "0 15\n", "insns 22069\n", "image\n"} {
		if n, err := helperCount(bad); err == nil {
			t.Errorf("helperCount(%q) = %v, no error", bad, n)
		}
	}
}

func TestPerfettoSlices(t *testing.T) {
	// ptjit export perfetto -i rec -o t.json --force -j 1 --max-slices 0
	if n, ok := perfettoSlices("t.json: 1870 slices of 1 threads, 4 code versions, 0 W^X writes\n"); !ok || n != 1870 {
		t.Errorf("perfettoSlices = %v %v", n, ok)
	}
	if _, ok := perfettoSlices("ptjit: export perfetto: no recording\n"); ok {
		t.Error("perfettoSlices found a count in an error")
	}
}

func TestBulkRange(t *testing.T) {
	// alias-jit prints the range of its bulk fill among its other lines.
	lo, pages, err := bulkRange("alias-jit: two views\nBULK 0x7fef7b0e0000 64\ndone\n")
	if err != nil || lo != 0x7fef7b0e0000 || pages != 64 {
		t.Errorf("bulkRange = %#x %d %v", lo, pages, err)
	}
	for _, bad := range []string{"", "BULK nowhere 64\n", "BULK 0x1000 0\n"} {
		if _, _, err := bulkRange(bad); err == nil {
			t.Errorf("bulkRange(%q): no error", bad)
		}
	}
}

func TestFirstField(t *testing.T) {
	// /proc/loadavg
	if got := firstField("19.47 12.36 6.54 18/199 24010\n"); got != "19.47" {
		t.Errorf("firstField = %q", got)
	}
	if got := firstField(""); got != "?" {
		t.Errorf("firstField(\"\") = %q", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{2, 2, 9, 2}, 2},
	} {
		in := append([]float64(nil), tc.v...)
		if got := medianOf(tc.v); got != tc.want {
			t.Errorf("medianOf(%v) = %v, want %v", tc.v, got, tc.want)
		}
		for i := range in {
			if in[i] != tc.v[i] {
				t.Errorf("medianOf reordered its argument: %v, was %v", tc.v, in)
				break
			}
		}
	}
	rs := []run{{stderr: "ptjit: 7 stops\n"}, {stderr: "ptjit: 1 stops\n"}, {stderr: "ptjit: 4 stops\n"}}
	if got := median(rs, func(r run) float64 { return parseSummary(r.stderr).stops }); got != 4 {
		t.Errorf("median of stops = %v, want 4", got)
	}
}

func TestRatioLine(t *testing.T) {
	le2 := func(r float64) bool { return r <= 2 }
	for _, tc := range []struct {
		name       string
		value, ref float64
		within     func(float64) bool
		want       measurement
	}{
		{"met", 1.5, 1, le2, measurement{"met", "1.500 s", "alone 1.000 s", "1.50×", "≤ 2×", "yes"}},
		{"missed", 3, 1, le2, measurement{"missed", "3.000 s", "alone 1.000 s", "3.00×", "≤ 2×", "no"}},
		{"no target", 3, 1, nil, measurement{"no target", "3.000 s", "alone 1.000 s", "3.00×", "≤ 2×", "-"}},
		// noise larger than the effect: an extra time at or below zero
		{"value ≤ 0", -0.5, 1, le2, measurement{"value ≤ 0", "-0.500 s", "alone 1.000 s", "-0.50×", "≤ 2×", "n/a"}},
		{"ref 0", 1, 0, le2, measurement{"ref 0", "1.000 s", "alone 0.000 s", "+Inf×", "≤ 2×", "n/a"}},
	} {
		if got := ratioLine(tc.name, tc.value, tc.ref, "s", "alone", "≤ 2×", tc.within); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestTimedCopies: n copies of the trace, each PSB followed by a TSC
// packet whose value grows by 1000 a PSB; nothing else changes.
func TestTimedCopies(t *testing.T) {
	psb := bytes.Repeat([]byte{0x02, 0x82}, 8)
	tails := [][]byte{{0x00}, {0x00, 0x00}} // PADs after each PSB
	var trace []byte
	for _, tail := range tails {
		trace = append(append(trace, psb...), tail...)
	}
	out := timedCopies(trace, 2)
	var want []byte
	tsc := uint64(1000)
	for range 2 {
		for _, tail := range tails {
			var payload [8]byte
			binary.LittleEndian.PutUint64(payload[:], tsc)
			want = append(want, psb...)
			want = append(want, 0x19) // TSC
			want = append(want, payload[:7]...)
			want = append(want, tail...)
			tsc += 1000
		}
	}
	if !bytes.Equal(out, want) {
		t.Errorf("timedCopies:\n got % x\nwant % x", out, want)
	}
	if got := timedCopies([]byte{0x00, 0x00}, 3); !bytes.Equal(got, make([]byte, 6)) {
		t.Errorf("timedCopies without a PSB = % x", got)
	}
}
