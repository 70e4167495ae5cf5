package perf

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzPerfDataReader feeds arbitrary bytes to the perf.data reader: it must
// return an error or a result, never panic, and never allocate more than a
// small multiple of the input (every size is checked against the file
// before allocation). Seeds are files the writer produces, in file and in pipe mode.
func FuzzPerfDataReader(f *testing.F) {
	dir := f.TempDir()
	seeds := []struct {
		name string
		cfg  PerfDataConfig
	}{
		{"thread.data", PerfDataConfig{Filter: "filter main", Cmdline: []string{"a", "b"}}},
		{"cpu.data", PerfDataConfig{PerCPU: true, MTC: true, MTCPeriod: 3, CYC: true}},
	}
	for _, s := range seeds {
		path := filepath.Join(dir, s.name)
		writeRoundTripFile(f, path, s.cfg)
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		// The same file as a crashed writer leaves it.
		u := append([]byte(nil), b...)
		u[48], u[49] = 0, 0
		for i := 50; i < 56; i++ {
			u[i] = 0
		}
		f.Add(u[:len(u)-37])
		// The same file in pipe mode (HEADER_ATTR records, data to the
		// end of the file: the pipe reader's parse path).
		f.Add(toPipeMode(f, b))
	}
	f.Add([]byte("PERFILE2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := NewPerfData(bytes.NewReader(data), int64(len(data)), "fuzz.data")
		if err != nil {
			if _, ok := err.(*PerfDataError); !ok {
				t.Fatalf("error %T is not a *PerfDataError: %v", err, err)
			}
			return
		}
		rr := p.Records()
		var r PerfRecord
		for {
			if err := rr.Next(&r); err != nil {
				if err != io.EOF {
					if _, ok := err.(*PerfDataError); !ok {
						t.Fatalf("record error %T is not a *PerfDataError: %v", err, err)
					}
				}
				break
			}
			if r.Offset < p.DataStart || r.Offset >= p.DataEnd {
				t.Fatalf("record at %#x outside data [%#x, %#x)", r.Offset, p.DataStart, p.DataEnd)
			}
		}
		tr, err := LoadPerfTrace(p)
		if err != nil {
			return
		}
		_ = tr.CheckIntelPT(p) // names the events: event-desc, EVENT_UPDATE
		total := 0
		for _, q := range tr.Queues {
			total += len(q.Data)
		}
		if total > len(data) {
			t.Fatalf("%d bytes of trace from a %d-byte file", total, len(data))
		}
	})
}
