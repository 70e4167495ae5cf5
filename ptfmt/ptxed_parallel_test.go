package ptfmt

import (
	"bytes"
	"testing"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/internal/testenv"
)

// ptxedText decodes pt into ptxed --no-inst text with the given number of
// jobs.
func ptxedText(t testing.TB, pt []byte, img *decode.Image, jobs int) []byte {
	var out bytes.Buffer
	o := &PtxedOptions{NoInst: true, BlockDecoder: true, Jobs: jobs}
	p := &ptxedPrinter{o: o}
	bw := newBufWriter(&out)
	p.w = bw
	decode.ParallelFlow(pt, img, &decode.FlowConfig{}, p, false, jobs)
	bw.Flush()
	return out.Bytes()
}

// ptxedFile runs the ptxed front end (which renders chunks in parallel).
func ptxedFile(t testing.TB, jobs int) []byte {
	dir := testenv.ConformanceDir(t)
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
	want := diffBLines(testenv.ReadExpected(t, testenv.ConformanceDir(t)+"/synthetic/mid-ptxed.exp.gz"))
	if d := firstDiff(diffBLines(seq), want); d != "" {
		t.Fatalf("sequential output differs from libipt: %s", d)
	}
}

func TestParseRawImage(t *testing.T) {
	tests := []struct {
		arg             string
		file            string
		off, size, base uint64
		err             bool
	}{
		{arg: "a.bin:0x1000", file: "a.bin", base: 0x1000},
		{arg: "a.bin:16:0x1000", file: "a.bin", off: 16, base: 0x1000},
		{arg: "a.bin:0x10-0x20:4096", file: "a.bin", off: 0x10, size: 0x10, base: 4096},
		{arg: "c:/x.bin:0x1000", file: "c:/x.bin", base: 0x1000},
		{arg: "a.bin", err: true},
		{arg: "a.bin:", err: true},
		{arg: "a.bin:zz", err: true},
		{arg: "a.bin:0x20-0x10:0", err: true},
	}
	for _, tt := range tests {
		file, off, size, base, err := ParseRawImage(tt.arg)
		if (err != nil) != tt.err {
			t.Errorf("%q: err = %v", tt.arg, err)
			continue
		}
		if err == nil && (file != tt.file || off != tt.off || size != tt.size || base != tt.base) {
			t.Errorf("%q = %q %#x %#x %#x", tt.arg, file, off, size, base)
		}
	}
}

// loadSynthetic reads a synthetic trace of the corpus and its code image.
func loadSynthetic(t testing.TB, name string) ([]byte, *decode.Image) {
	pt, bin, base := testenv.Synthetic(t, name)
	img := decode.NewImage()
	if err := img.AddFile(bin, 0, 0, base); err != nil {
		t.Fatal(err)
	}
	return pt, img
}
