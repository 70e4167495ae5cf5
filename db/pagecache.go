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
