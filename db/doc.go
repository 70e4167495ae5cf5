// Package db holds ptjit's code history: the SQLite schema of code.db, the
// Recorder that writes it while a program runs, and the read-only queries
// (history, show, diff, the decoder's versioned image) that work on a
// code.db copied from another machine.
//
// The schema is in schema.sql (with comments on every table) and its
// version is PRAGMA user_version (SchemaVersion); Open refuses a database of
// another version with an error naming the file.
//
// Writing. A Recorder is driven by one goroutine, the tracker's. Its methods
// assign IDs synchronously from in-memory counters (the database is new) and
// queue the rows for a writer goroutine, which hashes code pages (SHA-256,
// page-granular deduplication: an unchanged page is stored once however
// many versions contain it) and inserts them in batched transactions. The
// writer takes queued rows at least every 10 ms and commits at least every
// 50 ms, on Flush, and on Close, so a ptjit killed with SIGKILL loses at
// most the last 60 ms, and one stopped with SIGTERM/SIGINT (which flushes)
// loses nothing. The database is in WAL mode with synchronous=OFF while
// recording: a committed transaction is in the kernel's page cache, which
// survives any crash or kill of ptjit or of the program; only a crash of
// the machine itself can lose the recording's tail (a checkpoint's fsync
// stalled the writer, and through back-pressure the program, for hundreds
// of ms on this VM's disk). Close checkpoints the WAL into a single file
// and sets meta.ptjit_state to "complete" ("recording" means the run was
// cut short).
//
// Reading. Open opens a code.db read-only (immutable snapshot semantics are
// not assumed: a recording in progress can be read).
package db
