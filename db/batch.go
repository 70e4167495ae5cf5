package db

import (
	"strings"
)

// The writer holds versions rows and new pages for multi-row INSERTs:
// a JIT that makes thousands of versions a second costs one statement per
// rowBatch versions instead of one (and an UPDATE for its end) each. Each
// statement through database/sql and cgo costs microseconds on its own,
// more than SQLite's work for a row (on LuaJIT bench.lua, 3 statements
// per version were a quarter of ptjit's CPU: docs/decisions.md).
//
// Order is kept where it matters: any other statement (w.exec) first
// writes the held versions, an end recorded for a held version is written
// with its row, and the transaction's commit writes everything held.
// Pages have no order relative to anything (content-addressed, INSERT OR
// IGNORE), so they wait for their own batch or the commit.
const rowBatch = 64

// versionRow is one versions row waiting for a multi-row INSERT.
type versionRow struct {
	id                int64
	region            int64
	vno               int
	pid, tid          int
	addr, size        uint64
	hashes            []byte
	cause             string
	ip                uint64
	byPtjit           bool
	validTSC          uint64
	validNS           int64
	ended, endInexact bool
	endTSC            uint64
	endNS             int64
}

const versionInsertHead = `INSERT INTO versions(id, region_id, vno, pid, tid, addr, size, pages, cause, ip, by_ptjit, valid_tsc, valid_ns, end_tsc, end_ns, end_inexact) VALUES `

// batchSQL returns head followed by n copies of the placeholder tuple
// (one per row), made once per (head, n).
func (w *writer) batchSQL(head, tuple string, n int) string {
	key := batchKey{head, n}
	if q, ok := w.batchQ[key]; ok {
		return q
	}
	var b strings.Builder
	b.WriteString(head)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(tuple)
	}
	q := b.String()
	w.batchQ[key] = q
	return q
}

type batchKey struct {
	head string
	n    int
}

// holdVersion queues a versions row; a full batch is written at once.
func (w *writer) holdVersion(r versionRow) error {
	w.vidx[r.id] = len(w.vrows)
	w.vrows = append(w.vrows, r)
	if len(w.vrows) >= rowBatch {
		return w.flushVersions()
	}
	return nil
}

// endVersion records the end of version id: in its held row, or with an
// UPDATE of the written one. Like the UPDATE (end_tsc IS NULL), only the
// first end counts.
func (w *writer) endVersion(id int64, tsc uint64, ns int64, inexact bool) error {
	if i, ok := w.vidx[id]; ok {
		r := &w.vrows[i]
		if !r.ended {
			r.ended, r.endTSC, r.endNS, r.endInexact = true, tsc, ns, inexact
		}
		return nil
	}
	if inexact {
		return w.exec(sqlEndVersionInexact, u(tsc), ns, id)
	}
	return w.exec(sqlEndVersion, u(tsc), ns, id)
}

// flushVersions writes the held versions rows in one statement.
func (w *writer) flushVersions() error {
	if len(w.vrows) == 0 {
		return nil
	}
	args := w.args[:0]
	for i := range w.vrows {
		r := &w.vrows[i]
		var endTSC, endNS any
		if r.ended {
			endTSC, endNS = u(r.endTSC), r.endNS
		}
		args = append(args, r.id, r.region, r.vno, r.pid, r.tid, u(r.addr), u(r.size), r.hashes, r.cause, u(r.ip), r.byPtjit,
			u(r.validTSC), r.validNS, endTSC, endNS, r.endInexact)
	}
	q := w.batchSQL(versionInsertHead, "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", len(w.vrows))
	err := w.run(q, args...)
	clear(args)
	w.args = args[:0]
	clear(w.vrows)
	w.vrows = w.vrows[:0]
	clear(w.vidx)
	return err
}

// holdPage queues a new page, row id: data is its bytes, or, when base is
// not 0, its delta against page base (delta.go). The bytes are copied: the
// version's buffer is reused as soon as the version is queued.
func (w *writer) holdPage(id int64, h [32]byte, data []byte, base int64) error {
	off := len(w.parena)
	w.parena = append(w.parena, data...)
	w.prows = append(w.prows, pageRow{id: id, hash: h, off: off, n: len(data), base: base})
	if len(w.prows) >= rowBatch {
		return w.flushPages()
	}
	return nil
}

type pageRow struct {
	id     int64
	hash   [32]byte
	off, n int
	base   int64 // 0: data is the page
}

// flushPages writes the held pages in one INSERT OR IGNORE.
func (w *writer) flushPages() error {
	if len(w.prows) == 0 {
		return nil
	}
	args := w.args[:0]
	for i := range w.prows {
		p := &w.prows[i]
		var base any
		if p.base != 0 {
			base = p.base
		}
		args = append(args, p.id, p.hash[:], w.parena[p.off:p.off+p.n], base)
	}
	q := w.batchSQL(`INSERT OR IGNORE INTO pages(id, sha256, data, base_id) VALUES `, "(?,?,?,?)", len(w.prows))
	err := w.run(q, args...)
	clear(args)
	w.args = args[:0]
	w.prows = w.prows[:0]
	w.parena = w.parena[:0]
	return err
}

// flushHeld writes everything held (before a commit).
func (w *writer) flushHeld() error {
	err := w.flushPages()
	if e := w.flushVersions(); err == nil {
		err = e
	}
	return err
}

// dropHeld forgets what is held (the transaction is rolled back).
func (w *writer) dropHeld() {
	clear(w.vrows)
	w.vrows = w.vrows[:0]
	clear(w.vidx)
	w.prows = w.prows[:0]
	w.parena = w.parena[:0]
}
