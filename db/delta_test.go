package db

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
)

// TestDeltaRoundTrip: makeDelta then applyDelta gives back the page, for
// hand-made edits (a 4-byte store costs at most 8 bytes) and random ones;
// a change of most of the page is not a delta.
func TestDeltaRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	base := make([]byte, PageSize)
	rng.Read(base)
	edit := func(spans ...[2]int) []byte {
		p := append([]byte(nil), base...)
		for _, s := range spans {
			for i := s[0]; i < s[0]+s[1]; i++ {
				p[i] ^= 0xff
			}
		}
		return p
	}
	for _, tt := range []struct {
		name    string
		page    []byte
		maxSize int // -1: no delta
	}{
		{"same", edit(), 0},
		{"store4 at 1", edit([2]int{1, 4}), 2 + 4},
		{"store4 at end", edit([2]int{PageSize - 4, 4}), 3 + 4},
		{"store1 at 0", edit([2]int{0, 1}), 2 + 1},
		{"two stores 2 apart (one run)", edit([2]int{100, 4}, [2]int{106, 4}), 2 + 10},
		{"two stores far apart", edit([2]int{100, 4}, [2]int{3000, 4}), 2 + 4 + 3 + 4},
		{"whole page", edit([2]int{0, PageSize}), -1},
	} {
		d := makeDelta(nil, base, tt.page)
		if tt.maxSize < 0 {
			if d != nil {
				t.Errorf("%s: a delta of %d bytes, want none", tt.name, len(d))
			}
			continue
		}
		if d == nil || len(d) > tt.maxSize {
			t.Errorf("%s: delta of %d bytes (nil %v), want at most %d", tt.name, len(d), d == nil, tt.maxSize)
			continue
		}
		got, err := applyDelta(base, d)
		if err != nil || !bytes.Equal(got, tt.page) {
			t.Errorf("%s: applyDelta: err %v, equal %v", tt.name, err, bytes.Equal(got, tt.page))
		}
	}
	for i := 0; i < 2000; i++ {
		p := append([]byte(nil), base...)
		for k := rng.Intn(20); k > 0; k-- {
			off := rng.Intn(PageSize)
			n := min(1+rng.Intn(16), PageSize-off)
			rng.Read(p[off : off+n])
		}
		d := makeDelta(nil, base, p)
		if d == nil {
			continue // over maxDelta: stored whole
		}
		got, err := applyDelta(base, d)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("random edit %d: applyDelta: err %v, equal %v", i, err, bytes.Equal(got, p))
		}
	}
}

// TestDeltaRuns: makeDelta, which finds changed bytes eight at a time,
// makes the delta its format defines, built here another way: the changed
// bytes grouped into runs wherever fewer than 4 equal bytes separate them,
// each run as (bytes kept since the last run, its length, its bytes), no
// delta when that is over maxDelta bytes. Random edits at every
// alignment, near the ends, of every length, on pages of several sizes.
func TestDeltaRuns(t *testing.T) {
	want := func(base, page []byte) []byte {
		var runs [][2]int // [start, end) of changed bytes
		for i := range page {
			if page[i] == base[i] {
				continue
			}
			if n := len(runs); n > 0 && i-runs[n-1][1] < 4 {
				runs[n-1][1] = i + 1
			} else {
				runs = append(runs, [2]int{i, i + 1})
			}
		}
		d, prev := []byte{}, 0
		for _, r := range runs {
			d = binary.AppendUvarint(d, uint64(r[0]-prev))
			d = binary.AppendUvarint(d, uint64(r[1]-r[0]))
			d = append(d, page[r[0]:r[1]]...)
			prev = r[1]
		}
		if len(d) > maxDelta {
			return nil
		}
		return d
	}
	rng := rand.New(rand.NewSource(2))
	for _, size := range []int{PageSize, 1, 7, 8, 9, 100} {
		base := make([]byte, size)
		rng.Read(base)
		for i := 0; i < 3000; i++ {
			p := append([]byte(nil), base...)
			for k := rng.Intn(6); k > 0; k-- {
				off := rng.Intn(size)
				if rng.Intn(4) == 0 {
					off = size - 1 - rng.Intn(min(size, 9)) // near the end
				}
				n := min(1+rng.Intn(12), size-off)
				for j := off; j < off+n; j++ {
					p[j] ^= byte(1 + rng.Intn(255))
				}
			}
			got, w := makeDelta(nil, base, p), want(base, p)
			if !bytes.Equal(got, w) || (got == nil) != (w == nil) {
				t.Fatalf("size %d, edit %d: delta %x, want %x", size, i, got, w)
			}
		}
	}
}

// BenchmarkMakeDelta: a JIT's page with one new 200-byte function in it.
func BenchmarkMakeDelta(b *testing.B) {
	base := make([]byte, PageSize)
	rand.New(rand.NewSource(3)).Read(base)
	page := append([]byte(nil), base...)
	for i := 1500; i < 1700; i++ {
		page[i]++
	}
	var dst []byte
	for b.Loop() {
		dst = makeDelta(dst[:0], base, page)
	}
}

// TestApplyDeltaErrors: a delta that does not fit its page is an error
// naming the byte of the delta, never a page made up.
func TestApplyDeltaErrors(t *testing.T) {
	base := make([]byte, 16)
	uv := func(xs ...uint64) []byte {
		var b []byte
		for _, x := range xs {
			b = binary.AppendUvarint(b, x)
		}
		return b
	}
	for _, tt := range []struct {
		name  string
		delta []byte
		want  string
	}{
		{"run past the page", append(uv(14, 4), 1, 2, 3, 4), "delta byte 0: run of 4 bytes at page offset 14"},
		{"run past the delta", append(uv(0, 4), 1, 2), "delta byte 0: run of 4 bytes"},
		{"empty run", uv(0, 0), "delta byte 1: bad run length"},
		{"second run bad", append(append(uv(0, 1), 9), 0x80), "delta byte 3: bad run offset"},
	} {
		_, err := applyDelta(base, tt.delta)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// storeVersions records, as ptjit run --wx=precise does for a program that
// patches one immediate n times, n versions of one page each made by one
// 4-byte store (a version row, a page and a W^X write row each), and
// returns every version's bytes, kept here as the truth.
func storeVersions(t *testing.T, path string, n int) [][]byte {
	t.Helper()
	r, err := Create(path, Meta{Command: []string{"patch-imm"}})
	if err != nil {
		t.Fatal(err)
	}
	const addr = 0x7f0000001000
	rng := rand.New(rand.NewSource(7))
	code := make([]byte, PageSize)
	rng.Read(code[:256])
	reg := r.NewRegion(10, addr, PageSize, clock.Stamp{TSC: 1})
	var truth [][]byte
	prev, _ := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: addr, Size: PageSize, Data: append([]byte(nil), code...),
		At: clock.Stamp{TSC: 1, MonoNS: 1}, Cause: "mmap"})
	truth = append(truth, append([]byte(nil), code...))
	for i := 1; i <= n; i++ {
		at := clock.Stamp{TSC: uint64(10 * i), MonoNS: int64(10 * i)}
		off := 1 + 8*rng.Intn(16) // an immediate in one of 16 functions
		old := append([]byte(nil), code[off:off+4]...)
		binary.LittleEndian.PutUint32(code[off:], rng.Uint32())
		r.EndVersion(prev, at)
		v, _ := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: addr, Size: PageSize, Data: append([]byte(nil), code...),
			At: at, Cause: "write", IP: 0x401234})
		r.AddWrite(Write{PID: 10, TID: 10, At: at, IP: 0x401234, Insn: "mov %edx,0x1(%rax)", Addr: addr + uint64(off),
			Old: old, New: append([]byte(nil), code[off:off+4]...), Version: v})
		truth = append(truth, append([]byte(nil), code...))
		prev = v
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return truth
}

// TestDeltaVersions: versions made by single 4-byte stores cost at most
// 1 KiB each in code.db (a whole page each before schema 7), every one
// reads back byte for byte with its sha256, and delta chains are cut by a
// whole page every maxDeltaDepth pages.
func TestDeltaVersions(t *testing.T) {
	const n = 3000
	path := filepath.Join(t.TempDir(), "code.db")
	truth := storeVersions(t, path, n)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if per := st.Size() / n; per > 1024 {
		t.Errorf("code.db is %d bytes for %d single-store versions: %d bytes a version, want at most 1024", st.Size(), n, per)
	} else {
		t.Logf("code.db: %d bytes, %d a version", st.Size(), per)
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
	if len(vs) != len(truth) {
		t.Fatalf("%d versions, want %d", len(vs), len(truth))
	}
	for i := range vs {
		got, err := d.VersionData(&vs[i])
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(truth[i])
		if !bytes.Equal(got, truth[i]) || !bytes.Equal(vs[i].SHA256, sum[:]) {
			t.Fatalf("version %d (id %d): bytes equal %v, sha256 equal %v", i+1, vs[i].ID, bytes.Equal(got, truth[i]), bytes.Equal(vs[i].SHA256, sum[:]))
		}
	}
	// Read again in reverse, through a fresh DB (no page cached): every
	// chain walked from its checkpoint.
	d2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	for i := len(vs) - 1; i >= 0; i -= 97 {
		got, err := d2.VersionBytes(vs[i].ID)
		if err != nil || !bytes.Equal(got, truth[i]) {
			t.Fatalf("version id %d read alone: err %v, equal %v", vs[i].ID, err, bytes.Equal(got, truth[i]))
		}
	}
	var whole, deltas, depth int
	sq := d.SQL()
	if err := sq.QueryRow(`SELECT count(*) FILTER (WHERE base_id IS NULL), count(*) FILTER (WHERE base_id IS NOT NULL) FROM pages`).Scan(&whole, &deltas); err != nil {
		t.Fatal(err)
	}
	if err := sq.QueryRow(`WITH RECURSIVE ch(id, d) AS (SELECT id, 0 FROM pages WHERE base_id IS NULL
		UNION ALL SELECT p.id, ch.d + 1 FROM pages p JOIN ch ON p.base_id = ch.id) SELECT max(d) FROM ch`).Scan(&depth); err != nil {
		t.Fatal(err)
	}
	if whole+deltas != n+1 || depth != maxDeltaDepth || whole < (n+1)/(maxDeltaDepth+1) || whole > (n+1)/(maxDeltaDepth+1)+1 {
		t.Errorf("%d whole pages and %d deltas, longest chain %d: want %d pages, chains of %d", whole, deltas, depth, n+1, maxDeltaDepth)
	}
}

// TestDeltaDamaged: a delta that does not fit its base, or whose base row
// is gone, is an error naming the version and the page row; a page whose
// delta applies but gives other bytes fails its sha256.
func TestDeltaDamaged(t *testing.T) {
	for _, tt := range []struct {
		name, edit, want string
	}{
		{"bad delta", `UPDATE pages SET data = X'0a05' WHERE id = 3`, "page row 3: delta byte 0: run of 5 bytes"},
		{"no base", `DELETE FROM pages WHERE id = 2`, "page row 3 is a delta against row 2, which is missing"},
		{"other bytes", `UPDATE pages SET data = X'000401020304' WHERE id = 3`, "version 3: page 0 does not match its sha256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "code.db")
			storeVersions(t, path, 3)
			sdb, err := sql.Open("sqlite3", path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sdb.Exec(tt.edit); err != nil {
				t.Fatal(err)
			}
			sdb.Close()
			d, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			_, err = d.VersionBytes(3)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), path+": ") || strings.Contains(err.Error(), "\n") {
				t.Errorf("err %v, want one line naming %s and containing %q", err, path, tt.want)
			}
		})
	}
}

// TestSchema6Pages: a version-6 code.db (every page whole, no
// pages.base_id: made here by dropping the column from a recording
// without deltas and setting user_version 6) reads as before.
func TestSchema6Pages(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	reg := r.NewRegion(10, 0x7000, 2*PageSize, clock.Stamp{TSC: 1})
	data := [][]byte{append(page(0xaa, 1), page(0xbb, 1)...), append(page(0xcc, 1), page(0xbb, 1)...)}
	for i, b := range data {
		r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: 0x7000, Size: 2 * PageSize, Data: append([]byte(nil), b...),
			At: clock.Stamp{TSC: uint64(10 + i)}, Cause: "mprotect"})
	}
	// and a one-page version (its page read with its row)
	data = append(data, page(0xdd, 1))
	reg2 := r.NewRegion(10, 0x20000, PageSize, clock.Stamp{TSC: 20})
	r.AddVersion(Version{Region: reg2, PID: 10, TID: 10, Addr: 0x20000, Size: PageSize, Data: page(0xdd, 1), At: clock.Stamp{TSC: 20}, Cause: "mmap"})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	sdb, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	var deltas int
	sdb.QueryRow(`SELECT count(*) FROM pages WHERE base_id IS NOT NULL`).Scan(&deltas)
	if deltas != 0 {
		t.Fatalf("%d pages stored as deltas: every page changed whole", deltas)
	}
	for _, s := range []string{`ALTER TABLE pages DROP COLUMN base_id`, `PRAGMA user_version = 6`} {
		if _, err := sdb.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	sdb.Close()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	vs, err := d.Versions(VersionFilter{})
	if err != nil || len(vs) != 3 {
		t.Fatalf("versions %v, err %v", vs, err)
	}
	for i := range vs {
		got, err := d.VersionData(&vs[i])
		if err != nil || !bytes.Equal(got, data[i]) {
			t.Errorf("version-6 code.db, version %d: err %v, equal %v", i+1, err, bytes.Equal(got, data[i]))
		}
		got, err = d.VersionBytes(vs[i].ID)
		if err != nil || !bytes.Equal(got, data[i]) {
			t.Errorf("version-6 code.db, VersionBytes(%d): err %v, equal %v", vs[i].ID, err, bytes.Equal(got, data[i]))
		}
	}
}
