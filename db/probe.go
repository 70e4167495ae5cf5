package db

import (
	"bytes"
	"database/sql"
	"fmt"
	"io"
	"net/url"
	"os"
)

// sqliteMagic starts every SQLite 3 database file.
var sqliteMagic = []byte("SQLite format 3\x00")

// Probe reports whether the file at path is a ptjit code.db, of any schema
// version and in any state (a run that was killed leaves state
// "recording"). It reads without creating or changing anything beside the
// file (SQLite's immutable mode: no -wal, -shm or lock files), so it is
// safe on a file ptjit may not own. The error matches ErrNotCodeDB (a
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
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?mode=ro&immutable=1"
	sdb, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer sdb.Close()
	var format string
	if err := sdb.QueryRow(`SELECT value FROM meta WHERE key = 'format'`).Scan(&format); err != nil || format != formatName {
		return &FormatError{path, "not a ptjit code.db (an SQLite database without ptjit's meta table)"}
	}
	return nil
}

// formatName is meta.format of every code.db.
const formatName = "ptjit code.db"
