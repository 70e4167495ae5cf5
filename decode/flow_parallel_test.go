package decode

import (
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

func TestPsbOffsets(t *testing.T) {
	psb := ptpkt.PSBPattern[:]
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

// Block makes countSink take blocks, as ptjit decode --stat does.
func (s *countSink) Block(b *FlowBlock, off, tsc uint64) { s.n += uint64(b.N) }
func (s *countSink) Event(ev *Event, off uint64)         {}
func (s *countSink) Error(e *FlowError, kind ErrorKind)  {}
