package db

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
)

func page(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n*PageSize) }

func TestRecordAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog", "a b"}, Cwd: "/x", TSCHz: 2e9, Start: clock.Stamp{TSC: 100, MonoNS: 1}})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(10, 1, clock.Stamp{TSC: 100, MonoNS: 1})
	r.Exec(10, "/bin/prog", []string{"prog", "a b"}, clock.Stamp{TSC: 101, MonoNS: 2})
	r.ThreadStart(10, 10, clock.Stamp{TSC: 101, MonoNS: 2})
	r.ThreadName(10, "prog")
	fm := r.FileMap(FileMapping{PID: 10, TID: 10, Addr: 0x400000, Size: 0x1000, Path: "/bin/prog", Dev: 1, Inode: 2, BuildID: []byte{1, 2}, Cause: "exec", At: clock.Stamp{TSC: 101, MonoNS: 2}})
	reg := r.NewRegion(10, 0x7000, 3*PageSize, clock.Stamp{TSC: 110, MonoNS: 10})
	data1 := append(page(0xaa, 2), page(0xbb, 1)...)
	v1, n1 := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: 0x7000, Size: 3 * PageSize, Data: data1, At: clock.Stamp{TSC: 110, MonoNS: 10}, Cause: "mprotect", IP: 0x401234})
	r.EndVersion(v1, clock.Stamp{TSC: 120, MonoNS: 20})
	data2 := append(page(0xaa, 2), page(0xcc, 1)...)
	v2, n2 := r.AddVersion(Version{Region: reg, PID: 10, TID: 11, Addr: 0x7000, Size: 3 * PageSize, Data: data2, At: clock.Stamp{TSC: 130, MonoNS: 30}, Cause: "mprotect", IP: 0x401234})
	r.AddWrite(Write{PID: 10, TID: 11, At: clock.Stamp{TSC: 125, MonoNS: 25}, IP: 0x401000, Insn: "mov %eax,(%rdx)", Addr: 0x9000, Old: []byte{1}, New: []byte{2}, Version: v2})
	r.FileUnmap(fm, clock.Stamp{TSC: 140, MonoNS: 40})
	r.ThreadExit(10, clock.Stamp{TSC: 150, MonoNS: 50})
	r.ProcessExit(10, 3, clock.Stamp{TSC: 150, MonoNS: 50})
	if n1 != 1 || n2 != 2 || v2 != v1+1 {
		t.Fatalf("version numbering: v1=%d n1=%d v2=%d n2=%d", v1, n1, v2, n2)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		if st, _ := os.Stat(path + "-wal"); st.Size() != 0 {
			t.Errorf("WAL not checkpointed at Close: %d bytes", st.Size())
		}
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
	if len(vs) != 2 {
		t.Fatalf("got %d versions, want 2", len(vs))
	}
	for i, want := range [][]byte{data1, data2} {
		got, err := d.VersionData(&vs[i])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("version %d bytes differ", i)
		}
		sum := sha256.Sum256(want)
		if !bytes.Equal(vs[i].SHA256, sum[:]) {
			t.Errorf("version %d sha256 differs", i)
		}
	}
	if !vs[0].HasEnd || vs[0].End.TSC != 120 || vs[1].HasEnd {
		t.Errorf("end stamps: %+v %+v", vs[0], vs[1])
	}
	if !vs[0].ValidAt(119) || vs[0].ValidAt(120) || !vs[1].ValidAt(1<<40) {
		t.Errorf("ValidAt wrong")
	}
	// Pages: aa (shared by both versions), bb, cc: three distinct pages.
	var npages int
	d.SQL().QueryRow(`SELECT count(*) FROM pages`).Scan(&npages)
	if npages != 3 {
		t.Errorf("stored %d distinct pages, want 3 (dedup)", npages)
	}
	at, err := d.Versions(VersionFilter{Addr: 0x7000 + 2*PageSize + 5, HasAddr: true})
	if err != nil || len(at) != 2 {
		t.Errorf("address filter: %v %d", err, len(at))
	}
	fms, err := d.FileMaps(10)
	if err != nil || len(fms) != 1 || !fms[0].HasUnmap || fms[0].Path != "/bin/prog" || !bytes.Equal(fms[0].BuildID, []byte{1, 2}) {
		t.Errorf("file maps: %v %+v", err, fms)
	}
	ws, err := d.Writes(0)
	if err != nil || len(ws) != 1 || ws[0].Version != v2 || ws[0].New[0] != 2 {
		t.Errorf("writes: %v %+v", err, ws)
	}
	ps, err := d.Processes()
	if err != nil || len(ps) != 1 || ps[0].ExecPath != "/bin/prog" || ps[0].ExitStatus != 3 || len(ps[0].Argv) != 2 {
		t.Errorf("processes: %v %+v", err, ps)
	}
	ts, err := d.Threads()
	if err != nil || len(ts) != 1 || ts[0].Name != "prog" || !ts[0].HasEnd {
		t.Errorf("threads: %v %+v", err, ts)
	}
	m, _ := d.Meta()
	if m["ptjit_state"] != "complete" || m["tsc_hz"] != "2000000000" {
		t.Errorf("meta: %v", m)
	}
}

func TestExecAfterFork(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(1, 0, clock.Stamp{TSC: 1, MonoNS: 1})
	r.Exec(1, "/a", []string{"a"}, clock.Stamp{TSC: 2, MonoNS: 2})
	r.ProcessStart(2, 1, clock.Stamp{TSC: 3, MonoNS: 3}) // vfork
	r.SharesVM(2, 1)
	r.Exec(2, "/b", []string{"b"}, clock.Stamp{TSC: 4, MonoNS: 4})
	r.Exec(2, "/c", []string{"c"}, clock.Stamp{TSC: 5, MonoNS: 5})
	r.ProcessExit(2, 0, clock.Stamp{TSC: 6, MonoNS: 6})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps, _ := d.Processes()
	var got []string
	for _, p := range ps {
		got = append(got, p.ExecPath)
	}
	// The vfork child before its exec is an image of its own, in pid 1's
	// address space.
	if strings.Join(got, ",") != "/a,,/b,/c" {
		t.Fatalf("process images %q, want /a,,/b,/c", got)
	}
	if ps[1].VMOwner != 1 || ps[2].VMOwner != 0 || !ps[1].HasEnd || ps[1].End.TSC != 4 {
		t.Errorf("vm owner: before exec %+v, after %+v", ps[1], ps[2])
	}
	ps = ps[1:]
	if !ps[1].HasEnd || ps[1].HasExit || !ps[2].HasExit || ps[1].PPID != 1 || ps[2].PPID != 1 {
		t.Errorf("fork/exec chain wrong: %+v", ps)
	}
}

// A recording whose writer never closed (ptjit killed) is readable up to
// the last commit.
func TestFlushedButNotClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	reg := r.NewRegion(1, 0x1000, PageSize, clock.Stamp{TSC: 1, MonoNS: 1})
	r.AddVersion(Version{Region: reg, PID: 1, Addr: 0x1000, Size: PageSize, Data: page(1, 1), At: clock.Stamp{TSC: 1, MonoNS: 1}, Cause: "mmap"})
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	vs, err := d.Versions(VersionFilter{})
	if err != nil || len(vs) != 1 {
		t.Fatalf("%v %d", err, len(vs))
	}
	m, _ := d.Meta()
	if m["ptjit_state"] != "recording" {
		t.Errorf("state %q, want recording", m["ptjit_state"])
	}
	r.Close()
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, bytes.Repeat([]byte("not sqlite "), 100), 0o644)
	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	for _, tc := range []struct {
		path string
		want string
	}{
		{filepath.Join(dir, "missing.db"), "no such file"},
		{garbage, "not a ptjit code.db"},
		{empty, "not a ptjit code.db"},
		{dir, "is a directory"},
	} {
		d, err := Open(tc.path)
		if err == nil {
			d.Close()
			t.Errorf("%s: opened", tc.path)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line naming the file and %q", tc.path, err, tc.want)
		}
	}
	d, err := Open(garbage)
	if err == nil || !errors.Is(err, ErrNotCodeDB) {
		t.Errorf("errors.Is(ErrNotCodeDB) false for %v", err)
		if d != nil {
			d.Close()
		}
	}
}

// TestKilledRunLeftovers opens what a run killed with SIGKILL leaves: a
// code.db in WAL mode whose last transactions are only in code.db-wal (a
// copy of the files taken while the Recorder is open). Open folds the WAL
// in once, under the directory's lock, and then the recording is one file
// again.
func TestKilledRunLeftovers(t *testing.T) {
	live := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(live, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reg := r.NewRegion(1, 0x1000, PageSize, clock.Stamp{TSC: 1, MonoNS: 1})
	r.AddVersion(Version{Region: reg, PID: 1, Addr: 0x1000, Size: PageSize, Data: page(1, 1), At: clock.Stamp{TSC: 1, MonoNS: 1}, Cause: "mmap"})
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	copyRun := func() string {
		dir := t.TempDir()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			b, err := os.ReadFile(live + suffix)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, "code.db"+suffix), b, 0o644)
		}
		if st, _ := os.Stat(filepath.Join(dir, "code.db-wal")); st.Size() == 0 {
			t.Fatal("the live recording's WAL is empty: the test does not exercise a leftover WAL")
		}
		return filepath.Join(dir, "code.db")
	}

	killed := copyRun()
	d, err := Open(killed)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := d.Versions(VersionFilter{})
	if err != nil || len(vs) != 1 {
		t.Fatalf("versions after folding the WAL: %v, %d, want 1", err, len(vs))
	}
	m, _ := d.Meta()
	if m["ptjit_state"] != "recording" {
		t.Errorf("state %q, want recording (the run was cut short)", m["ptjit_state"])
	}
	d.Close()
	for _, suffix := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(killed + suffix); err == nil {
			t.Errorf("code.db%s still there after Open folded the WAL", suffix)
		}
	}
	if b, _ := os.ReadFile(killed); len(b) < 20 || b[18] != 1 || b[19] != 1 {
		t.Errorf("code.db header still says WAL mode after folding")
	}
}

// TestSplitAndReadVersions: a version split off another (SplitVersion)
// reads back as the bytes its base had there, through VersionData and the
// version_pages view, and a large version queued in chunks
// (AddVersionRead) reads back whole.
func TestSplitAndReadVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(n uint64) clock.Stamp { return clock.Stamp{TSC: n, MonoNS: int64(n)} }
	reg := r.NewRegion(10, 0x10000, 4*PageSize, at(1))
	data := append(append(page(1, 1), page(2, 1)...), append(page(3, 1), page(4, 1)...)...)
	base, _ := r.AddVersion(Version{Region: reg, PID: 10, Addr: 0x10000, Size: 4 * PageSize, Data: append([]byte(nil), data...), At: at(1), Cause: "mmap"})
	// a store into page 1: page 0 and pages 2-3 go on as split versions
	r.EndVersion(base, at(2))
	s0, _ := r.SplitVersion(Version{Region: reg, PID: 10, Addr: 0x10000, Size: PageSize, At: at(2), Cause: "split"}, base, 0x10000)
	s2, _ := r.SplitVersion(Version{Region: reg, PID: 10, Addr: 0x12000, Size: 2 * PageSize, At: at(2), Cause: "split"}, base, 0x10000)
	// a large version, read a chunk at a time
	big := make([]byte, 2*ChunkSize+3*PageSize)
	for i := range big {
		big[i] = byte(i / PageSize)
	}
	reg2 := r.NewRegion(10, 0x1000000, uint64(len(big)), at(3))
	bigID, _, err := r.AddVersionRead(Version{Region: reg2, PID: 10, Addr: 0x1000000, Size: uint64(len(big)), At: at(3), Cause: "mmap"},
		func(addr uint64, b []byte) error { copy(b, big[addr-0x1000000:]); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, c := range []struct {
		id   int64
		want []byte
	}{{base, data}, {s0, data[:PageSize]}, {s2, data[2*PageSize:]}, {bigID, big}} {
		v, err := d.Version(c.id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.VersionData(v)
		if err != nil {
			t.Fatalf("version %d: %v", c.id, err)
		}
		if !bytes.Equal(got, c.want) {
			t.Errorf("version %d (%#x+%d): bytes differ from what was recorded", c.id, v.Addr, v.Size)
		}
		if sum := sha256.Sum256(c.want); !bytes.Equal(v.SHA256, sum[:]) {
			t.Errorf("version %d: sha256 %x, want %x", c.id, v.SHA256, sum)
		}
	}
	// VersionBytes (by id, rows read ahead), in reverse and with a fresh
	// DB for each pass: split, one-page, multi-page and chunked versions
	for pass := 0; pass < 2; pass++ {
		d2, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id   int64
			want []byte
		}{{bigID, big}, {s2, data[2*PageSize:]}, {s0, data[:PageSize]}, {base, data}, {bigID + 1, nil}} {
			got, err := d2.VersionBytes(c.id)
			if c.want == nil {
				if err == nil || !strings.Contains(err.Error(), "no version with id") {
					t.Errorf("VersionBytes(%d), no such version: err %v", c.id, err)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, c.want) {
				t.Errorf("VersionBytes(%d): err %v, equal %v", c.id, err, bytes.Equal(got, c.want))
			}
		}
		d2.Close()
	}
	// the view unpacks a split version's pages from its base
	rows, err := d.SQL().Query(`SELECT idx, sha256 FROM version_pages WHERE version_id = ? ORDER BY idx`, s2)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var n int
	for ; rows.Next(); n++ {
		var idx int
		var h []byte
		if err := rows.Scan(&idx, &h); err != nil {
			t.Fatal(err)
		}
		if want := sha256.Sum256(data[(2+idx)*PageSize : (3+idx)*PageSize]); idx != n || !bytes.Equal(h, want[:]) {
			t.Errorf("version_pages of split version %d: row %d is page %d %x, want %x", s2, n, idx, h, want)
		}
	}
	if n != 2 {
		t.Errorf("version_pages of split version %d: %d rows, want 2", s2, n)
	}
}

// TestRefused: a run ptjit refused (Refuse before Close) is recorded as
// "refused: WHY", and Incomplete says so; one without Refuse is complete.
func TestRefused(t *testing.T) {
	for _, why := range []string{"", "pid 7: /p is a 32-bit (compat-mode) program: ptjit records 64-bit processes only"} {
		path := filepath.Join(t.TempDir(), "code.db")
		r, err := Create(path, Meta{})
		if err != nil {
			t.Fatal(err)
		}
		r.ProcessStart(7, 0, clock.Stamp{TSC: 1, MonoNS: 1})
		r.Exec(7, "/p", []string{"p"}, clock.Stamp{TSC: 2, MonoNS: 2})
		if why != "" {
			r.Refuse(why)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		d, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := d.Meta()
		got, err := d.Incomplete()
		d.Close()
		wantState, wantWhy := "complete", ""
		if why != "" {
			wantState = "refused: " + why
			wantWhy = "ptjit refused the run and killed the program (" + why + "); it holds what was recorded until then"
		}
		if m["ptjit_state"] != wantState || got != wantWhy || err != nil {
			t.Errorf("Refuse(%q): state %q, Incomplete %q, %v; want %q, %q", why, m["ptjit_state"], got, err, wantState, wantWhy)
		}
	}
}

// TestAddVersionSparse: a version of which only some runs are read
// (AddVersionSparse) reads back as the runs' bytes with zeros elsewhere,
// equal to the same bytes recorded by AddVersionRead, and the read
// function is asked for the runs only.
func TestAddVersionSparse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(n uint64) clock.Stamp { return clock.Stamp{TSC: n, MonoNS: int64(n)} }
	const base, size = 0x4000000, 3*ChunkSize + 5*PageSize
	want := make([]byte, size)
	runs := []AddrRun{{base + PageSize, 2 * PageSize}, {base + ChunkSize - PageSize, ChunkSize + 2*PageSize}, {base + size - PageSize, PageSize}}
	for _, run := range runs {
		for a := run.Addr; a < run.Addr+run.Size; a++ {
			want[a-base] = byte(a/PageSize) | 1
		}
	}
	var asked []AddrRun
	read := func(addr uint64, b []byte) error {
		asked = append(asked, AddrRun{addr, uint64(len(b))})
		copy(b, want[addr-base:])
		return nil
	}
	reg := r.NewRegion(10, base, size, at(1))
	sparse, _, err := r.AddVersionSparse(Version{Region: reg, PID: 10, Addr: base, Size: size, At: at(1), Cause: "mmap"}, runs, read)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range asked {
		in := false
		for _, run := range runs {
			in = in || a.Addr >= run.Addr && a.Addr+a.Size <= run.Addr+run.Size
		}
		if !in {
			t.Errorf("read asked for %#x+%d, outside the runs", a.Addr, a.Size)
		}
	}
	r.EndVersion(sparse, at(2))
	whole, _, err := r.AddVersionRead(Version{Region: reg, PID: 10, Addr: base, Size: size, At: at(2), Cause: "mprotect"},
		func(addr uint64, b []byte) error { copy(b, want[addr-base:]); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	sum := sha256.Sum256(want)
	for _, id := range []int64{sparse, whole} {
		v, err := d.Version(id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.VersionData(v)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("version %d: err %v, bytes equal %v", id, err, bytes.Equal(got, want))
		}
		if !bytes.Equal(v.SHA256, sum[:]) {
			t.Errorf("version %d: sha256 %x, want %x", id, v.SHA256, sum)
		}
	}
}
