package ptfmt

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/perf"
)

// TestOpenTraceInput: a raw trace reads as ReadTraceFile reads it, a
// perf.data is recognised by its content and gives its queues, a byte
// range of a perf.data is raw bytes, and a perf.data in pipe mode reads as
// the file-mode one.
func TestOpenTraceInput(t *testing.T) {
	dir := t.TempDir()
	psb := bytes.Repeat([]byte{0x02, 0x82}, 8)
	rawPath := filepath.Join(dir, "trace.pt")
	os.WriteFile(rawPath, append(psb, 0x02, 0x23), 0o644) // PSB, PSBEND

	pdPath := filepath.Join(dir, "perf.data")
	w, err := perf.CreatePerfData(pdPath, perf.PerfDataConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.SetCPU(0)
	w.Comm(100, 100, "main", true, 10)
	w.AuxTrace(100, -1, 20, append(psb, 0x02, 0x23))
	w.AuxTrace(101, -1, 30, append(psb, 0x02, 0x23, 0, 0, 0, 0, 0, 0))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	for _, arg := range []string{rawPath, rawPath + ":0x2", rawPath + ":0x2-0x6", pdPath + ":0x10-0x20"} {
		in, err := OpenTraceInput(arg, false, ReadTraceFile)
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		want, _ := ReadTraceFile(arg)
		if in.Trace != nil || !bytes.Equal(in.Raw, want) {
			t.Errorf("%s: read as perf.data %v, raw %x, want %x", arg, in.Trace != nil, in.Raw, want)
		}
		in.Close()
	}
	for _, lazy := range []bool{false, true} {
		in, err := OpenTraceInput(pdPath, lazy, ReadTraceFile)
		if err != nil {
			t.Fatal(err)
		}
		if in.Trace == nil || in.Raw != nil || len(in.Trace.Queues) != 2 || in.Name != pdPath {
			t.Fatalf("perf.data not read by its queues: %+v", in)
		}
		in.Close()
	}
	if _, err := OpenTraceInput(filepath.Join(dir, "none"), false, ReadTraceFile); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	// The PT event with no AUXTRACE record: no trace, named so.
	noAux := filepath.Join(dir, "noaux.data")
	w, err = perf.CreatePerfData(noAux, perf.PerfDataConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.Comm(100, 100, "main", true, 10)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "no Intel PT trace in " + noAux + " (events: intel_pt//): no AUXTRACE records"
	if _, err := OpenTraceInput(noAux, false, ReadTraceFile); err == nil || err.Error() != want {
		t.Errorf("perf.data without AUXTRACE: %v, want %q", err, want)
	}
	// A perf.data cut inside its header: an error naming file and offset.
	b, _ := os.ReadFile(pdPath)
	cut := filepath.Join(dir, "cut.data")
	os.WriteFile(cut, b[:40], 0o644)
	if _, err := OpenTraceInput(cut, false, ReadTraceFile); err == nil || !strings.HasPrefix(err.Error(), cut+": header at 0x0") {
		t.Errorf("cut perf.data: %v", err)
	}
}
