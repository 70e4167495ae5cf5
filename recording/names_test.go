package recording

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/perf"
)

// TestJitdumpNamesByContent: a synthetic jitdump (perf.JitDumpWriter) with
// a reused address — f loaded at 0x7100, then g at the same address with
// other bytes, then h in a second page that stays — read at one stop after
// both code versions were made (the worst case for placing by time). Each
// load's name goes to the version holding exactly its bytes: f to v1, g
// to v2, h to both (its bytes did not change); a load whose bytes no
// version holds is not placed; a perf-map line read at the same stop
// names the version valid before the read (v2), as before.
func TestJitdumpNamesByContent(t *testing.T) {
	dir := t.TempDir()
	const pid, base = 10, 0x7000
	fCode := []byte{0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3}       // push rbp; mov rbp,rsp; pop rbp; ret
	gCode := []byte{0x48, 0x8d, 0x47, 0x07, 0xc3, 0x90}       // lea rax,[rdi+7]; ret; nop
	hCode := []byte{0x48, 0x89, 0xf8, 0x48, 0xf7, 0xd8, 0xc3} // mov rax,rdi; neg rax; ret
	jd := filepath.Join(dir, "jit-10.dump")
	w, err := perf.CreateJitDump(jd, pid, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []struct {
		addr uint64
		name string
		code []byte
	}{{base + 0x100, "f", fCode}, {base + 0x1100, "h", hCode}, {base + 0x100, "g", gCode}, {base + 0x300, "nowhere", fCode}} {
		w.Load(&perf.JitLoad{Pid: pid, Tid: pid, VMA: l.addr, CodeAddr: l.addr, Index: uint64(i), Name: l.name, Code: l.code, Timestamp: uint64(10 + i)})
	}
	if err := w.Close(20); err != nil {
		t.Fatal(err)
	}
	dump, err := perf.OpenJitDump(jd)
	if err != nil {
		t.Fatal(err)
	}

	page := func(code []byte, off int, more ...[]byte) []byte {
		b := bytes.Repeat([]byte{0xcc}, 2*db.PageSize)
		copy(b[off:], code)
		if len(more) > 0 {
			copy(b[db.PageSize+0x100:], more[0])
		}
		return b
	}
	r, err := db.Create(filepath.Join(dir, "code.db"), db.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(pid, 1, at(1))
	r.ThreadStart(pid, pid, at(1))
	reg := r.NewRegion(pid, base, 2*db.PageSize, at(2))
	v1, _ := r.AddVersion(db.Version{Region: reg, PID: pid, TID: pid, Addr: base, Size: 2 * db.PageSize,
		Data: page(fCode, 0x100, hCode), At: at(3), Cause: "mprotect"})
	r.EndVersion(v1, at(5))
	r.AddVersion(db.Version{Region: reg, PID: pid, TID: pid, Addr: base, Size: 2 * db.PageSize,
		Data: page(gCode, 0x100, hCode), At: at(5), Cause: "mprotect"})
	for _, l := range dump.Loads {
		r.Name(db.NameInfo{PID: pid, Addr: l.CodeAddr, Size: uint64(len(l.Code)), Name: l.Name,
			Source: "jitdump " + jd, Code: l.Code, At: at(8), After: 0})
	}
	r.Name(db.NameInfo{PID: pid, Addr: base + 0x100, Size: 6, Name: "map", Source: "perf-map /tmp/perf-10.map", At: at(8)})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	cdb, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	names, err := LoadNames(cdb, pid, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, row := range names.Rows() {
		got[row.Name] = row.Versions
	}
	regS := func(v int) string { return fmt.Sprintf("%d.%d", reg, v) }
	want := map[string][]string{"f": {regS(1)}, "g": {regS(2)}, "h": {regS(1), regS(2)}, "nowhere": nil, "map": {regS(2)}}
	for name, w := range want {
		if g := got[name]; len(g) != len(w) || (len(w) > 0 && g[0] != w[0]) || (len(w) > 1 && g[1] != w[1]) {
			t.Errorf("%s: versions %v, want %v", name, g, w)
		}
	}
	if placed, unplaced := names.Placed(); placed != 4 || unplaced != 1 {
		t.Errorf("placed %d, unplaced %d; want 4, 1", placed, unplaced)
	}
	for vno, want := range map[int]string{1: "f+0x2", 2: "map+0x2"} {
		if name, off, ok := names.Lookup(reg, vno, base+0x102); !ok || nameOff(name, off) != want {
			t.Errorf("v%d at %#x: %q %v, want %s", vno, base+0x102, nameOff(name, off), ok, want)
		}
	}
}

// TestPerfMapNamesAfterEnd: perf-map lines read after the code's last
// version ended (a map exit flushed after the JIT unmapped its code) name
// the last version there before the read, and the earlier ones with the
// same bytes: a at +0x100 (in v1 and v2) and b at +0x200 (in v2 only),
// read at 9 after the region ended at 6. A line read before any version
// there still names the next one (c, read at 1 for v1); a line for an
// address no version ever held names nothing.
func TestPerfMapNamesAfterEnd(t *testing.T) {
	dir := t.TempDir()
	const pid, base = 10, 0x7000
	aCode := []byte{0x48, 0x8d, 0x47, 0x07, 0xc3}       // lea rax,[rdi+7]; ret
	bCode := []byte{0x48, 0x89, 0xf8, 0xc3}             // mov rax,rdi; ret
	cCode := []byte{0x48, 0x89, 0xf8, 0x48, 0xf7, 0xd8} // mov rax,rdi; neg rax
	v1 := bytes.Repeat([]byte{0xcc}, db.PageSize)
	copy(v1[0x100:], aCode)
	copy(v1[0x300:], cCode)
	v2 := append([]byte(nil), v1...)
	copy(v2[0x200:], bCode)
	r, err := db.Create(filepath.Join(dir, "code.db"), db.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(pid, 1, at(1))
	r.ThreadStart(pid, pid, at(1))
	reg := r.NewRegion(pid, base, db.PageSize, at(2))
	id1, _ := r.AddVersion(db.Version{Region: reg, PID: pid, TID: pid, Addr: base, Size: db.PageSize, Data: v1, At: at(3), Cause: "mprotect"})
	r.EndVersion(id1, at(4))
	id2, _ := r.AddVersion(db.Version{Region: reg, PID: pid, TID: pid, Addr: base, Size: db.PageSize, Data: v2, At: at(4), Cause: "mprotect"})
	r.EndVersion(id2, at(6))
	r.EndRegion(reg, at(6))
	src := "perf-map /tmp/perf-10.map"
	r.Name(db.NameInfo{PID: pid, Addr: base + 0x300, Size: uint64(len(cCode)), Name: "c", Source: src, At: at(1)})
	for _, n := range []struct {
		off  uint64
		size int
		name string
	}{{0x100, len(aCode), "a"}, {0x200, len(bCode), "b"}, {0x2000, 4, "nowhere"}} {
		r.Name(db.NameInfo{PID: pid, Addr: base + n.off, Size: uint64(n.size), Name: n.name, Source: src, At: at(9), After: 6})
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cdb, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	names, err := LoadNames(cdb, pid, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, row := range names.Rows() {
		got[row.Name] = fmt.Sprint(row.Versions)
	}
	v := func(vs ...int) string {
		var s []string
		for _, n := range vs {
			s = append(s, fmt.Sprintf("%d.%d", reg, n))
		}
		return fmt.Sprint(s)
	}
	for name, want := range map[string]string{"a": v(1, 2), "b": v(2), "c": v(1, 2), "nowhere": v()} {
		if got[name] != want {
			t.Errorf("%s: versions %s, want %s", name, got[name], want)
		}
	}
	if name, off, ok := names.Lookup(reg, 2, base+0x203); !ok || nameOff(name, off) != "b+0x3" {
		t.Errorf("v2 at +0x203: %q %v, want b+0x3", nameOff(name, off), ok)
	}
}
