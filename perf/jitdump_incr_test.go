package perf

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestParseJitRecordsIncremental: a jitdump read as its JIT writes it, a
// few bytes more at each read, gives the same loads as the whole file read
// at once; a record with an impossible size is an error at its offset.
func TestParseJitRecordsIncremental(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jit-7.dump")
	w, err := CreateJitDump(path, 7, 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"f", "g", "f again at f's address"} {
		addr := uint64(0x7000 + 0x40*(i%2))
		w.Load(&JitLoad{Pid: 7, Tid: 7, VMA: addr, CodeAddr: addr, Index: uint64(i), Name: name,
			Code: bytes.Repeat([]byte{0x90 + byte(i)}, 5+i), Timestamp: 200 + uint64(i)})
	}
	if err := w.Close(300); err != nil {
		t.Fatal(err)
	}
	whole, err := OpenJitDump(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParseJitHeader(b, path)
	if err != nil || h != whole.Header {
		t.Fatalf("header %+v, err %v; want %+v", h, err, whole.Header)
	}
	var got []JitLoad
	off := int(h.TotalSize)
	for end := off; end <= len(b); end += 7 {
		loads, used, err := ParseJitRecords(b[off:end], int64(off), path)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, loads...)
		off += used
	}
	loads, used, err := ParseJitRecords(b[off:], int64(off), path)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, loads...)
	if off+used != len(b) || !reflect.DeepEqual(got, whole.Loads) {
		t.Fatalf("incremental read: %d of %d bytes, loads %+v\nwant %+v", off+used, len(b), got, whole.Loads)
	}
	bad := append([]byte(nil), b[h.TotalSize:]...)
	bad[4], bad[5], bad[6], bad[7] = 3, 0, 0, 0 // size 3 < a record header
	if _, _, err := ParseJitRecords(bad, int64(h.TotalSize), path); err == nil || err.Error() != path+": jitdump at 0x28: record id 0 size 3 invalid" {
		t.Errorf("bad record size: %v", err)
	}
}
