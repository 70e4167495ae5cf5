// Package db holds ptjit's code history: the SQLite schema of code.db, the
// Recorder that writes it while a program runs, and the read-only queries
// (history, show, diff, the decoder's versioned image) that work on a
// code.db copied from another machine.
//
// The schema is in schema.sql (with comments on every table) and its
// version is PRAGMA user_version (SchemaVersion); Open reads versions
// MinSchemaVersion to SchemaVersion and refuses any other with an error
// naming the file. Changes are additive: version 4 added
// versions.end_inexact (a version 3 code.db reads as all ends exact),
// version 5 the names table (the names a JIT published in its perf map;
// an older code.db reads as one whose program published none, HasNames),
// version 6 names.code, version 7 pages.base_id (pages stored as deltas,
// below; in an older code.db every page is whole), so recordings
// made before stay readable without being rewritten (a finished code.db
// is opened read-only, immutable).
//
// Writing. A Recorder is driven by one goroutine, the tracker's. Its methods
// assign IDs synchronously from in-memory counters (the database is new) and
// queue the rows for a writer goroutine, which hashes code pages (SHA-256,
// page-granular deduplication: an unchanged page is stored once however
// many versions contain it) and inserts them in batched transactions. A
// version split off another (the part of a large mapping a change left
// alone) is a row naming its base version's pages (SplitVersion), and a
// large version is read and queued a chunk at a time (AddVersionRead); a
// version of a range the tracker tracks written pages in (ptjit run
// --copy) brings only those pages and takes its base version's page hashes
// for the rest (AddVersionPages: from the base's row held for a batch, or
// read back from versions.pages):
// the work of a stop and the memory the Recorder holds follow the pages
// that changed, not the size of the mapping.
//
// Deltas (delta.go, schema 7). A recording grows with the bytes written,
// not with the versions: a version made by a 4-byte store (W^X precise
// mode records one per store; a JIT patching an immediate before each
// call makes tens of thousands) would otherwise store a whole new page.
// The writer remembers the last bytes of each page address (writer.last,
// which it already kept to skip hashing unchanged pages), so a changed
// page is compared with its previous content at once: when the difference
// encodes in at most maxDelta (1 KiB) of runs (uvarint bytes kept, uvarint
// length, new bytes), the page is stored as that delta, pages.base_id
// naming the previous page's row (the writer assigns pages.id itself, so a
// delta names its base before either is written). The page is still keyed
// by its sha256, so deduplication, versions.pages and the version_pages
// view are unchanged. A delta's base may be a delta: chains are cut by a
// checkpoint, the page stored whole, when its base is maxDeltaDepth (64)
// deltas from a whole page, so reading any page applies at most 64 deltas,
// and a single-store version costs its share of a whole page every 64
// (64 bytes) plus its delta and rows (TestDeltaVersions and
// TestSoftPTVersionsPatchImm hold it to 1 KiB; the sizes measured with
// and without deltas are in docs/decisions.md). Why 64: a deeper chain
// saves little more (the rows cost more than the checkpoint's share),
// and a reader with an empty cache reads at most 64 small rows to build
// a page.
//
// The writer takes queued rows at least every 10 ms and commits at least every
// 50 ms, on Flush, and on Close, so a ptjit killed with SIGKILL loses
// about the last 60 ms when the writer goroutine gets the CPU on time (a
// loaded machine delays it: ptjit-bench's killloss row measures it), and
// one stopped with SIGTERM/SIGINT (which flushes) loses nothing. Within a
// transaction the writer holds versions rows and new pages for multi-row
// INSERTs of up to 64 rows (batch.go): a JIT making thousands of versions
// a second costs a statement per 64 versions rather than two or three
// each (an INSERT, its end's UPDATE, a page), since each statement through
// database/sql and cgo costs microseconds; an end recorded while its
// version is held goes into the held row, any other statement first
// writes the held versions, and a commit writes everything held. The
// tracker waits for the writer only at the back-pressure bound (maxPending
// bytes of queued code); Waited reports how often and how long, and the
// run summary says it when it happened. The database is in WAL mode with synchronous=OFF while
// recording: a committed transaction is in the kernel's page cache, which
// survives any crash or kill of ptjit or of the program; only a crash of
// the machine itself can lose the recording's tail (an fsync at each
// checkpoint stalls the writer, and through back-pressure the program:
// docs/decisions.md). Close sets meta.ptjit_state to "complete"
// ("recording" means the run was cut short; "refused: WHY" that ptjit
// killed a program it cannot record: Refuse), folds the WAL into the file
// and leaves WAL mode: a finished recording is one code.db.
//
// A write error (disk full, I/O error) is given to the function set with
// SetOnError once, when it happens, so the user hears of it at once. From
// then on the Recorder takes records and drops them (the program never
// waits on a recording that stopped), rolls back the open transaction,
// and Close writes meta.ptjit_state "failed: ERROR" if the disk takes that
// much; Saved counts the rows of committed transactions, which is what the
// code.db holds. Create removes a code.db it could not set up. A reader
// that cannot fold the WAL of such a run (no room on the disk) reads
// through it, and DB.Incomplete says why a recording is not complete.
//
// The recording directory's lock is an flock on the directory itself
// (LockDir): the run holds it while it records, so a second run into the
// same directory fails at once, and the lock adds no file and ends with
// its holder however it ends.
//
// Reading pages (pagecache.go). A page is read by its hash, a delta's base
// by its row, down to a cached or whole page, and each page read is
// checked against its sha256. The DB keeps the last 1024 pages read
// (4 MiB), by row and by hash: versions read in time order, as a decoder
// and history read them, find each page's base in the cache and apply one
// delta, and the memory held does not grow with the number of versions.
// The queries that read bytes are prepared once per DB. VersionBytes reads
// a version by id without computing its sha256 first (the decoder's image
// reads versions lazily through it: decode/lazy.go), reading the rows of
// the next 64 versions ahead, each joined with its page's row when it has
// one page, in one query (a decoder reads versions in id order: two
// queries a version cost more than SQLite's work for them); EachVersion
// and VersionFilter.NoHash list versions without hashing them.
//
// Reading. Open opens a code.db read-only, as an immutable file: SQLite
// creates nothing beside it, so a recording on a read-only mount or in
// another user's directory reads the same. What a killed run leaves (its
// last transactions in code.db-wal) is folded into code.db by the first
// Open, once, under the directory's lock; a recording still being written
// (the lock is held, or a writer has the database open) is read live
// through SQLite's locks instead. Probe tells a ptjit code.db from any
// other file without changing anything, so that ptjit never replaces what
// it did not write.
//
// Must not import: any ptjit package but clock. The recorder (tracker,
// ptrun) writes code.db and the reader (recording) reads it, on another
// machine too: db is below both.
package db
