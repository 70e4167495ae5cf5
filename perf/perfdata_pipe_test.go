package perf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// toPipeMode converts a file-mode perf.data, as ptjit writes it, to pipe
// mode the way perf inject -o - does: the 16-byte pipe header, a
// HEADER_ATTR record per attr (the attr, then its ids), then the records.
// It lets the pipe reader be tested (and fuzzed) without perf.
func toPipeMode(t testing.TB, file []byte) []byte {
	t.Helper()
	p, err := NewPerfData(bytes.NewReader(file), int64(len(file)), "file.data")
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	out := le.AppendUint64(nil, perfMagic)
	out = le.AppendUint64(out, perfPipeHeaderSize)
	for _, a := range p.Attrs {
		size := 8 + len(a.Raw) + 8*len(a.IDs)
		out = le.AppendUint32(out, uint32(RecHeaderAttr))
		out = le.AppendUint16(out, 0)
		out = le.AppendUint16(out, uint16(size))
		out = append(out, a.Raw...)
		for _, id := range a.IDs {
			out = le.AppendUint64(out, id)
		}
	}
	return append(out, file[p.DataStart:p.DataEnd]...)
}

// loadBytes opens and loads a perf.data held in memory.
func loadBytes(t testing.TB, b []byte, name string) (*PerfData, *PerfTrace) {
	t.Helper()
	p, err := NewPerfData(bytes.NewReader(b), int64(len(b)), name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := LoadPerfTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	return p, tr
}

// samePerfTrace compares what a decoder reads from two perf.data files of
// one recording: attrs, PT configuration, queues and their bytes, and the
// sideband (records compared by type, time and parsed fields, not offset).
func samePerfTrace(t *testing.T, fp *PerfData, ft *PerfTrace, pp *PerfData, pt *PerfTrace) {
	t.Helper()
	if len(fp.Attrs) != len(pp.Attrs) {
		t.Fatalf("%d attrs, file mode has %d", len(pp.Attrs), len(fp.Attrs))
	}
	for i := range fp.Attrs {
		a, b := fp.Attrs[i], pp.Attrs[i]
		if a.Type != b.Type || a.Config != b.Config || a.SampleType != b.SampleType || a.Flags != b.Flags || !reflect.DeepEqual(a.IDs, b.IDs) {
			t.Errorf("attr %d: pipe %+v, file %+v", i, b, a)
		}
	}
	if !reflect.DeepEqual(ft.Info, pt.Info) || ft.TimeConv != pt.TimeConv || ft.TSCEnabled() != pt.TSCEnabled() {
		t.Errorf("PT configuration differs: pipe %+v %+v, file %+v %+v", pt.Info, pt.TimeConv, ft.Info, ft.TimeConv)
	}
	if len(ft.Queues) != len(pt.Queues) {
		t.Fatalf("%d queues, file mode has %d", len(pt.Queues), len(ft.Queues))
	}
	for i, q := range ft.Queues {
		r := pt.Queues[i]
		if q.Idx != r.Idx || q.Tid != r.Tid || q.CPU != r.CPU || len(q.Buffers) != len(r.Buffers) || !bytes.Equal(q.Data, r.Data) {
			t.Errorf("queue %d: pipe %v (%d buffers, %d bytes), file %v (%d buffers, %d bytes)",
				i, r, len(r.Buffers), len(r.Data), q, len(q.Buffers), len(q.Data))
		}
	}
	if len(ft.Sideband) != len(pt.Sideband) {
		t.Fatalf("%d sideband records, file mode has %d", len(pt.Sideband), len(ft.Sideband))
	}
	for i := range ft.Sideband {
		a, b := ft.Sideband[i], pt.Sideband[i]
		if a.Type != b.Type || a.ID != b.ID || !bytes.Equal(a.Raw, b.Raw) {
			t.Errorf("sideband %d: pipe %v at %#x, file %v at %#x", i, b.Type, b.Offset, a.Type, a.Offset)
		}
	}
}

// TestPipeModeReadsLikeFileMode converts files the writer produces to
// pipe mode by hand; the pipe reader must give back what the file reader
// does.
func TestPipeModeReadsLikeFileMode(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  PerfDataConfig
	}{
		{"per-thread", PerfDataConfig{Filter: "filter main", Cmdline: []string{"a", "b"}}},
		{"per-cpu", PerfDataConfig{PerCPU: true, MTC: true, MTCPeriod: 3, CYC: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.data")
			writeRoundTripFile(t, path, c.cfg)
			file, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fp, ft := loadBytes(t, file, "file.data")
			pipe := toPipeMode(t, file)
			pp, pt := loadBytes(t, pipe, "pipe.data")
			if !pp.Pipe || fp.Pipe {
				t.Fatalf("Pipe: file mode %v, pipe mode %v", fp.Pipe, pp.Pipe)
			}
			samePerfTrace(t, fp, ft, pp, pt)
			if k, _ := Sniff(bytes.NewReader(pipe)); k != PerfDataPipe {
				t.Errorf("Sniff(pipe) = %v", k)
			}
			if k, _ := Sniff(bytes.NewReader(file)); k != PerfDataFile {
				t.Errorf("Sniff(file) = %v", k)
			}

			// Cut inside the last record: the records before it are read.
			cut := pipe[:len(pipe)-5]
			cp, err := NewPerfData(bytes.NewReader(cut), int64(len(cut)), "cut.data")
			if err != nil {
				t.Fatal(err)
			}
			ct, err := LoadPerfTrace(cp)
			if err != nil || !ct.Truncated {
				t.Fatalf("cut pipe file: %v, Truncated %v", err, ct != nil && ct.Truncated)
			}
		})
	}
}

// TestPipeModeErrors: malformed pipe-mode files give a *PerfDataError with
// the offset, never a panic.
func TestPipeModeErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	writeRoundTripFile(t, path, PerfDataConfig{})
	file, _ := os.ReadFile(path)
	pipe := toPipeMode(t, file)
	le := binary.LittleEndian
	noAttr := append(append([]byte(nil), pipe[:16]...), file[52:]...) // header then garbage
	badAttr := append([]byte(nil), pipe...)
	le.PutUint32(badAttr[16+8+4:], 7) // attr.size 7
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"no attr", pipe[:16], "header at 0x0: pipe-mode perf.data has no HEADER_ATTR record"},
		{"garbage", noAttr, "pipe.data: record at 0x10"},
		{"attr size", badAttr, "pipe.data: record at 0x10: HEADER_ATTR attr size 7"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := NewPerfData(bytes.NewReader(c.data), int64(len(c.data)), "pipe.data")
			var pe *PerfDataError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

// TestPipeModeFromPerf reads pipe-mode files perf itself writes: perf
// inject -o - of a ptjit perf.data must read as the file does, and
// perf record -o - of a software event is recognised as holding no PT.
func TestPipeModeFromPerf(t *testing.T) {
	perf := skipIfNoPerf(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "perf.data")
	writeRoundTripFile(t, path, PerfDataConfig{PerCPU: true, MTC: true, MTCPeriod: 3})
	pipe, err := exec.Command(perf, "inject", "-i", path, "-o", "-").Output()
	if err != nil {
		t.Fatalf("perf inject -o -: %v", err)
	}
	file, _ := os.ReadFile(path)
	fp, ft := loadBytes(t, file, "file.data")
	pp, pt := loadBytes(t, pipe, "pipe.data")
	if !pp.Pipe {
		t.Fatal("perf inject -o - output not read as pipe mode")
	}
	samePerfTrace(t, fp, ft, pp, pt)

	for _, mode := range []string{"file", "pipe"} {
		t.Run("cpu-clock-"+mode, func(t *testing.T) {
			out := filepath.Join(dir, mode+".data")
			args := []string{"record", "-q", "-e", "cpu-clock", "-c", "1000000", "-o", out, "--", "/bin/true"}
			if mode == "pipe" {
				args[7] = "-"
			}
			cmd := exec.Command(perf, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if mode == "pipe" {
				f, err := os.Create(out)
				if err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				cmd.Stdout = f
			}
			if err := cmd.Run(); err != nil {
				t.Fatalf("perf record: %v\n%s", err, stderr.Bytes())
			}
			p, err := OpenPerfData(out)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if p.Pipe != (mode == "pipe") {
				t.Errorf("Pipe = %v", p.Pipe)
			}
			tr, err := LoadPerfTrace(p)
			if err != nil {
				t.Fatal(err)
			}
			err = tr.CheckIntelPT(p)
			want := "no Intel PT trace in " + out + " (events: cpu-clock)"
			if !errors.Is(err, ErrNoPTTrace) || err.Error() != want {
				t.Fatalf("CheckIntelPT: %v, want %q", err, want)
			}
		})
	}
}
