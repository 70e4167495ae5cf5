package decode

import (
	"errors"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
)

// loadSynthetic returns a synthetic trace of the corpus and its image.
func loadSynthetic(b testing.TB, name string) ([]byte, *Image) {
	pt, bin, base := testenv.Synthetic(b, name)
	img := NewImage()
	if err := img.AddFile(bin, 0, 0, base); err != nil {
		b.Fatal(err)
	}
	return pt, img
}

// countFlow decodes the whole trace and returns the number of instructions.
func countFlow(pt []byte, img *Image) (n uint64, err error) {
	d := NewFlowDecoder(pt, img, nil)
	for {
		st, err := d.SyncForward()
		if err != nil {
			if errors.Is(err, ErrFlowEOS) {
				return n, nil
			}
			return n, err
		}
		var in FlowInsn
		for {
			for err == nil && st.EventPending() {
				var ev Event
				st, err = d.Event(&ev)
			}
			if err != nil {
				break
			}
			if st.EOS() {
				err = ErrFlowEOS
				break
			}
			st, err = d.Next(&in)
			if err != nil {
				break
			}
			n++
		}
		if !errors.Is(err, ErrFlowEOS) {
			return n, err
		}
	}
}

func BenchmarkDecodeFlowMid(b *testing.B) {
	pt, img := loadSynthetic(b, "mid")
	b.ReportAllocs()
	b.ResetTimer()
	var n uint64
	for i := 0; i < b.N; i++ {
		var err error
		n, err = countFlow(pt, img)
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Minsn/s")
	if n != 2137044 {
		b.Fatalf("decoded %d instructions, SUMMARY.txt says 2137044", n)
	}
}

// insnCount counts instructions and takes no blocks: the
// instruction-by-instruction path.
type insnCount struct{ n uint64 }

func (s *insnCount) Insn(in *FlowInsn, off, tsc uint64) { s.n++ }
func (s *insnCount) Event(ev *Event, off uint64)        {}
func (s *insnCount) Error(e *FlowError, kind ErrorKind) {}

// BenchmarkDecodeBlocksMid decodes synthetic/mid on one core through the
// block path (what --stat and --calls use) and instruction by instruction,
// alternating, and reports both rates and their ratio.
func BenchmarkDecodeBlocksMid(b *testing.B) {
	pt, img := loadSynthetic(b, "mid")
	var blk, insn time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var c countSink
		RunFlow(NewFlowDecoder(pt, img, nil), &c, false)
		blk += time.Since(t0)
		t0 = time.Now()
		var r insnCount
		RunFlow(NewFlowDecoder(pt, img, nil), &r, false)
		insn += time.Since(t0)
		if c.n != 2137044 || r.n != 2137044 {
			b.Fatalf("decoded %d (blocks) and %d instructions, SUMMARY.txt says 2137044", c.n, r.n)
		}
	}
	rate := func(d time.Duration) float64 { return 2137044 * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(rate(blk), "blocks-Minsn/s")
	b.ReportMetric(rate(insn), "insns-Minsn/s")
	b.ReportMetric(float64(insn)/float64(blk), "x-blocks")
}
