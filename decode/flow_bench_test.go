package decode

import (
	"errors"
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
