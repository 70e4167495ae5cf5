package db

import (
	"container/list"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// Reading pages. A page is read by its hash; one stored as a delta
// (delta.go) is its base page, read the same way, with the delta applied.
// The reader keeps the last pageCacheSize pages it read (whole, checked
// against their hashes), so reading the versions of a range in time order
// reads each page's row and applies one delta to its base, which is in the
// cache: the work of reading a version follows what changed in it, not the
// length of its chain, and the memory held is bounded whatever the number
// of versions.
const pageCacheSize = 1024 // 4 MiB

// pageCache is a DB's cache of pages by row id and by hash, least recently
// used first out.
type pageCache struct {
	mu     sync.Mutex
	byID   map[int64]*list.Element
	byHash map[[32]byte]*list.Element
	lru    list.List // of *cachedPage, most recent first
}

type cachedPage struct {
	id   int64
	hash [32]byte
	data []byte // never changed once cached
}

func (c *pageCache) get(id int64, hash []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	var e *list.Element
	if hash != nil {
		e = c.byHash[[32]byte(hash)]
	} else {
		e = c.byID[id]
	}
	if e == nil {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*cachedPage).data
}

func (c *pageCache) put(id int64, hash [32]byte, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byID == nil {
		c.byID = map[int64]*list.Element{}
		c.byHash = map[[32]byte]*list.Element{}
	}
	if e, ok := c.byID[id]; ok {
		c.lru.MoveToFront(e)
		return
	}
	e := c.lru.PushFront(&cachedPage{id, hash, data})
	c.byID[id], c.byHash[hash] = e, e
	for c.lru.Len() > pageCacheSize {
		old := c.lru.Remove(c.lru.Back()).(*cachedPage)
		delete(c.byID, old.id)
		delete(c.byHash, old.hash)
	}
}

// page returns the bytes of page idx of version vid, whose hash is given,
// checked against it; the slice is shared (the caller must not change it).
func (d *DB) page(hash []byte, vid int64, idx int) ([]byte, error) {
	what := func() string { return fmt.Sprintf("version %d: page %d", vid, idx) }
	if len(hash) != 32 {
		return nil, &FormatError{d.path, fmt.Sprintf("%s: page hash of %d bytes", what(), len(hash))}
	}
	if b := d.pages.get(0, hash); b != nil {
		return b, nil
	}
	var id int64
	var data []byte
	var base sql.NullInt64
	q := `SELECT id, data, base_id FROM pages WHERE sha256 = ?`
	if d.schema < 7 {
		q = `SELECT id, data, NULL FROM pages WHERE sha256 = ?`
	}
	err := d.queryRow(q, hash).Scan(&id, &data, &base)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &FormatError{d.path, what() + " missing"}
	}
	if err != nil {
		return nil, d.wrap(err)
	}
	return d.pageRow(hash, id, data, base, what)
}

// pageRow is page for a page whose row (id, data, base_id) was read.
func (d *DB) pageRow(hash []byte, id int64, data []byte, base sql.NullInt64, what func() string) ([]byte, error) {
	var err error
	if base.Valid {
		if data, err = d.undelta(id, base.Int64, data, what); err != nil {
			return nil, err
		}
	}
	if sum := sha256Sum(data); string(sum[:]) != string(hash) {
		return nil, &FormatError{d.path, fmt.Sprintf("%s does not match its sha256", what())}
	}
	d.pages.put(id, [32]byte(hash), data)
	return data, nil
}

// undelta applies delta (of page row id) to page row base, reading the
// chain down to a cached or whole page.
func (d *DB) undelta(id, base int64, delta []byte, what func() string) ([]byte, error) {
	type link struct {
		id    int64
		delta []byte
	}
	chain := []link{{id, delta}}
	var data []byte
	for {
		if b := d.pages.get(base, nil); b != nil {
			data = b
			break
		}
		if len(chain) > 4*maxDeltaDepth {
			return nil, &FormatError{d.path, fmt.Sprintf("%s: page row %d: a chain of more than %d deltas (a loop?)", what(), id, 4*maxDeltaDepth)}
		}
		var bdata []byte
		var next sql.NullInt64
		err := d.queryRow(`SELECT data, base_id FROM pages WHERE id = ?`, base).Scan(&bdata, &next)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, &FormatError{d.path, fmt.Sprintf("%s: page row %d is a delta against row %d, which is missing", what(), chain[len(chain)-1].id, base)}
		}
		if err != nil {
			return nil, d.wrap(err)
		}
		if !next.Valid {
			data = bdata
			break
		}
		chain = append(chain, link{base, bdata})
		base = next.Int64
	}
	for i := len(chain) - 1; i >= 0; i-- {
		var err error
		if data, err = applyDelta(data, chain[i].delta); err != nil {
			return nil, &FormatError{d.path, fmt.Sprintf("%s: page row %d: %v", what(), chain[i].id, err)}
		}
	}
	return data, nil
}

// queryRow runs a one-row query through a statement prepared once per DB
// (the queries that read versions' bytes run once per page).
func (d *DB) queryRow(q string, args ...any) *sql.Row {
	d.stmtMu.Lock()
	st, ok := d.stmts[q]
	if !ok {
		var err error
		if st, err = d.sql.Prepare(q); err != nil {
			d.stmtMu.Unlock()
			return d.sql.QueryRow(q, args...) // reports the same error
		}
		if d.stmts == nil {
			d.stmts = map[string]*sql.Stmt{}
		}
		d.stmts[q] = st
	}
	d.stmtMu.Unlock()
	return st.QueryRow(args...)
}

// Reading ahead. A decoder reads versions by id, most often in id order
// (a JIT's versions of one range, run one after the other), each a row
// and, for a one-page version, that page's row: two queries through
// database/sql and cgo, more than SQLite's work for them. VersionBytes
// reads the rows of the next readAhead versions, each joined with its
// page's row when it has one page, in one query, and keeps them for the
// calls that follow (at most 4 × readAhead rows are kept).
const readAhead = 64

// aheadRow is a versions row read ahead, with its one page's row (pageID
// 0: none joined).
type aheadRow struct {
	size     int64
	hashes   []byte
	base     sql.NullInt64
	pageID   int64
	pageData []byte
	pageBase sql.NullInt64
}

type readAheadRows struct {
	mu   sync.Mutex
	rows map[int64]*aheadRow
}

// versionRow returns the row of version id (ok false: there is none),
// from the rows read ahead or with those of the next readAhead versions.
func (d *DB) versionRow(id int64) (r *aheadRow, ok bool, err error) {
	d.ahead.mu.Lock()
	r = d.ahead.rows[id]
	delete(d.ahead.rows, id)
	d.ahead.mu.Unlock()
	if r != nil {
		return r, true, nil
	}
	q := `SELECT v.id, v.size, v.pages, v.base_id, p.id, p.data, p.base_id FROM versions v
		LEFT JOIN pages p ON length(v.pages) = 32 AND p.sha256 = v.pages WHERE v.id >= ? AND v.id < ?`
	if d.schema < 7 {
		q = `SELECT v.id, v.size, v.pages, v.base_id, p.id, p.data, NULL FROM versions v
		LEFT JOIN pages p ON length(v.pages) = 32 AND p.sha256 = v.pages WHERE v.id >= ? AND v.id < ?`
	}
	d.stmtMu.Lock()
	st, have := d.stmts[q]
	if !have {
		if st, err = d.sql.Prepare(q); err != nil {
			d.stmtMu.Unlock()
			return nil, false, d.wrap(err)
		}
		if d.stmts == nil {
			d.stmts = map[string]*sql.Stmt{}
		}
		d.stmts[q] = st
	}
	d.stmtMu.Unlock()
	rows, err := st.Query(id, id+readAhead)
	if err != nil {
		return nil, false, d.wrap(err)
	}
	defer rows.Close()
	got := map[int64]*aheadRow{}
	for rows.Next() {
		var vid int64
		var pid sql.NullInt64
		a := &aheadRow{}
		if err := rows.Scan(&vid, &a.size, &a.hashes, &a.base, &pid, &a.pageData, &a.pageBase); err != nil {
			return nil, false, d.wrap(err)
		}
		a.pageID = pid.Int64
		got[vid] = a
	}
	if err := rows.Err(); err != nil {
		return nil, false, d.wrap(err)
	}
	r = got[id]
	delete(got, id)
	d.ahead.mu.Lock()
	if d.ahead.rows == nil || len(d.ahead.rows) > 3*readAhead {
		d.ahead.rows = got
	} else {
		for k, v := range got {
			d.ahead.rows[k] = v
		}
	}
	d.ahead.mu.Unlock()
	return r, r != nil, nil
}
