-- code.db: the code history of one `ptjit run` recording.
--
-- Times: every event carries two clocks taken while the tracee was stopped:
--   *_tsc  raw time-stamp counter (rdtsc), the time base of Intel PT;
--   *_ns   CLOCK_MONOTONIC in nanoseconds.
-- A NULL end time means "still valid when the recording ended".
-- Addresses and sizes are stored as INTEGER; SQLite integers are signed 64-bit,
-- so user-space addresses (< 2^47) are stored as-is.
--
-- The schema version is PRAGMA user_version (7); readers read this version,
-- version 6 (before pages.base_id: every page whole), version 5 (before
-- names.code), version 4 (before the names table) and version 3 (before
-- versions.end_inexact too), and refuse others.

-- Key/value facts about the recording: ptjit version, command line, cwd,
-- tsc_hz (measured TSC frequency), start/end stamps, and the run summary
-- (stops, stop_ns, ...).
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- One row per process image: a fork creates a row, every successful execve
-- creates another one for the same pid (exec_path/argv of the new image).
CREATE TABLE processes (
    id          INTEGER PRIMARY KEY,
    pid         INTEGER NOT NULL,
    ppid        INTEGER NOT NULL,
    exec_path   TEXT,             -- NULL for a forked child before it execs
    argv        TEXT,             -- JSON array of strings
    start_tsc   INTEGER NOT NULL,
    start_ns    INTEGER NOT NULL,
    end_tsc     INTEGER,          -- replaced by exec or exited
    end_ns      INTEGER,
    exit_status INTEGER,          -- exit code, or 128+N when killed by signal N
    vm_owner    INTEGER           -- vfork/CLONE_VM child: the pid whose address
                                  -- space (mappings, versions) this image runs in
);
CREATE INDEX processes_pid ON processes(pid);

CREATE TABLE threads (
    tid       INTEGER NOT NULL,
    pid       INTEGER NOT NULL,
    name      TEXT,
    start_tsc INTEGER NOT NULL,
    start_ns  INTEGER NOT NULL,
    end_tsc   INTEGER,
    end_ns    INTEGER
);
CREATE INDEX threads_tid ON threads(tid);

-- File-backed executable mappings. Their bytes are not copied: a decoder
-- reads them from the file (check dev/inode/build_id first).
CREATE TABLE file_maps (
    id          INTEGER PRIMARY KEY,
    pid         INTEGER NOT NULL,
    tid         INTEGER NOT NULL,
    addr        INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    prot        INTEGER NOT NULL,  -- PROT_* bits as mapped
    path        TEXT NOT NULL,
    dev         INTEGER NOT NULL,  -- st_dev of the file (makedev encoding)
    inode       INTEGER NOT NULL,
    build_id    BLOB,              -- GNU build-id note, when present
    file_offset INTEGER NOT NULL,
    cause       TEXT NOT NULL,     -- exec, mmap, mprotect, mremap
    ip          INTEGER NOT NULL,  -- IP of the syscall (0 for exec)
    map_tsc     INTEGER NOT NULL,
    map_ns      INTEGER NOT NULL,
    unmap_tsc   INTEGER,
    unmap_ns    INTEGER
);
CREATE INDEX file_maps_pid_addr ON file_maps(pid, addr);

-- Anonymous (JIT) executable memory. A region is a range that ptjit tracks
-- from the syscall that first made it executable until it is unmapped.
CREATE TABLE regions (
    id          INTEGER PRIMARY KEY,
    pid         INTEGER NOT NULL,
    addr        INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    created_tsc INTEGER NOT NULL,
    created_ns  INTEGER NOT NULL,
    removed_tsc INTEGER,
    removed_ns  INTEGER
);
CREATE INDEX regions_pid_addr ON regions(pid, addr);

-- A version: the pages [addr, addr+size) as they were made executable by one
-- event (a syscall, or a write ptjit observed). It is valid from valid_tsc
-- until end_tsc (it stopped being executable, was unmapped or was replaced).
CREATE TABLE versions (
    id        INTEGER PRIMARY KEY,
    region_id INTEGER NOT NULL REFERENCES regions(id),
    vno       INTEGER NOT NULL,      -- 1, 2, ... within the region
    pid       INTEGER NOT NULL,
    tid       INTEGER NOT NULL,
    addr      INTEGER NOT NULL,      -- page aligned
    size      INTEGER NOT NULL,      -- page multiple
    sha256    BLOB,                  -- of the bytes [addr, addr+size); NULL while
                                     -- recording (hashing whole versions would slow
                                     -- the run): db.Open's readers compute it
                                     -- from the pages
    pages     BLOB NOT NULL,         -- the sha256 of each page (pages.sha256), 32 bytes
                                     -- each, in address order: one row per version, not
                                     -- one per page (a JIT toggling a 64 KiB area tens of
                                     -- thousands of times a second makes that many
                                     -- versions); the version_pages view unpacks it
                                     -- (empty when base_id is set)
    base_id   INTEGER,               -- a version split off another (the part of it a
                                     -- change left alone, cause split): its pages
                                     -- are those of version base_id from
                                     -- page base_page on, so that a one-page change
                                     -- in a large mapping costs a row, not a copy
                                     -- of its page list; base_id itself always
                                     -- has its own pages. NULL otherwise
    base_page INTEGER,
    cause     TEXT NOT NULL,         -- exec, mmap, mprotect, pkey_mprotect, mremap, shmat, write, wx-batch, split
    ip        INTEGER NOT NULL,      -- IP of the syscall or writing instruction
    by_ptjit  INTEGER NOT NULL DEFAULT 0,
    valid_tsc INTEGER NOT NULL,
    valid_ns  INTEGER NOT NULL,
    end_tsc   INTEGER,
    end_ns    INTEGER,
    end_inexact INTEGER NOT NULL DEFAULT 0, -- 1: the program may have taken
                                     -- PROT_EXEC away earlier, unseen (ptjit stops
                                     -- only calls that add PROT_EXEC, unless it
                                     -- manages the memory: tracker/doc.go); end_* is
                                     -- then the last time ptjit knew the version
                                     -- executable, or the next version's start.
                                     -- Added in schema version 4 (a version-3
                                     -- code.db reads as 0: it stopped every mprotect)
    UNIQUE (region_id, vno)
);
CREATE INDEX versions_pid_addr ON versions(pid, addr);
CREATE INDEX versions_time ON versions(valid_tsc);

-- Page contents, stored once per distinct content (page-granular dedup).
-- A rowid table: new pages append at the end of the table, and only the
-- 32-byte sha256 index takes random inserts (keyed by the hash, 4 KiB rows
-- would split B-tree pages all over the file).
-- A page that differs little from the page at the same address in the
-- version before (a store of a few bytes into code) is stored as a delta
-- against that page (schema 7): base_id names the base page's row and data
-- holds runs of (uvarint bytes kept, uvarint n, n new bytes); the rest of
-- the base is kept (db/delta.go). A chain holds at most 64 deltas after
-- its whole page (a checkpoint). To read a page in SQL,
-- use the whole pages (base_id IS NULL), or ptjit show --raw.
CREATE TABLE pages (
    id      INTEGER PRIMARY KEY,
    sha256  BLOB NOT NULL UNIQUE,    -- of the page's bytes
    data    BLOB NOT NULL,           -- 4096 bytes, or the delta when base_id is set
    base_id INTEGER                  -- NULL: data is the page; else the page data
                                     -- is a delta against (schema 7)
);

-- The pages of each version, in address order (versions.pages unpacked,
-- for queries; ptjit itself reads versions.pages).
CREATE VIEW version_pages(version_id, idx, sha256) AS
    WITH RECURSIVE own(id, pages) AS (
        SELECT v.id, CASE WHEN v.base_id IS NULL THEN v.pages
            ELSE (SELECT substr(b.pages, 32 * v.base_page + 1, 32 * (v.size / 4096)) FROM versions b WHERE b.id = v.base_id) END
        FROM versions v
    ), vp(version_id, idx, sha256, rest) AS (
        SELECT id, 0, substr(pages, 1, 32), substr(pages, 33) FROM own WHERE length(pages) > 0
        UNION ALL
        SELECT version_id, idx + 1, substr(rest, 1, 32), substr(rest, 33) FROM vp WHERE length(rest) > 0
    )
    SELECT version_id, idx, sha256 FROM vp;

-- W^X precise mode: every write the program made into tracked code.
CREATE TABLE writes (
    id         INTEGER PRIMARY KEY,
    pid        INTEGER NOT NULL,
    tid        INTEGER NOT NULL,
    tsc        INTEGER NOT NULL,
    ns         INTEGER NOT NULL,
    ip         INTEGER NOT NULL,     -- the writing instruction
    insn       TEXT NOT NULL,        -- its disassembly
    addr       INTEGER NOT NULL,
    old        BLOB NOT NULL,
    new        BLOB NOT NULL,
    version_id INTEGER               -- the version recorded after the write
);
CREATE INDEX writes_tsc ON writes(tsc);

-- Protection changes ptjit itself made in the tracee (W^X enforcement), so a
-- decoder or a reader can tell them from the program's own.
CREATE TABLE ptjit_prot (
    id     INTEGER PRIMARY KEY,
    pid    INTEGER NOT NULL,
    tsc    INTEGER NOT NULL,
    ns     INTEGER NOT NULL,
    addr   INTEGER NOT NULL,
    size   INTEGER NOT NULL,
    prot   INTEGER NOT NULL,
    reason TEXT NOT NULL
);

-- Names a JIT published for its code (schema 5): one row per line of a
-- perf map (/tmp/perf-PID.map) or code-load record of a jitdump file the
-- program wrote. The line was written before tsc/ns (the stop at which
-- ptjit read it; no code version changes between two reads, see
-- tracker/names.go) and after after_tsc (the previous read; 0 for the
-- first). Which code versions a name belongs to is derived by readers
-- (recording.Names): those around tsc whose bytes in [addr, addr+size)
-- are the bytes present when the line was written. A jitdump's code load
-- carries the code bytes themselves (code, schema 6; NULL for a perf-map
-- line): its name goes to the versions holding exactly those bytes.
CREATE TABLE names (
    id        INTEGER PRIMARY KEY,
    pid       INTEGER NOT NULL,
    addr      INTEGER NOT NULL,
    size      INTEGER NOT NULL,
    name      TEXT NOT NULL,
    source    TEXT NOT NULL,     -- perf-map or jitdump, with the file path: "perf-map /tmp/perf-42.map"
    tsc       INTEGER NOT NULL,
    ns        INTEGER NOT NULL,
    after_tsc INTEGER NOT NULL,
    code      BLOB               -- the code a jitdump load reported (NULL: a perf-map line)
);
CREATE INDEX names_pid_addr ON names(pid, addr);
