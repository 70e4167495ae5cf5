package decode

import (
	"bytes"
	"testing"
)

// ptxedText decodes pt into ptxed --no-inst text with the given number of
// jobs.
func ptxedText(t testing.TB, pt []byte, img *Image, jobs int) []byte {
	var out bytes.Buffer
	o := &PtxedOptions{NoInst: true, BlockDecoder: true, Jobs: jobs}
	p := &ptxedPrinter{o: o}
	bw := newBufWriter(&out)
	p.w = bw
	ParallelFlow(pt, img, &FlowConfig{}, p, false, jobs)
	bw.Flush()
	return out.Bytes()
}

// ptxedFile runs the ptxed front end (which renders chunks in parallel).
func ptxedFile(t testing.TB, jobs int) []byte {
	dir := conformanceDir(t)
	o, err := ParsePtxedArgs([]string{"--raw", dir + "/synthetic/mid.bin:0x400000", "--no-inst", "--pt", dir + "/synthetic/mid.pt"})
	if err != nil {
		t.Fatal(err)
	}
	o.Jobs = jobs
	var out bytes.Buffer
	if err := Ptxed(o, &out); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestParallelFlowMatchesSequential(t *testing.T) {
	pt, img := loadSynthetic(t, "mid")
	seq := ptxedText(t, pt, img, 1)
	for _, jobs := range []int{2, 3, 8} {
		par := ptxedText(t, pt, img, jobs)
		if !bytes.Equal(seq, par) {
			a, b := diffBLines(seq), diffBLines(par)
			t.Fatalf("jobs=%d: parallel output differs from sequential: %s", jobs, firstDiff(b, a))
		}
	}
	for _, jobs := range []int{2, 5} {
		if par := ptxedFile(t, jobs); !bytes.Equal(seq, par) {
			t.Fatalf("Ptxed jobs=%d: %s", jobs, firstDiff(diffBLines(par), diffBLines(seq)))
		}
	}
	want := diffBLines(readExpected(t, conformanceDir(t)+"/synthetic/mid-ptxed.exp.gz"))
	if d := firstDiff(diffBLines(seq), want); d != "" {
		t.Fatalf("sequential output differs from libipt: %s", d)
	}
}

func TestPsbOffsets(t *testing.T) {
	psb := psbPattern[:]
	buf := append(append(append([]byte{0, 0}, psb...), 0x02, 0x23), psb...)
	got := psbOffsets(buf)
	if len(got) != 2 || got[0] != 2 || got[1] != 20 {
		t.Fatalf("psbOffsets = %v, want [2 20]", got)
	}
	if len(psbOffsets(psb[:15])) != 0 {
		t.Fatal("found a PSB in a truncated pattern")
	}
}

func BenchmarkDecodeParallelMid(b *testing.B) {
	pt, img := loadSynthetic(b, "mid")
	for _, jobs := range []int{1, 2} {
		b.Run(map[int]string{1: "jobs1", 2: "jobs2"}[jobs], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var n uint64
				ParallelFlowChunks(pt, img, &FlowConfig{}, false, jobs,
					func() FlowSink { return &countSink{} },
					func(s FlowSink) { n += s.(*countSink).n })
				if n != 2137044 {
					b.Fatalf("decoded %d instructions, want 2137044", n)
				}
			}
			b.ReportMetric(2137044*float64(b.N)/b.Elapsed().Seconds()/1e6, "Minsn/s")
		})
	}
}

type countSink struct{ n uint64 }

func (s *countSink) Insn(in *FlowInsn, off, tsc uint64) { s.n++ }
func (s *countSink) Event(ev *Event, off uint64)        {}
func (s *countSink) Error(e *FlowError, kind string)    {}
