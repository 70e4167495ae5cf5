package perf

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// memBytes is a memReader over b (what recording's mapped perf.data is).
type memBytes struct {
	*bytes.Reader
	b []byte
}

func (m memBytes) Bytes() []byte { return m.b }

// TestRecordsFromMemory: records read from a reader whose bytes are in
// memory (taken where they are) equal those read through ReadAt (copied
// through the reader's window), record by record and error by error, on
// a whole file and on every cut of it.
func TestRecordsFromMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	writeRoundTripFile(t, path, PerfDataConfig{})
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	walk := func(r io.ReaderAt, data []byte) (string, error) {
		p, err := NewPerfData(r, int64(len(data)), "mem.data")
		if err != nil {
			return "", err
		}
		var out bytes.Buffer
		rr := p.Records()
		for {
			var rec PerfRecord
			err := rr.Next(&rec)
			if err != nil {
				return out.String(), err
			}
			fmt.Fprintf(&out, "%#x %v %d %x %+v\n", rec.Offset, rec.Type, rec.Size, rec.Raw, rec.Auxtrace)
		}
	}
	records := 0
	for cut := len(whole); cut > 0; cut -= 7 {
		data := whole[:cut]
		want, werr := walk(bytes.NewReader(data), data)
		got, gerr := walk(memBytes{bytes.NewReader(data), data}, data)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("cut at %d: from memory\n%s(%v)\nthrough ReadAt\n%s(%v)", cut, got, gerr, want, werr)
		}
		if cut == len(whole) {
			records = bytes.Count([]byte(want), []byte("\n"))
			if !reflect.DeepEqual(gerr, werr) || records < 10 {
				t.Fatalf("whole file: %d records, error %v", records, gerr)
			}
		}
	}
	// Bytes gone (the file closed): the reader falls back to ReadAt.
	want, werr := walk(bytes.NewReader(whole), whole)
	got, gerr := walk(memBytes{bytes.NewReader(whole), nil}, whole)
	if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
		t.Fatalf("no bytes: %s(%v), want %s(%v)", got, gerr, want, werr)
	}
}
