package db

import (
	"crypto/sha256"
	_ "embed"

	_ "github.com/mattn/go-sqlite3" // the database/sql driver "sqlite3"
)

// SchemaVersion is code.db's PRAGMA user_version. Version 4 added the
// names table; a version 3 code.db (MinSchemaVersion) is read as one
// whose program published no names (DB.HasNames).
const SchemaVersion = 4

// MinSchemaVersion is the oldest schema Open reads.
const MinSchemaVersion = 3

//go:embed schema.sql
var schemaSQL string

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
