package db

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
)

// TestEndInexact: an end recorded with EndVersionInexact
// reads back marked inexact, one recorded with EndVersion exact; a
// version-3 code.db (before versions.end_inexact: made here by dropping the
// column and setting user_version 3, as such a file is) still opens, and
// its ends read exact; a newer version than this reader knows is refused
// with one line naming the file.
func TestEndInexact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	at := func(n uint64) clock.Stamp { return clock.Stamp{TSC: n, MonoNS: int64(n)} }
	r.ProcessStart(10, 1, at(1))
	reg := r.NewRegion(10, 0x7000, PageSize, at(2))
	v1, _ := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: 0x7000, Size: PageSize, Data: page(1, 1), At: at(3), Cause: "mprotect"})
	r.EndVersionInexact(v1, at(4))
	v2, _ := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: 0x7000, Size: PageSize, Data: page(2, 1), At: at(5), Cause: "mprotect"})
	r.EndVersion(v2, at(6))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ends := func() []bool {
		t.Helper()
		d, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		vs, err := d.Versions(VersionFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var out []bool
		for _, v := range vs {
			if !v.HasEnd {
				t.Fatalf("version %d has no end", v.ID)
			}
			out = append(out, v.EndInexact)
			if v2, err := d.Version(v.ID); err != nil || v2.EndInexact != v.EndInexact {
				t.Fatalf("Version(%d): inexact %v, err %v; Versions said %v", v.ID, v2.EndInexact, err, v.EndInexact)
			}
		}
		return out
	}
	if got := ends(); len(got) != 2 || !got[0] || got[1] {
		t.Fatalf("inexact ends %v, want [true false]", got)
	}
	edit := func(stmts ...string) {
		t.Helper()
		sdb, err := sql.Open("sqlite3", path)
		if err != nil {
			t.Fatal(err)
		}
		defer sdb.Close()
		for _, s := range stmts {
			if _, err := sdb.Exec(s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}
	edit(`ALTER TABLE versions DROP COLUMN end_inexact`, `PRAGMA user_version = 3`)
	if got := ends(); len(got) != 2 || got[0] || got[1] {
		t.Fatalf("version-3 code.db: inexact ends %v, want [false false]", got)
	}
	edit(`PRAGMA user_version = 99`)
	d, err := Open(path)
	if err == nil {
		d.Close()
		t.Fatal("a version-99 code.db opened")
	}
	if msg := err.Error(); !strings.Contains(msg, path) || !strings.Contains(msg, "version 99") || strings.Contains(msg, "\n") {
		t.Errorf("error %q: want one line naming the file and the version", msg)
	}
}
