package db

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
)

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// Probe reports whether the file at path is a ptjit code.db, of any schema
// version and in any state (a run that was killed leaves state
// "recording"). It reads without creating or changing anything beside the
// file (SQLite's immutable mode: no -wal, -shm or lock files; a WAL left
// by a killed run is read from a copy), so it is safe on a file ptjit may
// not own. The error matches ErrNotCodeDB (a
// *FormatError) when the file is something else.
func Probe(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	head := make([]byte, len(sqliteMagic))
	_, err = io.ReadFull(f, head)
	f.Close()
	if err != nil || !bytes.Equal(head, sqliteMagic) {
		return &FormatError{path, "not a ptjit code.db (not an SQLite database)"}
	}
	if hasMeta(path, "?mode=ro&immutable=1") {
		return nil
	}
	// A run killed before it folded its WAL into code.db leaves the meta
	// table in code.db-wal, which immutable mode does not read. Reading
	// the WAL means SQLite writing beside the file, so the probe reads a
	// copy of the two files instead.
	if st, err := os.Stat(path + "-wal"); err == nil && st.Size() > 0 {
		ok, err := probeCopy(path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if ok {
			return nil
		}
	}
	return &FormatError{path, "not a ptjit code.db (an SQLite database without ptjit's meta table)"}
}

// hasMeta reports whether the SQLite database at path, opened with the
// URI parameters query, has ptjit's meta table.
func hasMeta(path, query string) bool {
	sdb, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+query)
	if err != nil {
		return false
	}
	defer sdb.Close()
	var format string
	err = sdb.QueryRow(`SELECT value FROM meta WHERE key = 'format'`).Scan(&format)
	return err == nil && format == formatName
}

// probeCopy copies path and path-wal into a temporary directory and
// reports whether the copy, its WAL applied, has ptjit's meta table.
func probeCopy(path string) (bool, error) {
	tmp, err := os.MkdirTemp("", "ptjit-probe-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	dst := filepath.Join(tmp, "code.db")
	for _, sfx := range []string{"", "-wal"} {
		if err := copyFile(path+sfx, dst+sfx); err != nil {
			return false, err
		}
	}
	return hasMeta(dst, "?mode=ro"), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// formatName is meta.format of every code.db.
const formatName = "ptjit code.db"
