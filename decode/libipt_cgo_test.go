//go:build libipt

package decode

import (
	"bufio"
	"bytes"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptpkt"
) // Differential tests and benchmarks against Intel's libipt
// (apt-get install libipt-dev; go test -tags libipt ./decode/).
//
// Go does not allow cgo in _test.go files, so the libipt side is a small C
// program linked with -lipt (testenv.LibiptHelper); it decodes with
// pt_insn_* or pt_blk_* and prints the instruction addresses (or, in
// benchmark mode, the count and the nanoseconds the decode loop took).

// genTrace builds a random program and a valid PT trace of one random run
// of it; it returns the trace, the image and the addresses executed.
func genTrace(seed int64, blocks int) (pt, code []byte, truth []uint64) {
	const base = 0x400000
	r := rand.New(rand.NewSource(seed))
	type site struct {
		addr uint64
		nops int
		kind int // 0 jcc, 1 jmp, 2 call, 3 ret, 4 jmp *rax, 5 call *rax
		off  int // offset of the terminator in code
	}
	nsites := 64
	sites := make([]site, nsites)
	for i := range sites {
		s := &sites[i]
		s.addr = base + uint64(len(code))
		s.nops = r.Intn(4)
		s.kind = r.Intn(6)
		if i == nsites-1 && s.kind <= 2 {
			s.kind = 3 // direct branches only go forward: no trace-less loops
		}
		for j := 0; j < s.nops; j++ {
			code = append(code, 0x90)
		}
		s.off = len(code)
		switch s.kind {
		case 0:
			code = append(code, 0x0f, 0x84, 0, 0, 0, 0)
		case 1:
			code = append(code, 0xe9, 0, 0, 0, 0)
		case 2:
			code = append(code, 0xe8, 0, 0, 0, 0)
		case 3:
			code = append(code, 0xc3)
		case 4:
			code = append(code, 0xff, 0xe0)
		case 5:
			code = append(code, 0xff, 0xd0)
		}
	}
	// An indirect jmp ends the code, so nothing falls off.
	tail := base + uint64(len(code))
	code = append(code, 0xff, 0xe0)
	// Direct targets: fix the rel32 fields.
	target := make([]int, nsites)
	for i := range sites {
		s := &sites[i]
		target[i] = r.Intn(nsites)
		if s.kind <= 2 {
			target[i] = i + 1 + r.Intn(nsites-i-1)
			opLen := 5
			if s.kind == 0 {
				opLen = 6
			}
			next := int64(base) + int64(s.off+opLen)
			rel := int64(sites[target[i]].addr) - next
			putLE32(code[s.off+opLen-4:], uint32(int32(rel)))
		}
	}
	siteAt := map[uint64]int{}
	for i, s := range sites {
		siteAt[s.addr] = i
	}
	insnLen := func(kind int) uint64 { return []uint64{6, 5, 5, 1, 2, 2}[kind] }

	enc := &ptpkt.Encoder{}
	var tnt uint64
	var ntnt uint8
	flush := func() {
		if ntnt > 0 {
			enc.Append(&ptpkt.Packet{Type: ptpkt.PktTNT8, TNTBits: ntnt, TNTPayload: tnt})
			tnt, ntnt = 0, 0
		}
	}
	bit := func(b bool) {
		tnt <<= 1
		if b {
			tnt |= 1
		}
		ntnt++
		if ntnt == 6 {
			flush()
		}
	}
	gen := 0
	psb := func(ip uint64) {
		flush()
		gen++
		enc.Append(&ptpkt.Packet{Type: ptpkt.PktPSB})
		enc.Append(&ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
		enc.Append(&ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: ip & (1<<48 - 1)})
		enc.Append(&ptpkt.Packet{Type: ptpkt.PktPSBEnd})
	}
	type frame struct {
		ret uint64
		gen int
	}
	var stack []frame
	push := func(f frame) {
		stack = append(stack, f)
		// The decoders remember 64 calls; older ones are lost.
		if len(stack) > 64 {
			stack[len(stack)-65].gen = -1
		}
	}
	cur := 0
	psb(sites[0].addr)
	for n := 0; n < blocks; n++ {
		s := &sites[cur]
		for j := 0; j < s.nops; j++ {
			truth = append(truth, s.addr+uint64(j))
		}
		ip := base + uint64(s.off)
		truth = append(truth, ip)
		next := ip + insnLen(s.kind)
		switch s.kind {
		case 0:
			taken := r.Intn(2) == 0
			bit(taken)
			if taken {
				cur = target[cur]
			} else {
				cur++
				if cur == nsites {
					truth = append(truth, tail) // the closing jmp *rax
					cur = 0
					flush()
					enc.IPPacket(ptpkt.PktTIP, sites[0].addr)
				}
			}
		case 1:
			cur = target[cur]
		case 2:
			// A call to the next instruction is not a call for return
			// compression (position-independent code idiom).
			if sites[target[cur]].addr != next {
				push(frame{next, gen})
			}
			cur = target[cur]
		case 3:
			if len(stack) > 0 && stack[len(stack)-1].gen == gen {
				f := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				if i, ok := siteAt[f.ret]; ok {
					bit(true) // compressed return
					cur = i
					break
				}
				// Return into the middle of a block: not modelled.
				stack = append(stack, f)
			}
			cur = r.Intn(nsites)
			flush()
			enc.IPPacket(ptpkt.PktTIP, sites[cur].addr)
			stack = nil // uncompressed: later returns go by TIP too
		case 4, 5:
			if s.kind == 5 {
				push(frame{next, gen})
			}
			cur = r.Intn(nsites)
			flush()
			enc.IPPacket(ptpkt.PktTIP, sites[cur].addr)
		}
		if r.Intn(200) == 0 {
			psb(sites[cur].addr)
		}
	}
	flush()
	enc.IPPacket(ptpkt.PktFUP, sites[cur].addr)
	enc.Append(&ptpkt.Packet{Type: ptpkt.PktTIPPGD})
	return enc.Buf, code, truth
}

func putLE32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

type ipSink struct{ ips []uint64 }

func (s *ipSink) Insn(in *FlowInsn, off, tsc uint64) { s.ips = append(s.ips, in.IP) }
func (s *ipSink) Event(ev *Event, off uint64)        {}
func (s *ipSink) Error(e *FlowError, kind ErrorKind) {
	s.ips = append(s.ips, ^uint64(0)-uint64(e.Code))
}

// ipBlockSink is ipSink taking blocks (the --stat/--calls path), each
// expanded to its instructions' addresses.
type ipBlockSink struct {
	ipSink
	blocks int
}

func (s *ipBlockSink) Block(b *FlowBlock, off, tsc uint64) {
	s.blocks++
	b.Insns(func(in *FlowInsn) { s.ips = append(s.ips, in.IP) })
}

func TestDifferentialLibipt(t *testing.T) {
	helper := testenv.LibiptHelper(t)
	dir := t.TempDir()
	for seed := int64(1); seed <= 40; seed++ {
		pt, code, truth := genTrace(seed, 3000)
		ptPath := filepath.Join(dir, "t.pt")
		binPath := filepath.Join(dir, "t.bin")
		os.WriteFile(ptPath, pt, 0o644)
		os.WriteFile(binPath, code, 0o644)

		img := NewImage()
		if err := img.AddBytes(code, 0x400000, "gen", 0); err != nil {
			t.Fatal(err)
		}
		var ours ipSink
		RunFlow(NewFlowDecoder(pt, img, nil), &ours, false)

		out, err := exec.Command(helper, "insn", ptPath, binPath, "0x400000").Output()
		if err != nil {
			t.Fatalf("seed %d: libipt helper: %v", seed, err)
		}
		var theirs []uint64
		sc := bufio.NewScanner(bytes.NewReader(out))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "insns ") || strings.HasPrefix(line, "error ") {
				if strings.HasPrefix(line, "error ") {
					t.Errorf("seed %d: libipt: %s", seed, line)
				}
				continue
			}
			v, err := strconv.ParseUint(line, 16, 64)
			if err != nil {
				t.Fatalf("seed %d: bad helper line %q", seed, line)
			}
			theirs = append(theirs, v)
		}
		var want []uint64
		for _, ip := range truth {
			if ip != ^uint64(0) {
				want = append(want, ip)
			}
		}
		if d := diffIPs(ours.ips, theirs); d != "" {
			t.Fatalf("seed %d: ptjit vs libipt: %s", seed, d)
		}
		if d := diffIPs(ours.ips, want); d != "" {
			t.Fatalf("seed %d: ptjit vs the generator's truth: %s", seed, d)
		}
		var blk ipBlockSink
		RunFlow(NewFlowDecoder(pt, img.Clone(), nil), &blk, false)
		if d := diffIPs(blk.ips, theirs); d != "" {
			t.Fatalf("seed %d: ptjit's block path vs libipt: %s", seed, d)
		}
		if blk.blocks == 0 {
			t.Fatalf("seed %d: the block path was not used", seed)
		}
	}
}

// BenchmarkDecodeVsLibipt decodes synthetic/mid with ptjit (one core and
// all cores) and with libipt's instruction and block decoders, interleaved
// so they see the same machine load, and reports instructions per second
// and the ratios.
func BenchmarkDecodeVsLibipt(b *testing.B) {
	helper := testenv.LibiptHelper(b)
	dir := testenv.ConformanceDir(b)
	ptPath := filepath.Join(dir, "synthetic", "mid.pt")
	binPath := filepath.Join(dir, "synthetic", "mid.bin")
	pt, img := loadSynthetic(b, "mid")
	var ours, oursPar, libInsn, libBlock time.Duration
	var n uint64
	runLib := func(mode string) time.Duration {
		out, err := exec.Command(helper, mode, ptPath, binPath, "0x400000").Output()
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(out))
		cnt, _ := strconv.ParseUint(f[0], 10, 64)
		ns, _ := strconv.ParseUint(f[1], 10, 64)
		if cnt != 2137044 {
			b.Fatalf("libipt %s decoded %d instructions", mode, cnt)
		}
		return time.Duration(ns)
	}
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		s := &countSink{}
		RunFlow(NewFlowDecoder(pt, img, nil), s, false)
		ours += time.Since(t0)
		n = s.n
		t0 = time.Now()
		var np uint64
		ParallelFlowChunks(pt, img, &FlowConfig{}, false, 2,
			func() FlowSink { return &countSink{} },
			func(s FlowSink) { np += s.(*countSink).n })
		oursPar += time.Since(t0)
		if np != n {
			b.Fatalf("parallel decode: %d instructions, sequential %d", np, n)
		}
		libInsn += runLib("bench-insn")
		libBlock += runLib("bench-block")
	}
	if n != 2137044 {
		b.Fatalf("ptjit decoded %d instructions", n)
	}
	rate := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(rate(ours), "ptjit-Minsn/s")
	b.ReportMetric(rate(oursPar), "ptjit-j2-Minsn/s")
	b.ReportMetric(rate(libInsn), "libipt-insn-Minsn/s")
	b.ReportMetric(rate(libBlock), "libipt-block-Minsn/s")
	b.ReportMetric(float64(libInsn)/float64(ours), "x-vs-insn")
	b.ReportMetric(float64(libBlock)/float64(ours), "x-vs-block")
	b.ReportMetric(float64(ours)/float64(oursPar), "x-parallel")
}

// BenchmarkDecodeLarge decodes a trace of hundreds of MB — synthetic/mid
// repeated (each copy starts at a PSB) — with ptjit (windowed, so memory
// stays bounded: the trace file is mapped, not read) on one and on two
// cores, and with libipt's instruction and block decoders on the same file.
// PTJIT_LARGE_COPIES sets the copies (default 300: about 194 MB, 637 M
// instructions). Each copy ends with tracing disabled and the next begins
// with a PSB+ that carries an IP: both decoders resynchronize there, each
// its own way (libipt drops the first instructions, ptjit reports "bad
// status update" and resyncs), so their counts may differ by a few
// instructions per seam; the rates are what this benchmark compares.
func BenchmarkDecodeLarge(b *testing.B) {
	helper := testenv.LibiptHelper(b)
	dir := testenv.ConformanceDir(b)
	mid, img := loadSynthetic(b, "mid")
	binPath := filepath.Join(dir, "synthetic", "mid.bin")
	copies := 300
	if v, err := strconv.Atoi(os.Getenv("PTJIT_LARGE_COPIES")); err == nil && v > 0 {
		copies = v
	}
	ptPath := filepath.Join(b.TempDir(), "large.pt")
	f, err := os.Create(ptPath)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < copies; i++ {
		if _, err := f.Write(mid); err != nil {
			b.Fatal(err)
		}
	}
	f.Close()
	var want uint64 // libipt's count, set by lib
	pt, err := perf.MapFile(ptPath)
	if err != nil {
		b.Fatal(err)
	}
	ours := func(jobs int) time.Duration {
		t0 := time.Now()
		var n uint64
		ForEachWindow(BytesTrace(pt), DefaultWindow, func(w []byte, stop, base uint64) {
			ParallelFlowChunksWindow(w, stop, img, &FlowConfig{}, false, jobs,
				func() FlowSink { return &countSink{} },
				func(s FlowSink) { n += s.(*countSink).n })
		})
		if d := int64(n) - int64(want); d < -16*int64(copies) || d > 16*int64(copies) {
			b.Fatalf("ptjit -j %d decoded %d instructions, libipt %d", jobs, n, want)
		}
		return time.Since(t0)
	}
	lib := func(mode string) time.Duration {
		out, err := exec.Command(helper, mode, ptPath, binPath, "0x400000").Output()
		if err != nil {
			b.Fatal(err)
		}
		f := strings.Fields(string(out))
		cnt, _ := strconv.ParseUint(f[0], 10, 64)
		ns, _ := strconv.ParseUint(f[1], 10, 64)
		if want == 0 {
			want = cnt
		} else if d := int64(cnt) - int64(want); d < -16*int64(copies) || d > 16*int64(copies) {
			b.Fatalf("libipt %s decoded %d instructions, libipt's other decoder %d", mode, cnt, want)
		}
		return time.Duration(ns)
	}
	var one, two, insn, block time.Duration
	for i := 0; i < b.N; i++ {
		block += lib("bench-block")
		insn += lib("bench-insn")
		one += ours(1)
		two += ours(2)
	}
	rate := func(d time.Duration) float64 { return float64(want) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(float64(len(pt))/1e6, "MB")
	b.ReportMetric(rate(one), "ptjit-Minsn/s")
	b.ReportMetric(rate(two), "ptjit-j2-Minsn/s")
	b.ReportMetric(rate(insn), "libipt-insn-Minsn/s")
	b.ReportMetric(rate(block), "libipt-block-Minsn/s")
	b.ReportMetric(float64(block)/float64(one), "x-vs-block")
	b.ReportMetric(float64(one)/float64(two), "x-parallel")
}
