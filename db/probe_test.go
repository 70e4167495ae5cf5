package db

import (
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestProbeUnfoldedWAL: a code.db whose meta table is still only in its
// WAL (a run killed before the WAL was folded back) is recognised as a
// ptjit code.db, without the probe writing beside it; an SQLite file of
// someone else's, with a WAL too, is not.
func TestProbeUnfoldedWAL(t *testing.T) {
	for _, c := range []struct {
		name  string
		stmts []string
		ours  bool
	}{
		{"ours", []string{`CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)`, `INSERT INTO meta VALUES ('format', 'ptjit code.db')`}, true},
		{"theirs", []string{`CREATE TABLE mine(x)`, `INSERT INTO mine VALUES (1)`}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "code.db")
			sdb, err := sql.Open("sqlite3", "file:"+src+"?_journal_mode=WAL")
			if err != nil {
				t.Fatal(err)
			}
			defer sdb.Close()
			sdb.SetMaxOpenConns(1)
			if _, err := sdb.Exec(`PRAGMA wal_autocheckpoint = 0`); err != nil {
				t.Fatal(err)
			}
			for _, s := range c.stmts {
				if _, err := sdb.Exec(s); err != nil {
					t.Fatal(err)
				}
			}
			// What a kill leaves: the two files as they are now, the
			// connection never closed (no checkpoint).
			dir := t.TempDir()
			dst := filepath.Join(dir, "code.db")
			for _, sfx := range []string{"", "-wal"} {
				if err := copyFile(src+sfx, dst+sfx); err != nil {
					t.Fatal(err)
				}
			}
			if st, err := os.Stat(dst + "-wal"); err != nil || st.Size() == 0 {
				t.Fatalf("no WAL to test with: %v", err)
			}
			if hasMeta(dst, "?mode=ro&immutable=1") && c.ours {
				t.Fatal("the meta table is already in the main file: the test does not test the WAL")
			}
			before, _ := os.ReadDir(dir)
			err = Probe(dst)
			if c.ours && err != nil {
				t.Errorf("Probe: %v, want a ptjit code.db", err)
			}
			if !c.ours && !errors.Is(err, ErrNotCodeDB) {
				t.Errorf("Probe: %v, want ErrNotCodeDB", err)
			}
			after, _ := os.ReadDir(dir)
			if len(after) != len(before) {
				t.Errorf("the probe changed the directory: %d files before, %d after", len(before), len(after))
			}
		})
	}
}
