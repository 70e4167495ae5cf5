package decode

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// loadSynthetic returns the synthetic/mid trace and its image (see
// conformance/libipt/synthetic/SUMMARY.txt: mid.bin at 0x400000).
func loadSynthetic(b testing.TB, name string) ([]byte, *Image) {
	dir := testenv.ConformanceDir(b)
	pt, err := os.ReadFile(filepath.Join(dir, "synthetic", name+".pt"))
	if err != nil {
		b.Fatal(err)
	}
	img := NewImage()
	if err := img.AddFile(filepath.Join(dir, "synthetic", name+".bin"), 0, 0, 0x400000); err != nil {
		b.Fatal(err)
	}
	return pt, img
}

// countFlow decodes the whole trace and returns the number of instructions.
func countFlow(pt []byte, img *Image) (n uint64, err Code) {
	d := NewFlowDecoder(pt, img, nil)
	for {
		st := d.SyncForward()
		if st < 0 {
			if st == -int(CodeEOS) {
				return n, 0
			}
			return n, Code(-st)
		}
		var in FlowInsn
		for {
			for st >= 0 && st&stEventPending != 0 {
				var ev Event
				st = d.Event(&ev)
			}
			if st < 0 {
				break
			}
			if st&stEOS != 0 {
				st = -int(CodeEOS)
				break
			}
			st = d.Next(&in)
			if st < 0 {
				break
			}
			n++
		}
		if st != -int(CodeEOS) {
			return n, Code(-st)
		}
	}
}

func BenchmarkDecodeFlowMid(b *testing.B) {
	pt, img := loadSynthetic(b, "mid")
	b.ReportAllocs()
	b.ResetTimer()
	var n uint64
	for i := 0; i < b.N; i++ {
		var err Code
		n, err = countFlow(pt, img)
		if err != 0 {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Minsn/s")
	if n != 2137044 {
		b.Fatalf("decoded %d instructions, SUMMARY.txt says 2137044", n)
	}
}
