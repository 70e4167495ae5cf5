package db

import (
	"crypto/sha256"
	_ "embed"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

// SchemaVersion is code.db's PRAGMA user_version.
const SchemaVersion = 3

//go:embed schema.sql
var schemaSQL string

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
