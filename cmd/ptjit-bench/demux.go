package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func init() {
	rows = append(rows, row{name: "demux", target: "≤ 1.1× per-thread", measure: measureDemux})
}

// measureDemux: ptjit decode of a per-CPU recording (every CPU's queue
// split by the sideband, each thread's stretches joined; recording/demux.go)
// against the decode of a per-thread recording of the same program, per
// decoded instruction, since the two runs execute nearly but not exactly
// the same instructions: forker (four threads in two processes and a vfork
// child; few instructions, so mostly the fixed cost of opening a recording
// and building its images) and ubpf-test 400 (1.3 million instructions,
// switched between 2 CPUs every 3,000: mostly the decode itself). The two recordings are made once; their decodes alternate.
// The time is the decode's CPU time (user + system): decoding is CPU-bound
// and the machines this runs on are shared, where wall time mostly
// measures the wait for a CPU.
func measureDemux(b *bench) ([]measurement, error) {
	var out []measurement
	for _, argv := range [][]string{{"forker"}, {"ubpf-test", "400"}} {
		m, err := measureDemuxOf(b, argv)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func measureDemuxOf(b *bench, argv []string) (measurement, error) {
	prog := append([]string{b.prog(argv[0])}, argv[1:]...)
	dirs := map[string]string{}
	for _, layout := range []string{"per-thread", "per-cpu"} {
		dir, err := os.MkdirTemp(filepath.Dir(b.outDir), "demux-")
		if err != nil {
			return measurement{}, err
		}
		defer os.RemoveAll(dir)
		dirs[layout] = filepath.Join(dir, "rec")
		args := append([]string{"run", "-q", "--pt=soft", "--soft-layout=" + layout, "--soft-cpus=2", "-o", dirs[layout], "--"}, prog...)
		if _, err := b.exec(append([]string{b.ptjit}, args...)...); err != nil {
			return measurement{}, err
		}
	}
	rs, err := b.series(
		func() (run, error) { return b.exec(b.ptjit, "decode", "-i", dirs["per-thread"], "--stat") },
		func() (run, error) { return b.exec(b.ptjit, "decode", "-i", dirs["per-cpu"], "--stat") },
	)
	if err != nil {
		return measurement{}, err
	}
	perInsn := func(r run) float64 {
		n, _, ok := statCounts(r.stdout)
		if !ok || n == 0 {
			return 0
		}
		return r.cpu.Seconds() * 1e9 / n
	}
	thread, cpu := median(rs[0], perInsn), median(rs[1], perInsn)
	if thread == 0 || cpu == 0 {
		return measurement{}, fmt.Errorf("ptjit decode --stat printed no instruction count")
	}
	return ratioLine(strings.Join(argv, " ")+": decode CPU ns/insn, per-CPU recording / per-thread", cpu, thread, "ns", "per-thread", "≤ 1.1×",
		func(r float64) bool { return r <= 1.1 }), nil
}
