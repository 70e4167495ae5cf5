package db

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/ptjit/ptjit/clock"
)

// TestBatchedRows: the writer holds versions rows and new pages for
// multi-row INSERTs (batch.go). Whatever it held, the recording reads back
// what was recorded: every version's bytes, and its end as recorded —
// ended while its row was held, after the row was written (more than
// rowBatch versions later, and after a commit), twice (the first end
// counts, as the UPDATE's end_tsc IS NULL makes it), inexact or not, or
// never. Another record (a thread start) between a version and its end
// writes the held rows first. The expected values come from the recorded
// sequence, not from the writer.
func TestBatchedRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(n int) clock.Stamp { return clock.Stamp{TSC: uint64(n), MonoNS: int64(n)} }
	type want struct {
		data    []byte
		end     int // 0: none
		inexact bool
	}
	wants := map[int64]*want{}
	r.ProcessStart(10, 1, at(1))
	regs := []int64{r.NewRegion(10, 0x10000, 4*PageSize, at(2)), r.NewRegion(10, 0x20000, 2*PageSize, at(2))}
	const n = 3*rowBatch + 7
	var ids []int64
	threads := 1 // the main thread
	r.ThreadStart(10, 10, at(1))
	for i := 0; i < n; i++ {
		reg, addr, pages := regs[i%2], uint64(0x10000), 4
		if i%2 == 1 {
			addr, pages = 0x20000, 2
		}
		data := make([]byte, pages*PageSize)
		for p := 0; p < pages; p++ {
			// one page changes per version, the others repeat
			b := byte(p)
			if p == i%pages {
				b = byte(i)
			}
			copy(data[p*PageSize:], bytes.Repeat([]byte{b, byte(p), 0xcc}, PageSize/3+1)[:PageSize])
		}
		id, _ := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: addr, Size: uint64(len(data)), Data: append([]byte(nil), data...), At: at(10 + 10*i), Cause: "mprotect"})
		wants[id] = &want{data: data}
		ids = append(ids, id)
		switch {
		case i%5 == 0 && i > 0:
			// the previous version ends while its row is held
			prev := ids[i-1]
			r.EndVersion(prev, at(11+10*i))
			if wants[prev].end == 0 { // else ignored: the first end counts
				wants[prev].end = 11 + 10*i
			}
		case i%7 == 0 && i > 2*rowBatch:
			// a version from far back ends: its row was written
			old := ids[i-2*rowBatch]
			if wants[old].end == 0 {
				r.EndVersionInexact(old, at(12+10*i))
				wants[old].end, wants[old].inexact = 12+10*i, true
			}
		case i%11 == 0:
			// another record between the version and its end
			r.ThreadStart(100+i, 10, at(13+10*i))
			threads++
			r.EndVersion(id, at(14+10*i))
			wants[id].end = 14 + 10*i
			r.EndVersion(id, at(15+10*i)) // ignored: the first end counts
		}
		if i == rowBatch+3 {
			if err := r.Flush(); err != nil { // a commit in the middle
				t.Fatal(err)
			}
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	vs, err := d.Versions(VersionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != n {
		t.Fatalf("%d versions, want %d", len(vs), n)
	}
	for i := range vs {
		v := &vs[i]
		w := wants[v.ID]
		if w == nil {
			t.Fatalf("version %d was not recorded", v.ID)
		}
		got, err := d.VersionData(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, w.data) {
			t.Errorf("version %d: bytes differ from what was recorded", v.ID)
		}
		switch {
		case w.end == 0 && v.HasEnd:
			t.Errorf("version %d: end %d, want none", v.ID, v.End.TSC)
		case w.end != 0 && (!v.HasEnd || v.End.TSC != uint64(w.end) || v.End.MonoNS != int64(w.end) || v.EndInexact != w.inexact):
			t.Errorf("version %d: end %v (has %v, inexact %v), want %d (inexact %v)", v.ID, v.End, v.HasEnd, v.EndInexact, w.end, w.inexact)
		}
	}
	ths, err := d.Threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(ths) != threads {
		t.Errorf("%d threads recorded, want %d", len(ths), threads)
	}
}

// TestWaitedCounts: the tracker waits for the writer only at the
// back-pressure bound, and Waited says how often and how long (the run
// summary reports it). A writer held up by a slow record makes the second
// push past a 5-byte bound wait once; pushes under the bound never wait.
func TestWaitedCounts(t *testing.T) {
	r, err := Create(filepath.Join(t.TempDir(), "code.db"), Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	r.pushOpWithin(op{fn: func(*writer) error { <-release; return nil }, bytes: 10}, 5)
	r.pushOpWithin(op{fn: func(*writer) error { return nil }}, 1<<30)
	if n, _ := r.Waited(); n != 0 {
		t.Fatalf("waited %d times under the bound", n)
	}
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	r.pushOpWithin(op{fn: func(*writer) error { return nil }, bytes: 1}, 5)
	n, d := r.Waited()
	if n != 1 || d <= 0 {
		t.Fatalf("Waited() = %d, %v; want 1 wait of some time", n, d)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
