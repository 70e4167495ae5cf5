package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

func init() {
	rows = append(rows, row{name: "demux", target: "≤ 1.1× per-thread", measure: measureDemux})
}

var reStatInsns = regexp.MustCompile(`(?m)^instructions: (\d+)$`)

// measureDemux: ptjit decode of a per-CPU recording (every CPU's queue
// split by the sideband, each thread's stretches joined; recording/demux.go)
// against the decode of a per-thread recording of the same program
// (forker: four threads in two processes and a vfork child), per decoded
// instruction, since the two runs execute nearly but not exactly the same
// instructions. The two recordings are made once; their decodes alternate.
// The time is the decode's CPU time (user + system): decoding is CPU-bound
// and the machines this runs on are shared, where wall time mostly
// measures the wait for a CPU.
func measureDemux(b *bench) ([]measurement, error) {
	prog := b.prog("forker")
	dirs := map[string]string{}
	for _, layout := range []string{"per-thread", "per-cpu"} {
		dir, err := os.MkdirTemp(filepath.Dir(b.outDir), "demux-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		dirs[layout] = filepath.Join(dir, "rec")
		if _, err := b.exec(b.ptjit, "run", "-q", "--pt=soft", "--soft-layout="+layout, "--soft-cpus=2", "-o", dirs[layout], "--", prog); err != nil {
			return nil, err
		}
	}
	rs, err := b.series(
		func() (run, error) { return b.exec(b.ptjit, "decode", "-i", dirs["per-thread"], "--stat") },
		func() (run, error) { return b.exec(b.ptjit, "decode", "-i", dirs["per-cpu"], "--stat") },
	)
	if err != nil {
		return nil, err
	}
	perInsn := func(r run) float64 {
		m := reStatInsns.FindStringSubmatch(r.stdout)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseFloat(m[1], 64)
		return r.cpu.Seconds() * 1e9 / n
	}
	thread, cpu := median(rs[0], perInsn), median(rs[1], perInsn)
	if thread == 0 || cpu == 0 {
		return nil, fmt.Errorf("ptjit decode --stat printed no instruction count")
	}
	return []measurement{
		ratioLine("forker: decode CPU ns/insn, per-CPU recording / per-thread", cpu, thread, "ns", "per-thread", "≤ 1.1×",
			func(r float64) bool { return r <= 1.1 }),
	}, nil
}
