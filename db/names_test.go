package db

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/ptjit/ptjit/clock"
)

// TestNamesCode: a jitdump name's code bytes read back as written, a
// perf-map name's as nil; a version-5 code.db (before names.code: made
// here by dropping the column and setting user_version 5) still reads its
// names, all without code.
func TestNamesCode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{Command: []string{"prog"}})
	if err != nil {
		t.Fatal(err)
	}
	at := clock.Stamp{TSC: 5, MonoNS: 5}
	code := []byte{0x55, 0x48, 0x89, 0xe5, 0xc3}
	r.Name(NameInfo{PID: 10, Addr: 0x7000, Size: 16, Name: "map", Source: "perf-map /tmp/perf-10.map", At: at})
	r.Name(NameInfo{PID: 10, Addr: 0x7010, Size: uint64(len(code)), Name: "dump", Source: "jitdump /tmp/jit-10.dump", Code: code, At: at})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	read := func() []NameInfo {
		t.Helper()
		d, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ns, err := d.Names(0)
		if err != nil || len(ns) != 2 {
			t.Fatalf("names %v, err %v", ns, err)
		}
		return ns
	}
	ns := read()
	if ns[0].Code != nil || !bytes.Equal(ns[1].Code, code) || ns[1].Name != "dump" {
		t.Fatalf("code %x and %x (%s), want none and %x", ns[0].Code, ns[1].Code, ns[1].Name, code)
	}
	sdb, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`ALTER TABLE names DROP COLUMN code`, `PRAGMA user_version = 5`} {
		if _, err := sdb.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	sdb.Close()
	ns = read()
	if ns[0].Code != nil || ns[1].Code != nil || ns[1].Name != "dump" {
		t.Fatalf("version-5 code.db: names %+v", ns)
	}
}
