package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The JIT-recording line of the decoders target: ptjit's decoder
// on one core against perf's, on a soft-PT recording of a program that
// rewrites one function 12 times at one address (testdata/jit-loop 12
// 50000: 13 code versions, 3.4 M instructions, an MTC packet per stepped
// instruction). perf decodes the same trace through the recording's
// jitdump export after perf inject --jit, so that each version is a DSO of
// its own, as a cooperating JIT would give it:
//
//	ptjit run --pt=soft -o REC -- jit-loop 12 50000     (once: minutes of stepping)
//	ptjit export jitdump -i REC -o EXP
//	perf inject --jit -i EXP/perf.data -o EXP/perf.jit.data
//	ptjit decode -i REC --stat -j 1                     (measured)
//	perf script -i EXP/perf.jit.data --itrace=i100000i -F ip   (measured)
//
// perf's --itrace=i100000i samples every 100,000th instruction: it decodes
// every packet and instruction, as --stat does, and prints little. libipt
// has no image with a time dimension (a version per time range at one
// address), so it has no line here.

var jitLoopArgs = flag.String("decode-jit-loop", "12 50000", "decoders-jit row: jit-loop's arguments (versions - 1, iterations)")

func init() {
	rows = append(rows, row{name: "decoders-jit", target: "≥2× perf", measure: measureDecodersJIT})
}

func measureDecodersJIT(b *bench) ([]measurement, error) {
	perfBin, err := exec.LookPath("perf")
	if err != nil {
		return nil, fmt.Errorf("perf not installed (linux-perf)")
	}
	dir, err := os.MkdirTemp(filepath.Dir(b.outDir), "decoders-jit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rec, exp := filepath.Join(dir, "rec"), filepath.Join(dir, "exp")
	r, err := b.exec(append([]string{b.ptjit, "run", "--pt=soft", "-o", rec, "--", b.prog("jit-loop")}, strings.Fields(*jitLoopArgs)...)...)
	if err != nil {
		return nil, err
	}
	sum := parseSummary(r.stderr)
	soft, softOK := parseSoftPT(r.stderr)
	if !sum.ok || !softOK {
		return nil, fmt.Errorf("ptjit run printed no version or instruction count: %q", r.stderr)
	}
	versions, recorded := int(sum.versions), soft.insns
	if versions < 10 {
		return nil, fmt.Errorf("jit-loop %s made %d code versions, want at least 10", *jitLoopArgs, versions)
	}
	if _, err := b.exec(b.ptjit, "export", "jitdump", "-i", rec, "-o", exp); err != nil {
		return nil, err
	}
	injected := filepath.Join(exp, "perf.jit.data")
	if _, err := b.exec(perfBin, "inject", "--jit", "-i", filepath.Join(exp, "perf.data"), "-o", injected); err != nil {
		return nil, err
	}
	load0 := loadavg()
	rs, err := b.series(
		func() (run, error) { return b.exec(b.ptjit, "decode", "-i", rec, "--stat", "-j", "1") },
		func() (run, error) { return b.exec(perfBin, "script", "-i", injected, "--itrace=i100000i", "-F", "ip") },
	)
	if err != nil {
		return nil, err
	}
	load := fmt.Sprintf("load %s → %s", load0, loadavg())
	// Both decoded the whole trace: ptjit's count is the recorder's, and
	// perf printed a sample per 100,000 of them.
	n, errs, ok := statCounts(rs[0][0].stdout)
	if !ok {
		return nil, fmt.Errorf("ptjit decode --stat printed no count")
	}
	if n < recorded*0.999 || n > recorded*1.001 || errs != 0 {
		return nil, fmt.Errorf("ptjit decoded %.0f instructions of %.0f recorded: %q", n, recorded, rs[0][0].stdout)
	}
	if samples := strings.Count(rs[1][0].stdout, "\n"); float64(samples) < n/1e5-2 || float64(samples) > n/1e5+2 {
		return nil, fmt.Errorf("perf script printed %d samples, want about %.0f (one per 100,000 instructions)", samples, n/1e5)
	}
	cpu := func(r run) float64 { return r.cpu.Seconds() }
	return []measurement{
		ratioLine(fmt.Sprintf("one core, soft-PT JIT recording (%d versions, %.1f M insns, %s): perf script CPU / ptjit --stat -j1 CPU",
			versions, n/1e6, load), median(rs[1], cpu), median(rs[0], cpu), "s", "ptjit", "≥ 2×",
			func(r float64) bool { return r >= 2 }),
	}, nil
}
