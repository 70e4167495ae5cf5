package db

import (
	"crypto/sha256"
	"database/sql"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/mattn/go-sqlite3"
	"github.com/ptjit/ptjit/clock"
	"golang.org/x/sys/unix"
)

// ErrNotCodeDB reports a file that is not a ptjit code.db (or is damaged).
var ErrNotCodeDB = errors.New("not a ptjit code.db")

// FormatError describes a code.db that cannot be read.
type FormatError struct {
	Path   string
	Reason string
}

func (e *FormatError) Error() string { return e.Path + ": " + e.Reason }

// Is makes errors.Is(err, ErrNotCodeDB) match.
func (e *FormatError) Is(target error) bool { return target == ErrNotCodeDB }

// DB is a code.db opened read-only.
type DB struct {
	path string
	sql  *sql.DB
	live bool // a run (or another process) is still writing it
	// versionCols: the columns scanVersion reads, for this schema version
	versionCols string
	schema      int // PRAGMA user_version

	mu sync.Mutex // guards the caches below
	// the bytes of the base version read last: the split versions of a
	// large mapping are slices of it (VersionData)
	baseID   int64
	baseData []byte
	// zeroStates[k] is the SHA-256 state after k zero pages (fillHash:
	// the untouched runs of a large mapping split many times)
	zeroStates [][]byte
	zeroHash   hash.Hash
	// zeros[i]: zero pages from page i on in version zerosID (fillHash)
	zerosID int64
	zeros   []uint32
	// the pages read last (pagecache.go)
	pages pageCache
	// versions rows read ahead (VersionBytes)
	ahead readAheadRows
	// prepared statements (queryRow)
	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt
}

// Open opens the code.db at path read-only and checks that it is one.
func Open(path string) (*DB, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file (no ptjit recording here?)", path)
		}
		return nil, err
	}
	if st.IsDir() {
		return nil, &FormatError{path, "is a directory, not a code.db"}
	}
	live, writing, err := foldWAL(path)
	if err != nil {
		return nil, err
	}
	// A finished recording is read as an immutable file: SQLite creates
	// nothing beside it (no -wal, -shm or lock files), so a copy on a
	// read-only mount or in another user's directory reads as well. Only a
	// recording still being written is read through SQLite's locks.
	params := "?mode=ro&immutable=1"
	if live {
		params = "?mode=ro&_query_only=1"
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + params
	sdb, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var ver int
	if err := sdb.QueryRow(`PRAGMA user_version`).Scan(&ver); err != nil {
		sdb.Close()
		return nil, &FormatError{path, "not a ptjit code.db (" + firstLine(err.Error()) + ")"}
	}
	var format string
	err = sdb.QueryRow(`SELECT value FROM meta WHERE key = 'format'`).Scan(&format)
	if err != nil || format != formatName {
		sdb.Close()
		return nil, &FormatError{path, "not a ptjit code.db (no ptjit meta table)"}
	}
	if ver < MinSchemaVersion || ver > SchemaVersion {
		sdb.Close()
		return nil, &FormatError{path, fmt.Sprintf("code.db schema version %d, this ptjit reads versions %d to %d", ver, MinSchemaVersion, SchemaVersion)}
	}
	d := &DB{path: path, sql: sdb, live: writing, versionCols: versionCols, schema: ver}
	if ver < 4 {
		d.versionCols = versionColsV3
	}
	return d, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Incomplete explains, in one sentence, why the recording may not hold
// everything the run did, or returns "" for a recording its run completed:
// a run still in progress, one that was cut short (killed, or the machine
// stopped: meta.ptjit_state stayed "recording"), one that stopped at a
// write error (its state names the error), one ptjit refused (a 32-bit
// program: "refused: WHY").
func (d *DB) Incomplete() (string, error) {
	var state string
	err := d.sql.QueryRow(`SELECT value FROM meta WHERE key = 'ptjit_state'`).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		state = ""
	case err != nil:
		return "", d.wrap(err)
	}
	switch {
	case state == "complete":
		return "", nil
	case d.live:
		return "the run is still recording it; it holds what was committed so far", nil
	case state == "recording":
		return "its run did not complete it (ptjit was killed, the machine stopped, or a write failed); it holds what was committed until then", nil
	case strings.HasPrefix(state, "refused: "):
		return "ptjit refused the run and killed the program (" + strings.TrimPrefix(state, "refused: ") + "); it holds what was recorded until then", nil
	case strings.HasPrefix(state, "failed: "):
		return "the recording stopped at a write error (" + strings.TrimPrefix(state, "failed: ") + "); it holds what was committed until then", nil
	}
	return fmt.Sprintf("its state is %q, not complete", state), nil
}

// OpenChecked opens the code.db at path as Open does and, when the
// recording is incomplete (Incomplete), tells warn so once, as
// "PATH is incomplete: WHY": the answers are still right for what it
// holds.
func OpenChecked(path string, warn func(msg string)) (*DB, error) {
	d, err := Open(path)
	if err != nil {
		return nil, err
	}
	why, err := d.Incomplete()
	if err != nil {
		d.Close()
		return nil, err
	}
	if why != "" {
		warn(fmt.Sprintf("%s is incomplete: %s", path, why))
	}
	return d, nil
}

// Path returns the file the DB was opened from.
func (d *DB) Path() string { return d.path }

// SQL gives direct read-only access for ad-hoc queries.
func (d *DB) SQL() *sql.DB { return d.sql }

// Close closes the database.
func (d *DB) Close() error {
	d.stmtMu.Lock()
	for _, st := range d.stmts {
		st.Close()
	}
	d.stmts = nil
	d.stmtMu.Unlock()
	return d.sql.Close()
}

func (d *DB) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s", d.path, firstLine(err.Error()))
}

// Meta returns the meta table.
func (d *DB) Meta() (map[string]string, error) {
	rows, err := d.sql.Query(`SELECT key, value FROM meta`)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	m := make(map[string]string)
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, d.wrap(err)
		}
		m[k] = v
	}
	return m, d.wrap(rows.Err())
}

// Command returns the recorded command line.
func (d *DB) Command() ([]string, error) {
	m, err := d.Meta()
	if err != nil {
		return nil, err
	}
	var argv []string
	if err := json.Unmarshal([]byte(m["command"]), &argv); err != nil {
		return nil, &FormatError{d.path, "meta.command is not a JSON array"}
	}
	return argv, nil
}

// VersionInfo describes one code version (without its bytes).
type VersionInfo struct {
	ID       int64
	Region   int64
	Vno      int
	PID, TID int
	Addr     uint64
	Size     uint64
	SHA256   []byte
	Cause    string
	IP       uint64
	ByPtjit  bool
	Valid    clock.Stamp
	End      clock.Stamp // zero when HasEnd is false
	HasEnd   bool
	// EndInexact: End is the last time ptjit knew the version executable
	// (or the next version's start); the program may have taken PROT_EXEC
	// away before, unseen (versions.end_inexact).
	EndInexact bool

	// a split version (Recorder.SplitVersion): its bytes are those of
	// version base from page basePage on; base is 0 otherwise
	base, basePage int64
}

// String describes v in one line: "region R version V [START-END] pid P
// tid T, CAUSE at ip IP, valid from tsc FROM[ to TO]" (ptjit show).
func (v *VersionInfo) String() string {
	s := fmt.Sprintf("region %d version %d [%#x-%#x] pid %d tid %d, %s at ip %#x, valid from tsc %d", v.Region, v.Vno, v.Addr, v.Addr+v.Size, v.PID, v.TID, v.Cause, v.IP, v.Valid.TSC)
	if v.HasEnd {
		s += fmt.Sprintf(" to %d", v.End.TSC)
		if v.EndInexact {
			s += " at the latest"
		}
	}
	return s
}

// Contains reports whether addr lies in the version's range.
func (v *VersionInfo) Contains(addr uint64) bool {
	return addr >= v.Addr && addr-v.Addr < v.Size
}

// ValidAt reports whether the version was valid at TSC t.
func (v *VersionInfo) ValidAt(t uint64) bool {
	return v.Valid.TSC <= t && (!v.HasEnd || t < v.End.TSC)
}

// VersionFilter selects versions; zero fields match everything.
type VersionFilter struct {
	PID     int
	Addr    uint64 // versions whose range contains Addr
	HasAddr bool
	Region  int64
	// NoHash leaves SHA256 nil for versions recorded without one
	// (versions.sha256 is NULL while recording): computing it reads every
	// version's bytes, which a decoder, reading only the versions the
	// trace runs through, does not need.
	NoHash bool
}

const versionCols = `id, region_id, vno, pid, tid, addr, size, sha256, cause, ip, by_ptjit, valid_tsc, valid_ns, end_tsc, end_ns, base_id, base_page, end_inexact`

// versionColsV3 reads a version-3 code.db (no end_inexact: every end exact).
const versionColsV3 = `id, region_id, vno, pid, tid, addr, size, sha256, cause, ip, by_ptjit, valid_tsc, valid_ns, end_tsc, end_ns, base_id, base_page, 0`

func scanVersion(sc interface{ Scan(...any) error }, v *VersionInfo) error {
	var addr, size, ip, vtsc int64
	var etsc, ens, base, basePage sql.NullInt64
	if err := sc.Scan(&v.ID, &v.Region, &v.Vno, &v.PID, &v.TID, &addr, &size, &v.SHA256, &v.Cause, &ip, &v.ByPtjit, &vtsc, &v.Valid.MonoNS, &etsc, &ens, &base, &basePage, &v.EndInexact); err != nil {
		return err
	}
	v.base, v.basePage = base.Int64, basePage.Int64
	v.Addr, v.Size, v.IP, v.Valid.TSC = uint64(addr), uint64(size), uint64(ip), uint64(vtsc)
	v.HasEnd = etsc.Valid
	v.End = clock.Stamp{TSC: uint64(etsc.Int64), MonoNS: ens.Int64}
	return nil
}

// Versions lists the versions matching f in time order (valid_tsc, then id).
func (d *DB) Versions(f VersionFilter) ([]VersionInfo, error) {
	var out []VersionInfo
	if err := d.EachVersion(f, func(v *VersionInfo) error { out = append(out, *v); return nil }); err != nil {
		return nil, err
	}
	if f.NoHash {
		return out, nil
	}
	memo := map[string][]byte{}
	for i := range out {
		if err := d.fillHash(&out[i], memo); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// EachVersion calls fn for each version matching f, in the order Versions
// lists them, without their sha256 (as with f.NoHash) and without holding
// them: a reader of tens of thousands of versions keeps what it needs of
// each. fn must not keep v, and must not query d (the rows are open).
func (d *DB) EachVersion(f VersionFilter, fn func(v *VersionInfo) error) error {
	q := `SELECT ` + d.versionCols + ` FROM versions WHERE 1=1`
	var args []any
	if f.PID != 0 {
		q += ` AND pid = ?`
		args = append(args, f.PID)
	}
	if f.HasAddr {
		q += ` AND addr <= ? AND ? < addr + size`
		args = append(args, u(f.Addr), u(f.Addr))
	}
	if f.Region != 0 {
		q += ` AND region_id = ?`
		args = append(args, f.Region)
	}
	q += ` ORDER BY valid_tsc, id`
	rows, err := d.sql.Query(q, args...)
	if err != nil {
		return d.wrap(err)
	}
	defer rows.Close()
	var v VersionInfo
	for rows.Next() {
		v = VersionInfo{}
		if err := scanVersion(rows, &v); err != nil {
			return d.wrap(err)
		}
		if err := fn(&v); err != nil {
			return err
		}
	}
	return d.wrap(rows.Err())
}

// fillHash computes the sha256 of a version recorded without one from its
// pages. memo maps a version's list of page hashes to its sha256, so that
// versions with the same bytes are hashed once.
func (d *DB) fillHash(v *VersionInfo, memo map[string][]byte) error {
	if v.SHA256 != nil {
		return nil
	}
	if v.base != 0 {
		// A split version: a run of zeros (the untouched part of a
		// large mapping) costs nothing; other bytes are hashed, with
		// no memo (its keys would hold every split's page list).
		zeros, err := d.zeroRun(v.base, v.basePage)
		if err != nil {
			return err
		}
		if n := (v.Size + PageSize - 1) / PageSize; zeros >= n {
			v.SHA256 = d.zeroSum(int(n))
			return nil
		}
		return d.hashBytes(v)
	}
	key, err := d.pageHashes(v)
	if err != nil {
		return err
	}
	if sum, ok := memo[string(key)]; ok {
		v.SHA256 = sum
		return nil
	}
	if allZero(key) {
		v.SHA256 = d.zeroSum(len(key) / 32)
		memo[string(key)] = v.SHA256
		return nil
	}
	if err := d.hashBytes(v); err != nil {
		return err
	}
	memo[string(key)] = v.SHA256
	return nil
}

// hashBytes sets v.SHA256 from v's bytes.
func (d *DB) hashBytes(v *VersionInfo) error {
	data, err := d.VersionData(v)
	if err != nil {
		return err
	}
	sum := sha256Sum(data)
	v.SHA256 = sum[:]
	return nil
}

// zeroRun returns how many zero pages version base (one with pages of its
// own) has from page on. The counts of the base read last are kept.
func (d *DB) zeroRun(base, page int64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.zerosID != base {
		var hashes []byte
		if err := d.sql.QueryRow(`SELECT pages FROM versions WHERE id = ?`, base).Scan(&hashes); err != nil {
			return 0, d.wrap(err)
		}
		n := len(hashes) / 32
		run := make([]uint32, n+1)
		for i := n - 1; i >= 0; i-- {
			if string(hashes[32*i:32*i+32]) == string(zeroHash[:]) {
				run[i] = run[i+1] + 1
			}
		}
		d.zerosID, d.zeros = base, run
	}
	if page < 0 || page >= int64(len(d.zeros)) {
		return 0, nil
	}
	return uint64(d.zeros[page]), nil
}

// allZero reports whether a list of page hashes names zero pages only.
func allZero(hashes []byte) bool {
	for i := 0; i < len(hashes); i += 32 {
		if string(hashes[i:i+32]) != string(zeroHash[:]) {
			return false
		}
	}
	return len(hashes) > 0
}

// zeroSum returns the SHA-256 of n zero pages. The states after 1, 2, ...
// pages are kept, so the runs of zeros a large mapping is split into cost
// one pass over the longest, not one pass each.
func (d *DB) zeroSum(n int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.zeroHash == nil {
		d.zeroHash = sha256.New()
		st, _ := d.zeroHash.(encoding.BinaryMarshaler).MarshalBinary()
		d.zeroStates = [][]byte{st}
	}
	for len(d.zeroStates) <= n {
		d.zeroHash.Write(zeroPage[:])
		st, _ := d.zeroHash.(encoding.BinaryMarshaler).MarshalBinary()
		d.zeroStates = append(d.zeroStates, st)
	}
	h := sha256.New()
	h.(encoding.BinaryUnmarshaler).UnmarshalBinary(d.zeroStates[n])
	return h.Sum(nil)
}

// Version returns one version by id.
func (d *DB) Version(id int64) (*VersionInfo, error) {
	var v VersionInfo
	err := scanVersion(d.sql.QueryRow(`SELECT `+d.versionCols+` FROM versions WHERE id = ?`, id), &v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("%s: no version with id %d", d.path, id)
	}
	if err != nil {
		return nil, d.wrap(err)
	}
	return &v, d.fillHash(&v, map[string][]byte{})
}

// VersionBytes returns the bytes of version id, as VersionData does,
// without computing the version's sha256 first (Version does): for a
// reader of the versions a trace runs through. A version with pages of
// its own costs one query for its row and one per page not cached.
func (d *DB) VersionBytes(id int64) ([]byte, error) {
	r, ok, err := d.versionRow(id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s: no version with id %d", d.path, id)
	}
	if r.base.Valid {
		// split off another version: VersionData keeps the base's bytes
		var v VersionInfo
		if err := scanVersion(d.queryRow(`SELECT `+d.versionCols+` FROM versions WHERE id = ?`, id), &v); err != nil {
			return nil, d.wrap(err)
		}
		return d.VersionData(&v)
	}
	v := VersionInfo{ID: id, Size: uint64(r.size)}
	if uint64(len(r.hashes)) != 32*((v.Size+PageSize-1)/PageSize) {
		return nil, &FormatError{d.path, fmt.Sprintf("version %d: %d bytes of page hashes for %d pages", id, len(r.hashes), (v.Size+PageSize-1)/PageSize)}
	}
	if r.pageID != 0 && v.Size == PageSize {
		// one page, its row read with the version's
		if b := d.pages.get(0, r.hashes); b != nil {
			return b, nil
		}
		return d.pageRow(r.hashes, r.pageID, r.pageData, r.pageBase, func() string { return fmt.Sprintf("version %d: page 0", id) })
	}
	return d.pagesData(&v, r.hashes)
}

// pageHashes returns a version's page hashes (versions.pages), checked to
// be whole: 32 bytes per page of the version.
func (d *DB) pageHashes(v *VersionInfo) ([]byte, error) {
	var hashes []byte
	var base, basePage sql.NullInt64
	if err := d.queryRow(`SELECT pages, base_id, base_page FROM versions WHERE id = ?`, v.ID).Scan(&hashes, &base, &basePage); err != nil {
		return nil, d.wrap(err)
	}
	n := (v.Size + PageSize - 1) / PageSize
	if base.Valid {
		// a split version: its pages are base's, from basePage on
		err := d.queryRow(`SELECT substr(pages, ?, ?) FROM versions WHERE id = ? AND base_id IS NULL`,
			32*basePage.Int64+1, 32*n, base.Int64).Scan(&hashes)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, &FormatError{d.path, fmt.Sprintf("version %d: split off version %d, which has no pages of its own", v.ID, base.Int64)}
		}
		if err != nil {
			return nil, d.wrap(err)
		}
	}
	if uint64(len(hashes)) != 32*n {
		return nil, &FormatError{d.path, fmt.Sprintf("version %d: %d bytes of page hashes for %d pages", v.ID, len(hashes), n)}
	}
	return hashes, nil
}

// VersionData returns the bytes of a version, reassembled from its pages,
// and checks them against the version's SHA-256. The bytes of a split
// version are a slice of its base version's, which the DB keeps (the last
// one read): the caller must not change them.
func (d *DB) VersionData(v *VersionInfo) ([]byte, error) {
	if v.base == 0 {
		return d.versionData(v)
	}
	d.mu.Lock()
	id, data := d.baseID, d.baseData
	d.mu.Unlock()
	if id != v.base {
		// read without the lock: Version takes it (zeroSum)
		b, err := d.Version(v.base)
		if err != nil {
			return nil, err
		}
		if data, err = d.versionData(b); err != nil {
			return nil, err
		}
		d.mu.Lock()
		d.baseID, d.baseData = v.base, data
		d.mu.Unlock()
	}
	lo := uint64(v.basePage) * PageSize
	if lo > uint64(len(data)) || v.Size > uint64(len(data))-lo {
		return nil, &FormatError{d.path, fmt.Sprintf("version %d: split off version %d beyond its end", v.ID, v.base)}
	}
	// Each page was checked against its hash when the base was read;
	// the whole-version sha256 is computed by readers (fillHash), from
	// these bytes: checking it again would hash every split of a large
	// mapping once more.
	return data[lo : lo+v.Size : lo+v.Size], nil
}

// versionData is VersionData for a version with pages of its own.
func (d *DB) versionData(v *VersionInfo) ([]byte, error) {
	hashes, err := d.pageHashes(v)
	if err != nil {
		return nil, err
	}
	return d.pagesData(v, hashes)
}

// pagesData is versionData for a version whose page hashes are known.
func (d *DB) pagesData(v *VersionInfo, hashes []byte) ([]byte, error) {
	if len(hashes) == 32 && v.Size == PageSize && v.SHA256 == nil {
		// one page: the cached page itself (shared, as documented)
		return d.page(hashes, v.ID, 0)
	}
	buf := make([]byte, 0, v.Size)
	// A page repeated in a version (the zero pages of a large fresh
	// mapping) is read and checked once.
	var seen map[string][]byte
	for idx := 0; idx*32 < len(hashes); idx++ {
		hash := hashes[32*idx : 32*idx+32]
		if page, ok := seen[string(hash)]; ok {
			buf = append(buf, page...)
			continue
		}
		page, err := d.page(hash, v.ID, idx)
		if err != nil {
			return nil, err
		}
		if seen == nil {
			seen = make(map[string][]byte)
		}
		if len(seen) < 256 {
			seen[string(hash)] = page
		}
		buf = append(buf, page...)
	}
	if uint64(len(buf)) != v.Size {
		return nil, &FormatError{d.path, fmt.Sprintf("version %d: %d bytes stored for size %d", v.ID, len(buf), v.Size)}
	}
	if v.SHA256 != nil {
		if sum := sha256Sum(buf); string(sum[:]) != string(v.SHA256) {
			return nil, &FormatError{d.path, fmt.Sprintf("version %d: bytes do not match their sha256", v.ID)}
		}
	}
	return buf, nil
}

// FileMapInfo describes a file-backed executable mapping.
type FileMapInfo struct {
	ID         int64
	PID, TID   int
	Addr, Size uint64
	Prot       int
	Path       string
	Dev, Inode uint64
	BuildID    []byte
	Offset     uint64
	Cause      string
	IP         uint64
	Map        clock.Stamp
	Unmap      clock.Stamp
	HasUnmap   bool
}

// FileMaps lists the file-backed executable mappings of pid (all pids when
// pid is 0) in time order.
func (d *DB) FileMaps(pid int) ([]FileMapInfo, error) {
	q := `SELECT id, pid, tid, addr, size, prot, path, dev, inode, build_id, file_offset, cause, ip, map_tsc, map_ns, unmap_tsc, unmap_ns FROM file_maps`
	var args []any
	if pid != 0 {
		q += ` WHERE pid = ?`
		args = append(args, pid)
	}
	q += ` ORDER BY map_tsc, id`
	rows, err := d.sql.Query(q, args...)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	var out []FileMapInfo
	for rows.Next() {
		var m FileMapInfo
		var addr, size, dev, ino, off, ip, mtsc int64
		var utsc, uns sql.NullInt64
		if err := rows.Scan(&m.ID, &m.PID, &m.TID, &addr, &size, &m.Prot, &m.Path, &dev, &ino, &m.BuildID, &off, &m.Cause, &ip, &mtsc, &m.Map.MonoNS, &utsc, &uns); err != nil {
			return nil, d.wrap(err)
		}
		m.Addr, m.Size, m.Dev, m.Inode, m.Offset, m.IP, m.Map.TSC = uint64(addr), uint64(size), uint64(dev), uint64(ino), uint64(off), uint64(ip), uint64(mtsc)
		m.HasUnmap = utsc.Valid
		m.Unmap = clock.Stamp{TSC: uint64(utsc.Int64), MonoNS: uns.Int64}
		out = append(out, m)
	}
	return out, d.wrap(rows.Err())
}

// WriteInfo is one recorded write into code.
type WriteInfo struct {
	ID       int64
	PID, TID int
	At       clock.Stamp
	IP       uint64
	Insn     string
	Addr     uint64
	Old, New []byte
	Version  int64 // 0 when none
}

// Writes lists the W^X write log of pid (all when 0) in time order.
func (d *DB) Writes(pid int) ([]WriteInfo, error) {
	q := `SELECT id, pid, tid, tsc, ns, ip, insn, addr, old, new, version_id FROM writes`
	var args []any
	if pid != 0 {
		q += ` WHERE pid = ?`
		args = append(args, pid)
	}
	q += ` ORDER BY tsc, id`
	rows, err := d.sql.Query(q, args...)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	var out []WriteInfo
	for rows.Next() {
		var w WriteInfo
		var tsc, ip, addr int64
		var ver sql.NullInt64
		if err := rows.Scan(&w.ID, &w.PID, &w.TID, &tsc, &w.At.MonoNS, &ip, &w.Insn, &addr, &w.Old, &w.New, &ver); err != nil {
			return nil, d.wrap(err)
		}
		w.At.TSC, w.IP, w.Addr, w.Version = uint64(tsc), uint64(ip), uint64(addr), ver.Int64
		out = append(out, w)
	}
	return out, d.wrap(rows.Err())
}

// ProcessInfo describes one process image.
type ProcessInfo struct {
	PID, PPID  int
	ExecPath   string
	Argv       []string
	Start, End clock.Stamp
	HasEnd     bool
	ExitStatus int
	HasExit    bool
	VMOwner    int // non-zero: runs in VMOwner's address space (vfork child before exec)
}

// Processes lists process images in start order.
func (d *DB) Processes() ([]ProcessInfo, error) {
	rows, err := d.sql.Query(`SELECT pid, ppid, exec_path, argv, start_tsc, start_ns, end_tsc, end_ns, exit_status, vm_owner FROM processes ORDER BY start_tsc, id`)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	var out []ProcessInfo
	for rows.Next() {
		var p ProcessInfo
		var exe, argv sql.NullString
		var stsc int64
		var etsc, ens, status, owner sql.NullInt64
		if err := rows.Scan(&p.PID, &p.PPID, &exe, &argv, &stsc, &p.Start.MonoNS, &etsc, &ens, &status, &owner); err != nil {
			return nil, d.wrap(err)
		}
		p.ExecPath = exe.String
		if argv.Valid {
			json.Unmarshal([]byte(argv.String), &p.Argv)
		}
		p.Start.TSC = uint64(stsc)
		p.HasEnd, p.End = etsc.Valid, clock.Stamp{TSC: uint64(etsc.Int64), MonoNS: ens.Int64}
		p.HasExit, p.ExitStatus = status.Valid, int(status.Int64)
		p.VMOwner = int(owner.Int64)
		out = append(out, p)
	}
	return out, d.wrap(rows.Err())
}

// ThreadInfo describes one thread.
type ThreadInfo struct {
	TID, PID   int
	Name       string
	Start, End clock.Stamp
	HasEnd     bool
}

// Threads lists threads in start order.
func (d *DB) Threads() ([]ThreadInfo, error) {
	rows, err := d.sql.Query(`SELECT tid, pid, name, start_tsc, start_ns, end_tsc, end_ns FROM threads ORDER BY start_tsc, rowid`)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	var out []ThreadInfo
	for rows.Next() {
		var t ThreadInfo
		var name sql.NullString
		var stsc int64
		var etsc, ens sql.NullInt64
		if err := rows.Scan(&t.TID, &t.PID, &name, &stsc, &t.Start.MonoNS, &etsc, &ens); err != nil {
			return nil, d.wrap(err)
		}
		t.Name, t.Start.TSC = name.String, uint64(stsc)
		t.HasEnd, t.End = etsc.Valid, clock.Stamp{TSC: uint64(etsc.Int64), MonoNS: ens.Int64}
		out = append(out, t)
	}
	return out, d.wrap(rows.Err())
}

// foldWAL handles what a run that did not finish leaves beside its code.db:
// a -wal file holding its last transactions (and a -shm index). If a run
// is still recording into the directory (its lock is held), it reports
// live and changes nothing. Otherwise, under the directory's lock, it
// folds the WAL into code.db and leaves WAL mode (unless a writer still
// has the database open: then it is read live too), so the recording becomes
// the one file a finished run leaves. That needs write access once; on a
// read-only copy with a non-empty WAL it fails with a message saying so
// (an empty WAL is ignored: it holds nothing).
func foldWAL(path string) (live, writing bool, err error) {
	walSize := int64(-1)
	if st, err := os.Stat(path + "-wal"); err == nil {
		walSize = st.Size()
	}
	if _, err := os.Stat(path + "-shm"); walSize < 0 && err != nil {
		return false, false, nil // nothing left over
	}
	dir := filepath.Dir(path)
	lock, err := LockDir(dir)
	if errors.Is(err, ErrRecordingLive) {
		return true, true, nil
	}
	if err == nil {
		defer lock.Close()
	}
	if walSize <= 0 {
		return false, false, nil
	}
	if unix.Access(dir, unix.W_OK) != nil || unix.Access(path, unix.W_OK) != nil {
		return false, false, &FormatError{path, "a run that did not finish left its last transactions in code.db-wal; " +
			"ptjit needs write access to the directory once to fold them in (or copy the recording somewhere writable)"}
	}
	sdb, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_busy_timeout=0&_journal_mode=DELETE")
	if err == nil {
		err = sdb.Ping()
		if cerr := sdb.Close(); err == nil {
			err = cerr
		}
	}
	var se sqlite3.Error
	if errors.As(err, &se) && (se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked) {
		// A writer has it open (a Recorder of this process, or a run
		// that does not hold the directory's lock): read it live.
		return true, true, nil
	}
	if errors.As(err, &se) && (se.Code == sqlite3.ErrFull || se.Code == sqlite3.ErrIoErr) {
		// The disk has no room for the WAL's pages in code.db (the run
		// stopped at a full disk): read through the WAL, as SQLite
		// would, without folding it.
		return true, false, nil
	}
	if err != nil {
		return false, false, fmt.Errorf("%s: folding the WAL a killed run left: %s", path, firstLine(err.Error()))
	}
	return false, false, nil
}

// NameInfo is a name a JIT published for its code (a perf-map line or a
// jitdump code-load record), read by ptjit at At: it was written after
// After and before At.
type NameInfo struct {
	ID     int64
	PID    int
	Addr   uint64
	Size   uint64
	Name   string
	Source string // "perf-map PATH" or "jitdump PATH"
	// Code is the code a jitdump load reported at Addr (Size bytes);
	// nil for a perf-map line.
	Code  []byte
	At    clock.Stamp
	After uint64 // TSC of the previous read (0: none)
}

// HasNames reports whether the code.db's schema can hold names (version 5
// on); an older recording reads as one whose program published none.
func (d *DB) HasNames() bool { return d.schema >= 5 }

// Names lists the names published by pid (all when 0) in the order they
// were read.
func (d *DB) Names(pid int) ([]NameInfo, error) {
	if !d.HasNames() {
		return nil, nil
	}
	q := `SELECT id, pid, addr, size, name, source, tsc, ns, after_tsc, NULL FROM names`
	if d.schema >= 6 {
		q = `SELECT id, pid, addr, size, name, source, tsc, ns, after_tsc, code FROM names`
	}
	var args []any
	if pid != 0 {
		q += ` WHERE pid = ?`
		args = append(args, pid)
	}
	q += ` ORDER BY id`
	rows, err := d.sql.Query(q, args...)
	if err != nil {
		return nil, d.wrap(err)
	}
	defer rows.Close()
	var out []NameInfo
	for rows.Next() {
		var n NameInfo
		var addr, size, tsc, after int64
		if err := rows.Scan(&n.ID, &n.PID, &addr, &size, &n.Name, &n.Source, &tsc, &n.At.MonoNS, &after, &n.Code); err != nil {
			return nil, d.wrap(err)
		}
		n.Addr, n.Size, n.At.TSC, n.After = uint64(addr), uint64(size), uint64(tsc), uint64(after)
		out = append(out, n)
	}
	return out, d.wrap(rows.Err())
}
