package db

import (
	"crypto/sha256"
	_ "embed"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

// SchemaVersion is code.db's PRAGMA user_version. Version 4 added
// versions.end_inexact, version 5 the names table, version 6 names.code,
// version 7 pages.base_id (pages stored as deltas: delta.go).
const SchemaVersion = 7

// MinSchemaVersion is the oldest schema Open reads. Version 3 lacks
// versions.end_inexact, which reads as 0 (a version-3 recorder stopped
// every mprotect, so every end it wrote is exact); versions 3 and 4 lack
// the names table and read as recordings whose programs published no
// names (DB.HasNames); version 5 lacks names.code, which reads as NULL (a
// version-5 recorder read perf maps only); version 6 and older lack
// pages.base_id: every page is whole.
const MinSchemaVersion = 3

//go:embed schema.sql
var schemaSQL string

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
