package db

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/ptjit/ptjit/clock"
)

// TestAddVersionPages records a version from a base and its changed pages
// alone, with the base still held for a multi-row INSERT and with it
// written (after a Flush), chained, and reads every version back whole.
func TestAddVersionPages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(10, 1, clock.Stamp{TSC: 1})
	const n = 8
	reg := r.NewRegion(10, 0x10000, n*PageSize, clock.Stamp{TSC: 2})
	at := func(tsc uint64) clock.Stamp { return clock.Stamp{TSC: tsc, MonoNS: int64(tsc)} }
	v := Version{Region: reg, PID: 10, TID: 10, Addr: 0x10000, Size: n * PageSize, Cause: "mprotect"}
	want := [][]byte{}
	img := make([]byte, 0, n*PageSize)
	for i := 0; i < n; i++ {
		img = append(img, page(byte(i+1), 1)...)
	}
	v.Data, v.At = append([]byte(nil), img...), at(10)
	base, _ := r.AddVersion(v)
	want = append(want, append([]byte(nil), img...))
	for k, changed := range [][]int{{2}, {0, 7}, {3, 4, 5}} {
		if k == 1 {
			// the base written, not held
			if err := r.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		var runs []PageRun
		for _, p := range changed {
			b := page(byte(0x40+16*k+p), 1)
			copy(img[p*PageSize:], b)
			runs = append(runs, PageRun{Addr: v.Addr + uint64(p*PageSize), Data: b})
		}
		v.At = at(uint64(20 + k))
		id, _ := r.AddVersionPages(v, base, runs)
		base = id
		want = append(want, append([]byte(nil), img...))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	vs, err := d.Versions(VersionFilter{PID: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != len(want) {
		t.Fatalf("%d versions, want %d", len(vs), len(want))
	}
	for i := range vs {
		got, err := d.VersionData(&vs[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want[i]) {
			t.Errorf("version %d: bytes differ from what was recorded", i+1)
		}
	}
}
