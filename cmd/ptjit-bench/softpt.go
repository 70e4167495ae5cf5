package main

import (
	"fmt"
)

func init() {
	rows = append(rows, row{name: "softpt", target: "≥0.8× bare single-step", measure: measureSoftPT})
}

// stepIters is stepbench's loop count: about 170,000 instructions.
const stepIters = "20000"

// measureSoftPT: instructions per second that ptjit run --pt=soft records,
// against the rate of a bare PTRACE_SINGLESTEP loop (stepbench's own
// minimal tracer) over the same program; and the trace's bytes per
// instruction.
func measureSoftPT(b *bench) ([]measurement, error) {
	prog := b.prog("stepbench")
	rs, err := b.series(
		func() (run, error) { return b.exec(prog, "--trace", stepIters) },
		func() (run, error) {
			return b.ptjitExec("run", "--pt=soft", "-o", b.outDir, "--", prog, stepIters)
		},
	)
	if err != nil {
		return nil, err
	}
	bare := median(rs[0], func(r run) float64 {
		rate, _ := stepRate(r.stdout)
		return rate
	})
	var insns, bytes, noMTC float64
	soft := median(rs[1], func(r run) float64 {
		s, ok := parseSoftPT(r.stderr)
		if !ok {
			return 0
		}
		insns, bytes, noMTC = s.insns, s.bytes, s.perInsnNoMTC
		return insns / r.wall.Seconds()
	})
	if bare == 0 || soft == 0 {
		return nil, fmt.Errorf("stepbench or ptjit printed no step count")
	}
	return []measurement{
		ratioLine("soft PT: instructions/s recorded / bare PTRACE_SINGLESTEP rate", soft/1e3, bare/1e3, "k/s", "bare", "≥0.8×",
			func(r float64) bool { return r >= 0.8 }),
		{name: "soft PT: trace bytes per instruction (without MTC)", value: fmt.Sprintf("%.2f B (%.2f B)", bytes/insns, noMTC), ref: fmt.Sprintf("%.0f insns", insns), ratio: "-", target: "-", met: "-"},
	}, nil
}

func init() {
	rows = append(rows, row{name: "softfilter", target: "-", measure: measureSoftFilter})
}

// measureSoftFilter: ubpf-test (its JIT loop run a few times among libc
// and loader code) recorded with --pt=soft, with and without
// --soft-filter=jit: what stepping only the JIT code saves, and how many
// instructions each traced.
func measureSoftFilter(b *bench) ([]measurement, error) {
	prog := b.prog("ubpf-test")
	rs, err := b.series(
		func() (run, error) { return b.exec(prog) },
		func() (run, error) { return b.ptjitExec("run", "--pt=soft", "-o", b.outDir, "--", prog) },
		func() (run, error) {
			return b.ptjitExec("run", "--pt=soft", "--soft-filter=jit", "-o", b.outDir, "--", prog)
		},
	)
	if err != nil {
		return nil, err
	}
	insns := func(r run) float64 {
		s, _ := parseSoftPT(r.stderr)
		return s.insns
	}
	native, full, jit := median(rs[0], wallSeconds), median(rs[1], wallSeconds), median(rs[2], wallSeconds)
	return []measurement{
		ratioLine("ubpf-test --pt=soft --soft-filter=jit / alone", jit, native, "s", "alone", "-", nil),
		ratioLine("ubpf-test --pt=soft (everything) / alone", full, native, "s", "alone", "-", nil),
		{name: "instructions traced: --soft-filter=jit / everything", value: fmt.Sprintf("%.0f", median(rs[2], insns)),
			ref: fmt.Sprintf("%.0f", median(rs[1], insns)), ratio: fmt.Sprintf("%.3f", median(rs[2], insns)/median(rs[1], insns)), target: "-", met: "-"},
	}, nil
}
