package decode

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"

	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptpkt"
)

// readerOnly hides the BytesTrace fast path, so windows are read with
// ReadAt into a buffer, as from a perf.data queue.
type readerOnly struct{ b BytesTrace }

func (r readerOnly) ReadAt(p []byte, off int64) (int, error) { return r.b.ReadAt(p, off) }
func (r readerOnly) Size() int64                             { return r.b.Size() }

func TestForEachWindowCuts(t *testing.T) {
	// PSBs every 10,000 bytes of PAD; windows are at least 16 KiB: each
	// stops right before a PSB (with room for its header after it) and the
	// windows cover the trace exactly once.
	var tr []byte
	for i := 0; i < 12; i++ {
		tr = append(tr, ptpkt.PSBPattern[:]...)
		tr = append(tr, make([]byte, 10000-len(ptpkt.PSBPattern))...)
	}
	var starts []uint64
	var total uint64
	err := ForEachWindow(readerOnly{BytesTrace(tr)}, 1, func(pt []byte, stop, base uint64) {
		starts = append(starts, base)
		total += stop
		if base%10000 != 0 || !bytes.HasPrefix(pt, ptpkt.PSBPattern[:]) {
			t.Errorf("window at %d does not start with a PSB", base)
		}
		if stop < uint64(len(pt)) && !bytes.HasPrefix(pt[stop:], ptpkt.PSBPattern[:]) {
			t.Errorf("window at %d stops at %d, not at a PSB", base, stop)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if total != uint64(len(tr)) || len(starts) < 5 {
		t.Errorf("windows at %v cover %d bytes of %d", starts, total, len(tr))
	}
	// A failing reader is an error with the offset.
	if err := ForEachWindow(failing{size: 50000}, 1000, func([]byte, uint64, uint64) {}); err == nil {
		t.Error("no error from a failing reader")
	}
}

// TestForEachWindowBuf: the buffer ForEachWindowBuf returns is the one
// it read the windows into, reused by the next call, never the memory of
// a BytesTrace.
func TestForEachWindowBuf(t *testing.T) {
	var tr []byte
	for i := 0; i < 12; i++ {
		tr = append(tr, ptpkt.PSBPattern[:]...)
		tr = append(tr, make([]byte, 10000-len(ptpkt.PSBPattern))...)
	}
	var buf []byte
	var first *byte
	for i := 0; i < 2; i++ {
		var err error
		buf, err = ForEachWindowBuf(readerOnly{BytesTrace(tr)}, 1, buf, func(pt []byte, stop, base uint64) {
			if first == nil {
				first = &pt[0]
			} else if &pt[0] != first {
				t.Errorf("call %d: window at %d read into other memory", i, base)
			}
		})
		if err != nil || cap(buf) == 0 {
			t.Fatalf("call %d: %v, buffer of %d bytes", i, err, cap(buf))
		}
	}
	got, err := ForEachWindowBuf(BytesTrace(tr), 1, nil, func([]byte, uint64, uint64) {})
	if err != nil || got != nil {
		t.Errorf("over a BytesTrace: buffer of %d bytes returned (%v)", cap(got), err)
	}
}

type failing struct{ size int64 }

func (f failing) ReadAt(p []byte, off int64) (int, error) { return 0, io.ErrUnexpectedEOF }
func (f failing) Size() int64                             { return f.size }

// A perf.data queue read buffer by buffer is the same stream as the one
// LoadPerfTrace assembles in memory.
func TestQueueReaderMatchesData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	w, err := perf.CreatePerfData(path, perf.PerfDataConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	for i := 0; i < 20; i++ {
		chunk := append(append([]byte(nil), ptpkt.PSBPattern[:]...), bytes.Repeat([]byte{byte(i + 1)}, 100+i*37)...)
		w.AuxTrace(77, -1, uint64(1000+i), chunk)
		want = append(want, chunk...)
		if pad := (8 - len(chunk)%8) % 8; pad > 0 {
			want = append(want, make([]byte, pad)...)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p, err := perf.OpenPerfData(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	eager, err := perf.LoadPerfTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	lazy, err := perf.LoadPerfTraceLazy(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(lazy.Queues) != 1 || lazy.Queues[0].Data != nil {
		t.Fatalf("lazy load: %d queues, data loaded: %v", len(lazy.Queues), lazy.Queues[0].Data != nil)
	}
	r := lazy.Queues[0].Reader(p)
	if r.Size() != int64(len(want)) || !bytes.Equal(eager.Queues[0].Data, want) {
		t.Fatalf("sizes: lazy %d, eager %d, written %d", r.Size(), len(eager.Queues[0].Data), len(want))
	}
	// Reads at every alignment, across buffer boundaries.
	for off := 0; off < len(want); off += 97 {
		for _, n := range []int{1, 50, 300, len(want) - off} {
			n = min(n, len(want)-off)
			got := make([]byte, n)
			if m, err := r.ReadAt(got, int64(off)); m != n || (err != nil && err != io.EOF) {
				t.Fatalf("ReadAt(%d, %d) = %d, %v", off, n, m, err)
			}
			if !bytes.Equal(got, want[off:off+n]) {
				t.Fatalf("ReadAt(%d, %d): bytes differ", off, n)
			}
		}
	}
}
