package db

import (
	"crypto/sha256"
	_ "embed"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

// SchemaVersion is code.db's PRAGMA user_version.
const SchemaVersion = 4

// oldestSchema is the oldest version Open reads. Version 3 lacks
// versions.end_inexact; it reads as 0 (a version-3 recorder stopped every
// mprotect, so every end it wrote is exact).
const oldestSchema = 3

//go:embed schema.sql
var schemaSQL string

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
