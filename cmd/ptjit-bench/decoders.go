package main

import (
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ptjit/ptjit/perf"
)

// The decoders row: ptjit's decoder against libipt's block
// decoder and perf's own Intel PT decoder, on one trace all three read.
//
// The trace is the libipt corpus's synthetic/mid (a 64 KiB program, 2.1 M
// instructions, blocks of about two instructions) repeated -decode-copies
// times, with a TSC packet after every PSB: perf's decoder emits nothing
// for a trace without timestamps. Every copy begins with a PSB+, so the
// three decoders resynchronize there, each its own way, and their counts
// differ by a few instructions per copy. For perf the program is an ELF
// (mid.bin at 0x400000 through gcc's .incbin) mapped by an MMAP2 of a
// hand-written perf.data (perf.PerfDataWriter); libipt (testdata's
// libipt-helper, bench-block mode) and ptjit (decode --pt --raw) read
// mid.bin at 0x400000.
//
// Commands, alternating, -runs times:
//
//	libipt-helper bench-block T mid.bin 0x400000
//	perf script -i P --itrace=i1000000i -F ip   (one sample per million
//	    instructions: perf walks every instruction, prints ~70 lines)
//	ptjit decode --pt T --raw mid.bin:0x400000 --stat -j 1
//	ptjit decode --pt T --raw mid.bin:0x400000 --calls -j 1 >/dev/null
//	ptjit decode --pt T --raw mid.bin:0x400000 --stat -j 2
//
// One-core figures are CPU time (user + system) of each process, medians:
// the machines this runs on are shared, and wall time there measures the
// wait for a CPU as much as the work. Two cores compare ptjit -j 2's wall
// time with libipt's, which only means something on an idle machine (the
// row prints the load).
var (
	decodeCopies = flag.Int("decode-copies", 31, "decoders row: copies of synthetic/mid in the trace (31: 20 MB, 310: 200 MB)")
	conformance  = flag.String("conformance", "testdata/conformance/libipt", "decoders row: the libipt corpus (synthetic/mid.pt, mid.bin)")
)

func init() {
	rows = append(rows, row{name: "decoders", target: "≥1.5× libipt block, ≥2× perf, --calls ≤1.3× --stat, -j2 ≥2.7×", measure: measureDecoders})
}

func measureDecoders(b *bench) ([]measurement, error) {
	helper := b.prog("libipt-helper")
	if _, err := os.Stat(helper); err != nil {
		return nil, fmt.Errorf("%s missing: install libipt-dev and run make", helper)
	}
	perfBin, err := exec.LookPath("perf")
	if err != nil {
		return nil, fmt.Errorf("perf not installed (linux-perf)")
	}
	syn := filepath.Join(*conformance, "synthetic")
	mid, err := os.ReadFile(filepath.Join(syn, "mid.pt"))
	if err != nil {
		return nil, fmt.Errorf("the libipt corpus: %v (set -conformance)", err)
	}
	image, err := filepath.Abs(filepath.Join(syn, "mid.bin"))
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(b.outDir), "decoders-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	trace := filepath.Join(dir, "trace.pt")
	if err := os.WriteFile(trace, timedCopies(mid, *decodeCopies), 0o644); err != nil {
		return nil, err
	}
	perfData, err := syntheticPerfData(dir, image, trace)
	if err != nil {
		return nil, err
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	raw := image + ":0x400000"
	ptjit := func(args ...string) func() (run, error) {
		return func() (run, error) {
			return b.exec(append([]string{b.ptjit, "decode", "--pt", trace, "--raw", raw}, args...)...)
		}
	}
	load0 := loadavg()
	rs, err := b.series(
		func() (run, error) { return b.exec(helper, "bench-block", trace, image, "0x400000") },
		func() (run, error) {
			return b.exec(perfBin, "script", "-i", perfData, "--itrace=i1000000i", "-F", "ip")
		},
		ptjit("--stat", "-j", "1"),
		func() (run, error) {
			return b.execQuiet(devnull, b.ptjit, "decode", "--pt", trace, "--raw", raw, "--calls", "-j", "1")
		},
		ptjit("--stat", "-j", "2"),
	)
	if err != nil {
		return nil, err
	}
	load := fmt.Sprintf("load %s → %s", load0, loadavg())
	// The decoders must agree on what they decoded.
	libN, err := helperCount(rs[0][0].stdout)
	if err != nil {
		return nil, err
	}
	for _, c := range []int{2, 4} {
		n, _, ok := statCounts(rs[c][0].stdout)
		if !ok {
			return nil, fmt.Errorf("ptjit decode --stat printed no count")
		}
		if n < libN*0.999 || n > libN*1.001 {
			return nil, fmt.Errorf("ptjit decoded %.0f instructions, libipt %.0f", n, libN)
		}
	}
	if samples := strings.Count(rs[1][0].stdout, "\n"); float64(samples) < libN/1e6*0.99-1 {
		return nil, fmt.Errorf("perf script printed %d samples, want about %.0f (one per million instructions)", samples, libN/1e6)
	}
	cpu := func(r run) float64 { return r.cpu.Seconds() }
	lib, prf, stat, calls := median(rs[0], cpu), median(rs[1], cpu), median(rs[2], cpu), median(rs[3], cpu)
	libWall, j2Wall := median(rs[0], wallSeconds), median(rs[4], wallSeconds)
	size := fmt.Sprintf("%.0f MB, %.1f M insns", float64(len(mid)**decodeCopies)/1e6, libN/1e6)
	return []measurement{
		ratioLine("one core, "+size+": libipt block CPU / ptjit --stat -j1 CPU", lib, stat, "s", "ptjit", "≥ 1.5×",
			func(r float64) bool { return r >= 1.5 }),
		ratioLine("one core: perf script CPU / ptjit --stat -j1 CPU", prf, stat, "s", "ptjit", "≥ 2×",
			func(r float64) bool { return r >= 2 }),
		ratioLine("ptjit --calls -j1 CPU / --stat -j1 CPU", calls, stat, "s", "--stat", "≤ 1.3×",
			func(r float64) bool { return r <= 1.3 }),
		ratioLine("two cores ("+load+"): libipt block wall / ptjit --stat -j2 wall", libWall, j2Wall, "s", "ptjit -j2", "≥ 2.7×",
			func(r float64) bool { return r >= 2.7 }),
	}, nil
}

// timedCopies returns n copies of trace with a TSC packet after every PSB
// (the TSC advancing by 1000 a PSB).
func timedCopies(trace []byte, n int) []byte {
	psb := bytes.Repeat([]byte{0x02, 0x82}, 8)
	var out []byte
	tsc := uint64(1000)
	for i := 0; i < n; i++ {
		rest := trace
		for {
			j := bytes.Index(rest, psb)
			if j < 0 {
				out = append(out, rest...)
				break
			}
			out = append(out, rest[:j+len(psb)]...)
			rest = rest[j+len(psb):]
			out = append(out, 0x19) // TSC: 7 bytes of payload
			for k := 0; k < 7; k++ {
				out = append(out, byte(tsc>>(8*k)))
			}
			tsc += 1000
		}
	}
	return out
}

// syntheticPerfData writes dir/perf.data: one thread whose AUX queue is
// the trace file and whose only mapping is image, as an ELF at 0x400000
// (dir/mid.elf, built with gcc), so that perf reads the code perf reads
// elsewhere from a DSO.
func syntheticPerfData(dir, image, trace string) (string, error) {
	src, bin := filepath.Join(dir, "mid.S"), filepath.Join(dir, "mid.elf")
	asm := fmt.Sprintf("\t.text\n\t.globl _start\n_start:\n\t.incbin %q\n", image)
	if err := os.WriteFile(src, []byte(asm), 0o644); err != nil {
		return "", err
	}
	if out, err := exec.Command("gcc", "-nostdlib", "-static", "-no-pie", "-Wl,--build-id=none", "-Wl,-Ttext=0x400000",
		"-o", bin, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gcc: %v: %s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		return "", err
	}
	text := f.Section(".text")
	f.Close()
	if text == nil || text.Addr != 0x400000 {
		return "", fmt.Errorf("%s: no .text at 0x400000", bin)
	}
	data, err := os.ReadFile(trace)
	if err != nil {
		return "", err
	}
	const pid, cpu = 4242, 0
	path := filepath.Join(dir, "perf.data")
	w, err := perf.CreatePerfData(path, perf.PerfDataConfig{Cmdline: []string{"ptjit-bench", "decoders"}})
	if err != nil {
		return "", err
	}
	w.SetCPU(cpu)
	w.Comm(pid, pid, "mid", true, 100)
	m := perf.PerfMmap{Pid: pid, Tid: pid, Addr: text.Addr, Len: text.Size, Pgoff: text.Offset, Prot: 5, Flags: 2, Filename: bin}
	if err := perf.PerfMmapFile(&m); err != nil {
		return "", err
	}
	w.Mmap2(&m, 200)
	w.ItraceStart(pid, pid, 300)
	w.AuxTrace(pid, cpu, 500, data)
	w.Exit(pid, pid, pid, pid, 1<<62)
	return path, w.Close()
}

// execQuiet runs argv once with its standard output to out (a big output
// that the harness need not hold), as exec otherwise.
func (b *bench) execQuiet(out *os.File, argv ...string) (run, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	var errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = out, &errb
	start := time.Now()
	err := cmd.Run()
	r := run{wall: time.Since(start), stderr: errb.String()}
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		return r, fmt.Errorf("%s: %v (%s)", filepath.Base(argv[0]), err, strings.TrimSpace(r.stderr))
	}
	return r, nil
}
