package db

import (
	"bytes"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ptjit/ptjit/clock"
)

// Meta describes a recording; it goes into the meta table.
type Meta struct {
	Command []string
	Cwd     string
	TSCHz   uint64 // measured TSC frequency
	Start   clock.Stamp
}

// FileMapping is a file-backed executable mapping.
type FileMapping struct {
	PID, TID   int
	Addr, Size uint64
	Offset     uint64
	Prot       int
	Path       string
	Dev, Inode uint64
	BuildID    []byte
	At         clock.Stamp
	Cause      string
	IP         uint64
}

// Version is one version of JIT code: the bytes of [Addr, Addr+Size) as they
// became executable at At. Data must hold exactly Size bytes; ownership
// passes to the Recorder.
type Version struct {
	Region     int64
	PID, TID   int
	Addr, Size uint64
	Data       []byte
	At         clock.Stamp
	Cause      string
	IP         uint64
	ByPtjit    bool
}

// Write is one write into tracked code observed in W^X precise mode.
type Write struct {
	PID, TID int
	At       clock.Stamp
	IP       uint64
	Insn     string
	Addr     uint64
	Old, New []byte
	Version  int64
}

// ProtChange is a protection change ptjit made in the tracee.
type ProtChange struct {
	PID        int
	At         clock.Stamp
	Addr, Size uint64
	Prot       int
	Reason     string
}

// PageSize is the granularity of deduplicated code storage.
const PageSize = 4096

// The tracker hands work to the writer goroutine in batches: a push only
// appends to the batch (no wake-up per record: at tens of thousands of
// versions a second those cost more than the records). The writer takes the
// batch every takeEvery, or at once when it holds kickOps records or
// kickBytes of code; when maxPending bytes of code wait, the tracker waits
// (back-pressure) rather than growing memory.
const (
	takeEvery  = 10 * time.Millisecond
	kickOps    = 512
	kickBytes  = 4 << 20
	maxPending = 64 << 20
)

// commitEvery bounds how long a recorded event may sit in an open
// transaction: with takeEvery, a ptjit killed with SIGKILL loses at most
// the sum of the two.
const commitEvery = 50 * time.Millisecond

type op struct {
	fn    func(*writer) error
	done  chan error // non-nil: commit, then report
	bytes int        // code bytes the op holds (back-pressure)
}

// Recorder writes a new code.db. All methods except Err must be called from
// one goroutine (the tracker's); they assign IDs synchronously and queue the
// work for a writer goroutine that hashes pages and inserts rows in batched
// transactions.
type Recorder struct {
	path string
	wg   sync.WaitGroup

	// the batch, shared with the writer goroutine
	qmu     sync.Mutex
	room    *sync.Cond // signalled when the writer took a batch
	batch   []op
	pending int // code bytes in the batch and being written
	// waits and waited: how often, and how long in all, the tracker
	// waited for the writer (back-pressure); read with Waited.
	waits  int
	waited time.Duration
	stop   bool // Close: the writer ends after the batch
	kick   chan struct{}

	nextRegion, nextVersion, nextFileMap, nextWrite int64
	vnos                                            map[int64]int

	mu     sync.Mutex
	err    error
	closed bool
	// refused: why the run was refused (Refuse); Close records it as
	// the state instead of "complete"
	refused string
	onErr   func(error) // called once, at the first error (SetOnError)
	// failed is err != nil, read without the lock by the writer's loop
	// at every record.
	failed atomic.Bool
	saved  Saved // what committed transactions hold; final after Close
}

// Saved counts what the recording really holds: the rows of committed
// transactions. After a write error it is less than what was recorded.
type Saved struct {
	Versions, Writes int
}

// SetOnError makes the Recorder call fn once, at its first error (a
// failed write: disk full, I/O error), from whichever goroutine met it,
// so that the error reaches the user when it happens. From then on the
// Recorder keeps taking records, so the program never waits on it, and
// drops them: the recording stops cleanly at its last committed
// transaction, and Close returns the error. Call it before recording.
func (r *Recorder) SetOnError(fn func(error)) {
	r.mu.Lock()
	r.onErr = fn
	r.mu.Unlock()
}

// Saved returns what the committed transactions hold; after Close it is
// what the code.db holds.
func (r *Recorder) Saved() Saved {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saved
}

// Create makes a new code.db at path, replacing any file there, and starts
// its writer goroutine.
func Create(path string, meta Meta) (*Recorder, error) {
	for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s: %w", path+suffix, err)
		}
	}
	// A code.db that cannot be set up (a full disk) is removed: never a
	// half-made recording.
	fail := func(sdb *sql.DB, err error) (*Recorder, error) {
		if sdb != nil {
			sdb.Close()
		}
		for _, suffix := range []string{"", "-wal", "-shm", "-journal"} {
			os.Remove(path + suffix)
		}
		return nil, err
	}
	// synchronous=OFF before the switch to WAL: the driver applies a
	// _journal_mode parameter before _synchronous, so the switch (a write
	// of the new file's header through a rollback journal) would run with
	// synchronous=FULL and cost three fsyncs, milliseconds on every run.
	// Nothing here needs fsync: a recording survives a kill of ptjit or of
	// the program (the page cache holds it), not a crash of the machine.
	sdb, err := sql.Open("sqlite3", "file:"+path+"?_synchronous=OFF&_foreign_keys=off")
	if err != nil {
		return fail(nil, fmt.Errorf("%s: %w", path, err))
	}
	sdb.SetMaxOpenConns(1)
	if _, err := sdb.Exec(`PRAGMA journal_mode = WAL`); err != nil {
		return fail(sdb, fmt.Errorf("%s: %w", path, err))
	}
	// The schema and the meta rows go in one transaction: one write of
	// the WAL instead of one per statement.
	tx, err := sdb.Begin()
	if err != nil {
		return fail(sdb, fmt.Errorf("%s: %w", path, err))
	}
	if _, err := tx.Exec(schemaSQL); err != nil {
		tx.Rollback()
		return fail(sdb, fmt.Errorf("%s: creating schema: %w", path, err))
	}
	if _, err := tx.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
		tx.Rollback()
		return fail(sdb, fmt.Errorf("%s: %w", path, err))
	}
	argv, _ := json.Marshal(meta.Command)
	for k, v := range map[string]string{
		"format":      formatName,
		"command":     string(argv),
		"cwd":         meta.Cwd,
		"tsc_hz":      strconv.FormatUint(meta.TSCHz, 10),
		"start_tsc":   strconv.FormatUint(meta.Start.TSC, 10),
		"start_ns":    strconv.FormatInt(meta.Start.MonoNS, 10),
		"page_size":   strconv.Itoa(PageSize),
		"ptjit_state": "recording",
	} {
		if _, err := tx.Exec(`INSERT INTO meta(key, value) VALUES (?, ?)`, k, v); err != nil {
			tx.Rollback()
			return fail(sdb, fmt.Errorf("%s: %w", path, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return fail(sdb, fmt.Errorf("%s: %w", path, err))
	}
	w, err := newWriter(sdb)
	if err != nil {
		return fail(sdb, fmt.Errorf("%s: %w", path, err))
	}
	r := &Recorder{path: path, kick: make(chan struct{}, 1), vnos: make(map[int64]int)}
	r.room = sync.NewCond(&r.qmu)
	r.wg.Add(1)
	go r.loop(w)
	return r, nil
}

func (r *Recorder) setErr(err error) {
	r.mu.Lock()
	first := r.err == nil
	if first {
		r.err = fmt.Errorf("%s: %w", r.path, err)
		r.failed.Store(true)
	}
	err, fn := r.err, r.onErr
	r.mu.Unlock()
	if first && fn != nil {
		fn(err)
	}
}

// Err returns the first asynchronous error so far, without blocking.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *Recorder) push(fn func(*writer) error) { r.pushOp(op{fn: fn}) }

// Waited reports how many times, and how long in all, the tracker waited
// for the writer because maxPending (or a large version's chunk bound) of
// code bytes were queued: the only time a traced program waits on the
// database.
func (r *Recorder) Waited() (n int, d time.Duration) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	return r.waits, r.waited
}

func (r *Recorder) pushOp(o op) { r.pushOpWithin(o, maxPending) }

// pushOpWithin is pushOp waiting while more than limit bytes of code are
// queued.
func (r *Recorder) pushOpWithin(o op, limit int) {
	if r.closed {
		return
	}
	r.qmu.Lock()
	if r.pending > limit {
		t0 := time.Now()
		for r.pending > limit {
			r.room.Wait()
		}
		r.waited += time.Since(t0)
		r.waits++
	}
	r.batch = append(r.batch, o)
	r.pending += o.bytes
	kick := len(r.batch) >= kickOps || r.pending >= kickBytes || o.done != nil
	r.qmu.Unlock()
	if kick {
		r.wake()
	}
}

func (r *Recorder) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Flush waits until everything queued so far is committed.
func (r *Recorder) Flush() error {
	if r.closed {
		return r.Err()
	}
	done := make(chan error, 1)
	r.pushOp(op{done: done})
	if err := <-done; err != nil {
		r.setErr(err)
	}
	return r.Err()
}

// Refuse marks the run as refused for why (ptjit stopped the program
// because it cannot record it): Close records meta.ptjit_state as
// "refused: WHY" instead of "complete", and readers report the recording
// as incomplete.
func (r *Recorder) Refuse(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused = why
}

// Close flushes, marks the recording complete (or refused: Refuse) and
// closes the database. It returns the first error the recording met.
func (r *Recorder) Close() error {
	if r.closed {
		return r.Err()
	}
	r.mu.Lock()
	state := "complete"
	if r.refused != "" {
		state = "refused: " + r.refused
	}
	r.mu.Unlock()
	r.SetStat("ptjit_state", state)
	r.Flush()
	r.closed = true
	r.qmu.Lock()
	r.stop = true
	r.qmu.Unlock()
	r.wake()
	r.wg.Wait()
	return r.Err()
}

func (r *Recorder) loop(w *writer) {
	defer r.wg.Done()
	defer w.close(r)
	tick := time.NewTicker(takeEvery)
	defer tick.Stop()
	var spare []op
	for {
		select {
		case <-r.kick:
		case <-tick.C:
		}
		r.qmu.Lock()
		b, stop := r.batch, r.stop
		r.batch = spare[:0]
		r.qmu.Unlock()
		bytes := 0
		for i := range b {
			o := &b[i]
			// After the first error the records are taken and dropped:
			// the program never waits on a recording that has stopped.
			if o.fn != nil && !r.failed.Load() {
				if err := w.begin(); err != nil {
					r.setErr(err)
				} else if err := o.fn(w); err != nil {
					r.setErr(err)
				}
			}
			if o.done != nil {
				o.done <- r.commit(w)
			}
			bytes += o.bytes
			*o = op{} // drop the closure and its code bytes
		}
		spare = b
		r.qmu.Lock()
		r.pending -= bytes
		r.room.Broadcast()
		r.qmu.Unlock()
		if stop {
			if err := r.commit(w); err != nil {
				r.setErr(err)
			}
			return
		}
		if w.tx != nil && time.Since(w.txStart) >= commitEvery {
			if err := r.commit(w); err != nil {
				r.setErr(err)
			}
		}
	}
}

// ProcessStart records a new process (the traced program, or a fork).
func (r *Recorder) ProcessStart(pid, ppid int, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.exec(sqlProcessStart, pid, ppid, u(at.TSC), at.MonoNS)
	})
}

// SharesVM records that pid (a vfork or CLONE_VM child, before it execs)
// runs in the address space of owner: its code is owner's mappings and
// versions, which are recorded under owner's pid only.
func (r *Recorder) SharesVM(pid, owner int) {
	r.push(func(w *writer) error {
		return w.exec(`UPDATE processes SET vm_owner = ? WHERE pid = ? AND end_tsc IS NULL`, owner, pid)
	})
}

// Exec records a successful execve: the current image of pid ends and a new
// one starts.
func (r *Recorder) Exec(pid int, path string, argv []string, at clock.Stamp) {
	a, _ := json.Marshal(argv)
	r.push(func(w *writer) error {
		var ppid int
		var exe sql.NullString
		var owner sql.NullInt64
		row := w.tx.QueryRow(`SELECT ppid, exec_path, vm_owner FROM processes WHERE pid = ? AND end_tsc IS NULL ORDER BY id DESC LIMIT 1`, pid)
		switch err := row.Scan(&ppid, &exe, &owner); {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case !exe.Valid && !owner.Valid:
			// A forked child that had not exec'd yet: this exec names it.
			return w.exec(`UPDATE processes SET exec_path = ?, argv = ? WHERE pid = ? AND end_tsc IS NULL AND exec_path IS NULL`, path, string(a), pid)
		default:
			if err := w.exec(`UPDATE processes SET end_tsc = ?, end_ns = ? WHERE pid = ? AND end_tsc IS NULL`, u(at.TSC), at.MonoNS, pid); err != nil {
				return err
			}
		}
		return w.exec(`INSERT INTO processes(pid, ppid, exec_path, argv, start_tsc, start_ns) VALUES (?, ?, ?, ?, ?, ?)`,
			pid, ppid, path, string(a), u(at.TSC), at.MonoNS)
	})
}

// ProcessExit records the end of a process with its status (exit code, or
// 128+N when signal N killed it).
func (r *Recorder) ProcessExit(pid int, status int, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.exec(`UPDATE processes SET end_tsc = ?, end_ns = ?, exit_status = ? WHERE pid = ? AND end_tsc IS NULL`,
			u(at.TSC), at.MonoNS, status, pid)
	})
}

// ThreadStart records a new thread of pid (the main thread included).
func (r *Recorder) ThreadStart(tid, pid int, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.exec(sqlThreadStart, tid, pid, u(at.TSC), at.MonoNS)
	})
}

// ThreadName records the name (comm) of a live thread.
func (r *Recorder) ThreadName(tid int, name string) {
	r.push(func(w *writer) error {
		return w.exec(`UPDATE threads SET name = ? WHERE tid = ? AND end_tsc IS NULL`, name, tid)
	})
}

// ThreadExit records the end of a thread.
func (r *Recorder) ThreadExit(tid int, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.exec(sqlThreadExit, u(at.TSC), at.MonoNS, tid)
	})
}

// FileMap records a file-backed executable mapping and returns its id.
func (r *Recorder) FileMap(m FileMapping) int64 {
	r.nextFileMap++
	id := r.nextFileMap
	r.push(func(w *writer) error {
		return w.exec(`INSERT INTO file_maps(id, pid, tid, addr, size, prot, path, dev, inode, build_id, file_offset, cause, ip, map_tsc, map_ns)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, m.PID, m.TID, u(m.Addr), u(m.Size), m.Prot, m.Path, u(m.Dev), u(m.Inode), nilIfEmpty(m.BuildID), u(m.Offset), m.Cause, u(m.IP), u(m.At.TSC), m.At.MonoNS)
	})
	return id
}

// FileUnmap records the end of a file-backed mapping.
func (r *Recorder) FileUnmap(id int64, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.exec(`UPDATE file_maps SET unmap_tsc = ?, unmap_ns = ? WHERE id = ? AND unmap_tsc IS NULL`, u(at.TSC), at.MonoNS, id)
	})
}

// NewRegion records a JIT code region and returns its id.
func (r *Recorder) NewRegion(pid int, addr, size uint64, at clock.Stamp) int64 {
	r.nextRegion++
	id := r.nextRegion
	r.push(func(w *writer) error {
		return w.exec(`INSERT INTO regions(id, pid, addr, size, created_tsc, created_ns) VALUES (?, ?, ?, ?, ?, ?)`,
			id, pid, u(addr), u(size), u(at.TSC), at.MonoNS)
	})
	return id
}

// EndRegion records that a region was unmapped.
func (r *Recorder) EndRegion(id int64, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.exec(`UPDATE regions SET removed_tsc = ?, removed_ns = ? WHERE id = ? AND removed_tsc IS NULL`, u(at.TSC), at.MonoNS, id)
	})
}

// newVersion assigns a version's id and number within its region.
func (r *Recorder) newVersion(region int64) (id int64, vno int) {
	r.nextVersion++
	r.vnos[region]++
	return r.nextVersion, r.vnos[region]
}

// AddVersion records a code version and returns its id and its number within
// the region. The bytes are hashed and stored by the writer goroutine.
func (r *Recorder) AddVersion(v Version) (id int64, vno int) {
	id, vno = r.newVersion(v.Region)
	if uint64(len(v.Data)) != v.Size {
		r.setErr(fmt.Errorf("version %d at %#x: %d bytes for size %d", id, v.Addr, len(v.Data), v.Size))
		return id, vno
	}
	r.pushOp(op{fn: func(w *writer) error {
		err := w.addVersion(id, vno, &v)
		if err == nil {
			w.txSaved.Versions++
		}
		return err
	}, bytes: len(v.Data)})
	return id, vno
}

// ChunkSize is how much of a version AddVersionRead reads and queues at a
// time: a version of a large mapping never sits whole in memory, and no
// more than readPending bytes of it wait for the writer.
const (
	ChunkSize   = 1 << 20
	readPending = 8 << 20
)

// AddVersionRead is AddVersion for a version whose bytes read fills (read
// is given the address and a buffer for each chunk), ChunkSize bytes at a
// time, all of them before it returns. A chunk whose read fails is recorded as
// zeros; the first such error is returned. v.Data is ignored.
func (r *Recorder) AddVersionRead(v Version, read func(addr uint64, b []byte) error) (id int64, vno int, err error) {
	id, vno = r.newVersion(v.Region)
	v.Data = nil
	for off := uint64(0); off < v.Size; off += ChunkSize {
		b := Buffer(int(min(ChunkSize, v.Size-off)))
		if e := read(v.Addr+off, b); e != nil {
			clear(b)
			if err == nil {
				err = e
			}
		}
		addr := v.Addr + off
		r.pushOpWithin(op{fn: func(w *writer) error { return w.addChunk(id, v.PID, addr, b) }, bytes: len(b)}, readPending)
	}
	r.pushOp(op{fn: func(w *writer) error {
		err := w.addVersion(id, vno, &v)
		if err == nil {
			w.txSaved.Versions++
		}
		return err
	}})
	return id, vno, err
}

// AddrRun is a run of pages [Addr, Addr+Size), page-aligned.
type AddrRun struct{ Addr, Size uint64 }

// AddVersionSparse is AddVersionRead for a version of which only the
// runs (sorted, disjoint, page-aligned, inside the version) may hold other
// bytes than zeros: those are read, a chunk at a time; every other page is
// recorded as the zero page without being read, compared or hashed. The
// tracker knows such pages of private anonymous memory from the page
// table (never written since mapped or dropped): SBCL's 1 GiB dynamic
// space, a JIT's reservation, cost the pages in use, not the mapping.
func (r *Recorder) AddVersionSparse(v Version, runs []AddrRun, read func(addr uint64, b []byte) error) (id int64, vno int, err error) {
	id, vno = r.newVersion(v.Region)
	v.Data = nil
	end := v.Addr + v.Size
	at := v.Addr
	zeros := func(from, to uint64) {
		if from < to {
			n := int((to - from) / PageSize)
			r.pushOp(op{fn: func(w *writer) error { return w.addZeros(id, v.PID, from, n) }})
		}
	}
	for _, run := range runs {
		s, e := max(run.Addr, at), min(run.Addr+run.Size, end)
		if s >= e || s%PageSize != 0 {
			continue
		}
		zeros(at, s)
		for off := s; off < e; off += ChunkSize {
			b := Buffer(int(min(ChunkSize, e-off)))
			if rerr := read(off, b); rerr != nil {
				clear(b)
				if err == nil {
					err = rerr
				}
			}
			addr := off
			r.pushOpWithin(op{fn: func(w *writer) error { return w.addChunk(id, v.PID, addr, b) }, bytes: len(b)}, readPending)
		}
		at = e
	}
	zeros(at, end)
	r.pushOp(op{fn: func(w *writer) error {
		err := w.addVersion(id, vno, &v)
		if err == nil {
			w.txSaved.Versions++
		}
		return err
	}})
	return id, vno, err
}

// PageRun is a run of a version's pages read anew (AddVersionPages).
type PageRun struct {
	Addr uint64 // page-aligned, inside the version
	Data []byte // whole pages; from Buffer, its ownership passes with the call
}

// AddVersionPages records a version of the range [v.Addr, v.Addr+v.Size)
// whose bytes are base's, except for the pages in runs: only those are
// hashed and stored, and the row names base's page hashes for the rest.
// base must be a version of the same range that AddVersion,
// AddVersionRead or AddVersionPages recorded (not a split one); the
// tracker calls it with the pages written since base was read
// (tracker/pages_linux_amd64.go). v.Data is ignored.
func (r *Recorder) AddVersionPages(v Version, base int64, runs []PageRun) (id int64, vno int) {
	id, vno = r.newVersion(v.Region)
	v.Data = nil
	n := 0
	for _, run := range runs {
		if run.Addr < v.Addr || run.Addr+uint64(len(run.Data)) > v.Addr+v.Size || (run.Addr-v.Addr)%PageSize != 0 {
			r.setErr(fmt.Errorf("version %d at %#x: pages at %#x outside it", id, v.Addr, run.Addr))
			return id, vno
		}
		n += len(run.Data)
	}
	r.pushOp(op{fn: func(w *writer) error {
		err := w.addVersionPages(id, vno, &v, base, runs)
		if err == nil {
			w.txSaved.Versions++
		}
		return err
	}, bytes: n})
	return id, vno
}

// SplitVersion records a version whose bytes are those that version base,
// which starts at baseAddr, has at [v.Addr, v.Addr+v.Size): a part of a
// version that a change of other pages left alone goes on as a version of
// its own. base must be a version AddVersion or AddVersionRead recorded
// (not a split one). Nothing is read or hashed: the row names base's
// pages, so it costs the same for one page or a gigabyte. v.Data is
// ignored.
func (r *Recorder) SplitVersion(v Version, base int64, baseAddr uint64) (id int64, vno int) {
	id, vno = r.newVersion(v.Region)
	page := (v.Addr - baseAddr) / PageSize
	v.Data = nil
	r.push(func(w *writer) error {
		err := w.exec(sqlSplitVersion, id, v.Region, vno, v.PID, v.TID, u(v.Addr), u(v.Size), base, u(page),
			v.Cause, u(v.IP), v.ByPtjit, u(v.At.TSC), v.At.MonoNS)
		if err == nil {
			w.txSaved.Versions++
		}
		return err
	})
	return id, vno
}

// EndVersion records that a version stopped being executable.
func (r *Recorder) EndVersion(id int64, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.endVersion(id, at.TSC, at.MonoNS, false)
	})
}

// EndVersionInexact records that a version was executable until at at the
// latest: the program may have taken PROT_EXEC away before, in a call
// ptjit's filter let through (tracker/doc.go).
func (r *Recorder) EndVersionInexact(id int64, at clock.Stamp) {
	r.push(func(w *writer) error {
		return w.endVersion(id, at.TSC, at.MonoNS, true)
	})
}

// AddWrite records one write into tracked code (W^X precise mode).
func (r *Recorder) AddWrite(wr Write) {
	r.nextWrite++
	id := r.nextWrite
	r.push(func(w *writer) error {
		var ver any
		if wr.Version != 0 {
			ver = wr.Version
		}
		err := w.exec(sqlWrite, id, wr.PID, wr.TID, u(wr.At.TSC), wr.At.MonoNS, u(wr.IP), wr.Insn, u(wr.Addr), wr.Old, wr.New, ver)
		if err == nil {
			w.txSaved.Writes++
		}
		return err
	})
}

// Name records a name the program published for its code (NameInfo; its
// ID is ignored).
func (r *Recorder) Name(n NameInfo) {
	r.push(func(w *writer) error {
		return w.exec(sqlName, n.PID, u(n.Addr), u(n.Size), n.Name, n.Source, u(n.At.TSC), n.At.MonoNS, u(n.After), nilIfEmpty(n.Code))
	})
}

// ProtChange records a protection change ptjit made in the tracee.
func (r *Recorder) ProtChange(p ProtChange) {
	r.push(func(w *writer) error {
		return w.exec(sqlProt, p.PID, u(p.At.TSC), p.At.MonoNS, u(p.Addr), u(p.Size), p.Prot, p.Reason)
	})
}

// SetStat stores a key/value fact (summary numbers) in the meta table.
func (r *Recorder) SetStat(key, value string) {
	r.push(func(w *writer) error {
		return w.exec(`INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`, key, value)
	})
}

// u converts an address or TSC for storage: SQLite integers are signed.
func u(v uint64) int64 { return int64(v) }

func nilIfEmpty(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// writer is the state of the writer goroutine.
type writer struct {
	db      *sql.DB
	tx      *sql.Tx
	txStart time.Time
	txSaved Saved // what the open transaction adds
	stmts   map[string]*sql.Stmt
	known   map[[32]byte]pageRef // pages already stored, by hash
	// nextPage: the last pages.id assigned (the writer assigns them, so
	// that a delta can name its base before either is written)
	nextPage int64
	delta    []byte // makeDelta's buffer
	// last remembers, for each page address of each process, the bytes
	// and hash it had in the latest version that covered it: a JIT that
	// toggles a large area RW/RX changes few of its pages each time, and
	// comparing bytes is far cheaper than hashing them. Zero pages are
	// not remembered (they are recognised by their bytes), and at most
	// maxMemo pages are: a large mapping must not be held in memory twice.
	last map[pageKey]*pageMemo
	// partial holds the page hashes of versions AddVersionRead is still
	// queuing, by id.
	partial map[int64][]byte
	// rows held for multi-row INSERTs (batch.go)
	vrows  []versionRow
	vidx   map[int64]int // id → index in vrows
	prows  []pageRow
	parena []byte // the held pages' bytes
	args   []any
	batchQ map[batchKey]string
}

// maxMemo bounds writer.last: 8 MiB of page copies (a JIT toggling a
// 64 KiB area needs 16 pages).
const maxMemo = 2048

// zeroPage and zeroHash: untouched anonymous memory, the bulk of a large
// fresh mapping, costs a comparison, not a hash.
var (
	zeroPage [PageSize]byte
	zeroHash = sha256.Sum256(zeroPage[:])
)

type pageKey struct {
	pid  int
	addr uint64
}

type pageMemo struct {
	data []byte
	hash [32]byte
}

const (
	sqlProcessStart      = `INSERT INTO processes(pid, ppid, start_tsc, start_ns) VALUES (?, ?, ?, ?)`
	sqlThreadStart       = `INSERT INTO threads(tid, pid, start_tsc, start_ns) VALUES (?, ?, ?, ?)`
	sqlThreadExit        = `UPDATE threads SET end_tsc = ?, end_ns = ? WHERE tid = ? AND end_tsc IS NULL`
	sqlSplitVersion      = `INSERT INTO versions(id, region_id, vno, pid, tid, addr, size, pages, base_id, base_page, cause, ip, by_ptjit, valid_tsc, valid_ns) VALUES (?, ?, ?, ?, ?, ?, ?, X'', ?, ?, ?, ?, ?, ?, ?)`
	sqlEndVersion        = `UPDATE versions SET end_tsc = ?, end_ns = ? WHERE id = ? AND end_tsc IS NULL`
	sqlEndVersionInexact = `UPDATE versions SET end_tsc = ?, end_ns = ?, end_inexact = 1 WHERE id = ? AND end_tsc IS NULL`
	sqlWrite             = `INSERT INTO writes(id, pid, tid, tsc, ns, ip, insn, addr, old, new, version_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlName              = `INSERT INTO names(pid, addr, size, name, source, tsc, ns, after_tsc, code) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlProt              = `INSERT INTO ptjit_prot(pid, tsc, ns, addr, size, prot, reason) VALUES (?, ?, ?, ?, ?, ?, ?)`
)

func newWriter(sdb *sql.DB) (*writer, error) {
	// An 8 MiB page cache holds the indexes' hot pages (a 64 MiB one made
	// glibc grow the writer thread's arena a page at a time as it filled:
	// 13,000 mprotect calls, each a TLB shoot-down across ptjit's threads,
	// on a LuaJIT run; 1,500 now). A checkpoint every 4 MiB of WAL
	// (SQLite's default; with synchronous=OFF it copies without fsync):
	// the copy into the main file happens on this goroutine while the
	// program runs, and Close, which the user waits for, folds in at most
	// the last 4 MiB. With one every 64 MiB, Close copied the whole
	// recording: 82-237 ms against 32-48 ms at the end of a LuaJIT
	// bench.lua 2000 run (33 MB code.db).
	for _, p := range []string{`PRAGMA cache_size = -8192`, `PRAGMA wal_autocheckpoint = 1024`} {
		if _, err := sdb.Exec(p); err != nil {
			return nil, err
		}
	}
	return &writer{db: sdb, stmts: make(map[string]*sql.Stmt), known: make(map[[32]byte]pageRef), last: make(map[pageKey]*pageMemo), partial: make(map[int64][]byte),
		vidx: make(map[int64]int), batchQ: make(map[batchKey]string)}, nil
}

func (w *writer) begin() error {
	if w.tx != nil {
		return nil
	}
	tx, err := w.db.Begin()
	if err != nil {
		return err
	}
	w.tx = tx
	w.txStart = time.Now()
	return nil
}

// exec runs q in the open transaction, preparing it once per transaction,
// after the versions rows the writer holds (batch.go).
func (w *writer) exec(q string, args ...any) error {
	if err := w.flushVersions(); err != nil {
		return err
	}
	return w.run(q, args...)
}

// run runs q in the open transaction, preparing it once per transaction.
func (w *writer) run(q string, args ...any) error {
	s, ok := w.stmts[q]
	if !ok {
		var err error
		if s, err = w.tx.Prepare(q); err != nil {
			return err
		}
		w.stmts[q] = s
	}
	_, err := s.Exec(args...)
	return err
}

func (w *writer) commit() error {
	if w.tx == nil {
		return nil
	}
	if err := w.flushHeld(); err != nil {
		w.tx.Rollback()
		w.tx = nil
		w.dropHeld()
		clear(w.stmts)
		return err
	}
	for _, s := range w.stmts {
		s.Close()
	}
	clear(w.stmts)
	err := w.tx.Commit()
	w.tx = nil
	return err
}

// commit commits the writer's transaction and, when it succeeds, counts
// what it held as saved. After an error nothing more is committed.
func (r *Recorder) commit(w *writer) error {
	if r.failed.Load() {
		if w.tx != nil {
			w.tx.Rollback()
			w.tx = nil
			clear(w.stmts)
		}
		w.dropHeld()
		w.txSaved = Saved{}
		return r.Err()
	}
	err := w.commit()
	if err == nil {
		r.mu.Lock()
		r.saved.Versions += w.txSaved.Versions
		r.saved.Writes += w.txSaved.Writes
		r.mu.Unlock()
	}
	w.txSaved = Saved{}
	return err
}

// addVersion inserts version id: its pages are v.Data, or, for
// AddVersionRead, the chunks addChunk took.
func (w *writer) addVersion(id int64, vno int, v *Version) error {
	// The version's own sha256 is left to readers (see schema.sql): only
	// its pages are hashed here, and only those that changed.
	hashes, err := w.pages(w.partial[id], v.PID, v.Addr, v.Data)
	delete(w.partial, id)
	if err == nil {
		err = w.holdVersion(versionRow{id: id, region: v.Region, vno: vno, pid: v.PID, tid: v.TID, addr: v.Addr, size: v.Size,
			hashes: hashes, cause: v.Cause, ip: v.IP, byPtjit: v.ByPtjit, validTSC: v.At.TSC, validNS: v.At.MonoNS})
	}
	releaseBuffer(v.Data) // SQLite copied what it keeps
	v.Data = nil
	return err
}

// addVersionPages inserts version id (AddVersionPages): base's page
// hashes, with those of runs stored and put in their place.
func (w *writer) addVersionPages(id int64, vno int, v *Version, base int64, runs []PageRun) error {
	defer func() {
		for _, run := range runs {
			releaseBuffer(run.Data)
		}
	}()
	var hashes []byte
	if i, ok := w.vidx[base]; ok {
		// still held for a multi-row INSERT (batch.go)
		hashes = append([]byte(nil), w.vrows[i].hashes...)
	} else if err := w.queryRow(`SELECT pages FROM versions WHERE id = ?`, base).Scan(&hashes); err != nil {
		return fmt.Errorf("version %d: base version %d: %w", id, base, err)
	}
	if want := int((v.Size + PageSize - 1) / PageSize * 32); len(hashes) != want {
		return fmt.Errorf("version %d: base version %d has %d page hashes, not %d", id, base, len(hashes)/32, want/32)
	}
	for _, run := range runs {
		h, err := w.pages(nil, v.PID, run.Addr, run.Data)
		if err != nil {
			return err
		}
		copy(hashes[(run.Addr-v.Addr)/PageSize*32:], h)
	}
	return w.holdVersion(versionRow{id: id, region: v.Region, vno: vno, pid: v.PID, tid: v.TID, addr: v.Addr, size: v.Size,
		hashes: hashes, cause: v.Cause, ip: v.IP, byPtjit: v.ByPtjit, validTSC: v.At.TSC, validNS: v.At.MonoNS})
}

// queryRow runs a one-row query in the open transaction, preparing it once
// per transaction (as exec does).
func (w *writer) queryRow(q string, args ...any) *sql.Row {
	s, ok := w.stmts[q]
	if !ok {
		var err error
		if s, err = w.tx.Prepare(q); err != nil {
			return w.tx.QueryRow(q, args...) // reports the same error
		}
		w.stmts[q] = s
	}
	return s.QueryRow(args...)
}

// addChunk stores the pages of one chunk of version id (AddVersionRead),
// at addr, and keeps their hashes for addVersion.
func (w *writer) addChunk(id int64, pid int, addr uint64, data []byte) error {
	hashes, err := w.pages(w.partial[id], pid, addr, data)
	w.partial[id] = hashes
	releaseBuffer(data)
	return err
}

// pages stores the pages of data (at addr in pid) that are not stored yet
// and appends their hashes to hashes. A page that changed little since the
// version before it at the same address is stored as a delta against that
// page (delta.go).
func (w *writer) pages(hashes []byte, pid int, addr uint64, data []byte) ([]byte, error) {
	if hashes == nil {
		hashes = make([]byte, 0, (len(data)+PageSize-1)/PageSize*32)
	}
	for i := 0; i*PageSize < len(data); i++ {
		end := min((i+1)*PageSize, len(data))
		page := data[i*PageSize : end]
		key := pageKey{pid, addr + uint64(i*PageSize)}
		var h [32]byte
		var delta []byte // non-nil: page as a delta against base
		var base [32]byte
		if m, ok := w.last[key]; ok && bytes.Equal(m.data, page) {
			h = m.hash
		} else if len(page) == PageSize && bytes.Equal(page, zeroPage[:]) {
			h = zeroHash
			delete(w.last, key)
		} else {
			h = sha256.Sum256(page)
			if _, known := w.known[h]; !known && m != nil {
				if b, ok := w.known[m.hash]; ok && b.depth < maxDeltaDepth {
					delta, base = makeDelta(w.delta[:0], m.data, page), m.hash
					if delta != nil {
						w.delta = delta
					}
				}
			}
			if m == nil && len(w.last) < maxMemo {
				m = &pageMemo{data: make([]byte, 0, PageSize)}
				w.last[key] = m
			}
			if m != nil {
				// a copy: the version's buffer goes back to the pool
				m.data, m.hash = append(m.data[:0], page...), h
			}
		}
		if _, ok := w.known[h]; !ok {
			w.nextPage++
			ref := pageRef{id: w.nextPage}
			var baseID int64
			if delta != nil {
				b := w.known[base]
				baseID, ref.depth = b.id, b.depth+1
				page = delta
			}
			if err := w.holdPage(ref.id, h, page, baseID); err != nil {
				return hashes, err
			}
			w.known[h] = ref
		}
		hashes = append(hashes, h[:]...)
	}
	return hashes, nil
}

// addZeros appends n zero pages, at addr in pid, to version id's hashes
// (AddVersionSparse): the zero page is stored once, and the memo of the
// pages last seen at those addresses forgets them, as pages does for a
// page of zeros.
func (w *writer) addZeros(id int64, pid int, addr uint64, n int) error {
	if _, ok := w.known[zeroHash]; !ok {
		w.nextPage++
		ref := pageRef{id: w.nextPage}
		if err := w.holdPage(ref.id, zeroHash, zeroPage[:], 0); err != nil {
			return err
		}
		w.known[zeroHash] = ref
	}
	end := addr + uint64(n)*PageSize
	if len(w.last) < n {
		for key := range w.last {
			if key.pid == pid && key.addr >= addr && key.addr < end {
				delete(w.last, key)
			}
		}
	} else {
		for a := addr; a < end; a += PageSize {
			delete(w.last, pageKey{pid, a})
		}
	}
	hashes := w.partial[id]
	if hashes == nil {
		hashes = make([]byte, 0, n*32)
	}
	for i := 0; i < n; i++ {
		hashes = append(hashes, zeroHash[:]...)
	}
	w.partial[id] = hashes
	return nil
}

// pageRef is a stored page: its row id, and how many deltas lie between it
// and a whole page (0: it is whole).
type pageRef struct {
	id    int64
	depth uint8
}

// Buffers that versions are read into are recycled: a JIT that toggles a
// 64 KiB area tens of thousands of times a second would otherwise make the
// tracer allocate (and the kernel fault in) gigabytes. A plain free list,
// not a sync.Pool: the pool is emptied at every garbage collection, which
// that allocation rate makes frequent.
var freeBufs struct {
	sync.Mutex
	list [][]byte
}

// Bounds of the free list: buffers up to maxPooled bytes, maxFree of them.
const (
	maxPooled = 1 << 20
	maxFree   = 64
)

// Buffer returns an n-byte buffer for a version's bytes, reused when one is
// free. Its ownership passes back with Recorder.AddVersion.
func Buffer(n int) []byte {
	freeBufs.Lock()
	defer freeBufs.Unlock()
	l := freeBufs.list
	for i := len(l) - 1; i >= 0; i-- {
		if cap(l[i]) >= n {
			b := l[i][:n]
			l[i] = l[len(l)-1]
			freeBufs.list = l[:len(l)-1]
			return b
		}
	}
	return make([]byte, n)
}

func releaseBuffer(b []byte) {
	if cap(b) > maxPooled || cap(b) < PageSize {
		return
	}
	freeBufs.Lock()
	defer freeBufs.Unlock()
	if len(freeBufs.list) < maxFree {
		freeBufs.list = append(freeBufs.list, b)
	}
}

func (w *writer) close(r *Recorder) {
	if err := r.commit(w); err != nil {
		r.setErr(err)
	}
	if err := r.Err(); err != nil {
		// Say why the recording stopped where it did, when the disk
		// still takes that much (a full one often does once the failed
		// transaction is rolled back); else the state stays
		// "recording", which readers report as cut short.
		w.db.Exec(`INSERT INTO meta(key, value) VALUES ('ptjit_state', ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value`,
			"failed: "+strings.TrimPrefix(err.Error(), r.path+": "))
	}
	// Fold the WAL into the main file and leave WAL mode, so that the
	// finished recording is one file that reads anywhere, read-only too.
	if _, err := w.db.Exec(`PRAGMA journal_mode=DELETE`); err != nil {
		r.setErr(err)
	}
	if err := w.db.Close(); err != nil {
		r.setErr(err)
	}
}
