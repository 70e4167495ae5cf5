package bpfev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"
)

// Config sets up a Source. The zero Config is the default.
type Config struct {
	// Signal is what the programs send a thread whose exec-adding call
	// they could not copy (bpf_send_signal_thread). Zero: SIGSTOP, which
	// a thread cannot block or ignore, so the stop comes before the
	// thread runs another instruction; the tracer recognizes it by
	// si_code SI_KERNEL and suppresses it (doc.go). A blockable signal
	// is delayed while the thread blocks it: tests use SIGUSR1 with a
	// handler to observe the delivery.
	Signal unix.Signal
	// BudgetPages is the most pages one call may copy (1..64); a larger
	// range falls back. Zero: 64 (256 KiB).
	BudgetPages int
	// RingBytes is the ring buffer's size: a power of two, a multiple of
	// the page size, at least 16 KiB. Zero: 8 MiB.
	RingBytes int
	// WakeBytes: the program wakes a reader blocked in Next only when an
	// event takes the bytes waiting in the ring past this; otherwise
	// Next finds the events at its next poll (Poll). A wakeup per event costs the
	// traced thread more than the event (BenchmarkToggleProgram). Zero:
	// RingBytes/8. 1: every event.
	WakeBytes int
	// Poll is how often a blocked Next looks at the ring. Zero: 1 ms.
	Poll time.Duration
	// CachePages is the size of the kernel's page cache, in pages
	// (4 KiB each, a hash map): the program sends a page only when it
	// differs from the copy the cache holds (doc.go); once the cache is
	// full, pages it has no entry for are sent every time. Zero: 4096
	// (16 MiB of kernel memory); negative: no cache, every page is sent.
	CachePages int
	// Ignore: a call made with this value in r9 (the sixth argument
	// register) is not reported: no record, no copy, no signal. The
	// tracker passes its InjectCookie, which every call it injects into
	// a stopped thread carries and no program's call does, so the
	// kernel does not copy the pages of ptjit's own mprotects (W^X makes
	// thousands in a run) nor stop a thread in the middle of one. Zero:
	// every call is reported.
	Ignore uint64
}

const (
	defaultBudget = budgetHard
	defaultRing   = 8 << 20
	minRing       = 16 << 10
	defaultCache  = 4096
	// mirrorFactor: the reader's copies of cached pages may outnumber
	// the cache's entries this many times (pages whose entry the program
	// could not update, which the reader cannot know) before the Source
	// stops caching.
	mirrorFactor = 2
)

// Source is a set of BPF programs on the address-space calls, a map of
// the traced processes, and the reader of their ring buffer.
//
// Add and Remove may be called from any goroutine. Next is for one
// goroutine at a time; Close may be called from any goroutine and
// unblocks a Next in progress.
type Source struct {
	cfg      Config
	tgids    *ebpf.Map
	stopping *ebpf.Map // AddStopping's processes (stop_linux_amd64.go)
	ring     *ebpf.Map
	counters *ebpf.Map
	scratch  *ebpf.Map
	cache    *ebpf.Map
	progs    []*ebpf.Program
	links    []link.Link
	rd       *ringbuf.Reader

	rec      ringbuf.Record
	deadline time.Time // SetDeadline's
	closed   atomic.Bool
	pending  []*pendingEvent // call records waiting for their pages, oldest first
	free     []*pendingEvent

	// The reader's side of the page cache: for each epoch, the pages
	// the program sent in events that used the cache, as the cache
	// holds them (doc.go). mu guards epochs, lastEpoch, mirrored and
	// noCache (Add and Remove may run on other goroutines).
	mu        sync.Mutex
	epochs    map[int]uint64                    // tgid -> its epoch (0: no caching)
	mirror    map[uint64]map[uint64]*mirrorPage // epoch -> page address -> copy
	mirrored  int                               // pages in mirror
	lastEpoch uint64
	noCache   bool   // caching ended (too many mirrored pages)
	gen       uint64 // the last page number given (Event.Gens)
	same      int64  // pages found unchanged (Stats)
	sent      int64  // pages that came through the ring
}

// mirrorPage is the reader's copy of one cached page.
type mirrorPage struct {
	gen  uint64
	data [pageSize]byte
}

type pendingEvent struct {
	ev   Event
	want int // page records still to come
	npg  int // pages the program copied or found unchanged
	bad  bool
}

// Open loads and attaches the programs. The Source reports nothing until
// Add names a process.
func Open(cfg Config) (*Source, error) {
	if cfg.Signal == 0 {
		cfg.Signal = unix.SIGSTOP
	}
	if cfg.BudgetPages == 0 {
		cfg.BudgetPages = defaultBudget
	}
	if cfg.RingBytes == 0 {
		cfg.RingBytes = defaultRing
	}
	if cfg.WakeBytes == 0 {
		cfg.WakeBytes = cfg.RingBytes / 8
	}
	if cfg.Poll == 0 {
		cfg.Poll = time.Millisecond
	}
	if cfg.CachePages == 0 {
		cfg.CachePages = defaultCache
	}
	if cfg.Signal < 1 || cfg.Signal > 64 {
		return nil, fmt.Errorf("bpfev: signal %d out of range", cfg.Signal)
	}
	if cfg.BudgetPages < 1 || cfg.BudgetPages > budgetHard {
		return nil, fmt.Errorf("bpfev: budget of %d pages (want 1..%d)", cfg.BudgetPages, budgetHard)
	}
	if r := cfg.RingBytes; r < minRing || r&(r-1) != 0 || r > 1<<30 {
		return nil, fmt.Errorf("bpfev: ring buffer of %d bytes (want a power of two, %d to 1 GiB)", r, minRing)
	}
	if cfg.WakeBytes < 1 || cfg.WakeBytes > cfg.RingBytes {
		return nil, fmt.Errorf("bpfev: wakeup at %d bytes (want 1 to the ring's %d)", cfg.WakeBytes, cfg.RingBytes)
	}
	if cfg.Poll < 0 {
		return nil, fmt.Errorf("bpfev: poll interval %v", cfg.Poll)
	}
	kspec, err := kernelTypes.Kernel()
	if err != nil {
		return nil, fmt.Errorf("bpfev: kernel BTF: %w", err)
	}
	off, err := loadKernelOffsets(kspec)
	if err != nil {
		return nil, fmt.Errorf("bpfev: %w", err)
	}
	s := &Source{cfg: cfg, epochs: map[int]uint64{}, mirror: map[uint64]map[uint64]*mirrorPage{}, noCache: cfg.CachePages < 0}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()
	if s.tgids, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ptjit_tgids", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: 4096}); err != nil {
		return nil, fmt.Errorf("bpfev: tgid map: %w", err)
	}
	if s.stopping, err = newStoppingMap(); err != nil {
		return nil, err
	}
	if s.scratch, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ptjit_scratch", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8 + pageSize, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("bpfev: scratch map: %w", err)
	}
	if s.cache, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ptjit_pages", Type: ebpf.Hash, KeySize: 16, ValueSize: 8 + pageSize,
		MaxEntries: uint32(max(cfg.CachePages, 1))}); err != nil {
		return nil, fmt.Errorf("bpfev: page cache map: %w", err)
	}
	if s.ring, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ptjit_events", Type: ebpf.RingBuf, MaxEntries: uint32(cfg.RingBytes)}); err != nil {
		return nil, fmt.Errorf("bpfev: ring buffer: %w", err)
	}
	if s.counters, err = ebpf.NewMap(&ebpf.MapSpec{Name: "ptjit_lost", Type: ebpf.PerCPUArray, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("bpfev: counter map: %w", err)
	}
	spec := &ebpf.ProgramSpec{
		Name:         "ptjit_as_exit",
		Type:         ebpf.Tracing,
		AttachType:   ebpf.AttachTraceRawTp,
		AttachTo:     "sys_exit",
		Instructions: program(watched, off, progMaps{tgids: s.tgids, ring: s.ring, counters: s.counters, scratch: s.scratch, cache: s.cache, stopping: s.stopping}, cfg.Signal, cfg.BudgetPages, cfg.WakeBytes, cfg.Ignore),
		License:      "GPL", // reading kernel structures through BTF needs it
	}
	p, err := loadProgram(spec, kspec)
	if err != nil {
		return nil, fmt.Errorf("bpfev: load the sys_exit program: %w", err)
	}
	s.progs = append(s.progs, p)
	l, err := link.AttachTracing(link.TracingOptions{Program: p})
	if err != nil {
		return nil, fmt.Errorf("bpfev: attach to sys_exit: %w", err)
	}
	s.links = append(s.links, l)
	if s.rd, err = ringbuf.NewReader(s.ring); err != nil {
		return nil, fmt.Errorf("bpfev: ring buffer reader: %w", err)
	}
	ok = true
	return s, nil
}

// kernelTypes is the running kernel's BTF, parsed once per process
// (about 20 ms a parse, most of an Open's CPU time): Open reads the
// structure offsets from it, and the loader finds the attach target
// (sys_exit) and checks the program's loads against the same Spec.
var kernelTypes = btf.NewCache()

// loadProgram loads spec with kspec (kernelTypes') for its relocations and
// attach target. ebpf.NewProgramWithOptions would parse the kernel's BTF
// again for the attach target (a fresh btf.Cache per call); a collection
// load takes the Cache.
func loadProgram(spec *ebpf.ProgramSpec, kspec *btf.Spec) (*ebpf.Program, error) {
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{spec.Name: spec}},
		ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kspec}, Cache: kernelTypes})
	if err != nil {
		return nil, err
	}
	defer coll.Close()
	return coll.DetachProgram(spec.Name), nil
}

// Config returns the configuration the Source runs with (defaults
// filled in).
func (s *Source) Config() Config { return s.cfg }

// Add starts reporting the calls of process tgid (all its threads). Each
// Add gives the process a new page cache epoch: nothing the cache or the
// reader held for the tgid before (an earlier process, the image before
// an exec) is taken for its pages.
func (s *Source) Add(tgid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropEpoch(tgid)
	var epoch uint64
	if !s.noCache {
		s.lastEpoch++
		epoch = s.lastEpoch
	}
	if err := s.tgids.Put(uint32(tgid), epoch); err != nil {
		return fmt.Errorf("bpfev: add process %d: %w", tgid, err)
	}
	s.epochs[tgid] = epoch
	return nil
}

// Remove stops reporting the calls of process tgid. Events the programs
// wrote before may still be read, but not a page of them that the cache
// found unchanged (ReasonUnknownPage): read the ring before removing a
// process whose calls all returned. Removing a process that is not there
// is not an error.
func (s *Source) Remove(tgid int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropEpoch(tgid)
	delete(s.epochs, tgid)
	s.stopping.Delete(uint32(tgid)) // stop_linux_amd64.go; not there: no error to give
	if err := s.tgids.Delete(uint32(tgid)); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpfev: remove process %d: %w", tgid, err)
	}
	return s.dropCached(tgid)
}

// dropCached deletes the cache's entries of process tgid, which the
// program no longer reads (the process is not in the tgid map): the
// cache has no eviction (an entry is freed only by its own process's
// thread, or here), so that an entry is never reused while a program
// compares a page with it.
func (s *Source) dropCached(tgid int) error {
	var key, next [16]byte
	var dead [][16]byte
	var err error
	var prev any // nil: the first key
	for ; ; prev = key {
		if err = s.cache.NextKey(prev, &next); err != nil {
			break
		}
		if binary.LittleEndian.Uint32(next[:]) == uint32(tgid) {
			dead = append(dead, next)
		}
		key = next
	}
	if !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("bpfev: remove process %d: the page cache: %w", tgid, err)
	}
	for _, k := range dead {
		if err := s.cache.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("bpfev: remove process %d: the page cache: %w", tgid, err)
		}
	}
	return nil
}

// dropEpoch forgets the reader's copies of tgid's cached pages.
//
// Precondition: s.mu held.
func (s *Source) dropEpoch(tgid int) {
	if e, ok := s.epochs[tgid]; ok && e != 0 {
		s.mirrored -= len(s.mirror[e])
		delete(s.mirror, e)
	}
}

// endCaching stops every process's caching, when the reader's copies
// outnumber the cache's entries mirrorFactor times: the program finds
// epoch 0 and sends every page from then on.
//
// Precondition: s.mu held.
func (s *Source) endCaching() {
	s.noCache = true
	for tgid := range s.epochs {
		if err := s.tgids.Update(uint32(tgid), uint64(0), ebpf.UpdateExist); err == nil {
			s.epochs[tgid] = 0
		}
	}
}

// PageCounts returns how many pages of exec-adding calls the program
// found equal to its cached copy (not sent through the ring), and how
// many it sent, in the events read so far.
func (s *Source) PageCounts() (same, sent int64) { return s.same, s.sent }

// Lost returns how many call records the programs could not write since
// Open because the ring buffer was full. An exec-adding call among them
// was still stopped with the signal (the tracer sees a stop with no event:
// it copies from the registers and memory at that stop).
func (s *Source) Lost() (uint64, error) {
	var per []uint64
	if err := s.counters.Lookup(uint32(0), &per); err != nil {
		return 0, fmt.Errorf("bpfev: lost counter: %w", err)
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n, nil
}

// Pending returns how many bytes of records are in the ring, not read
// yet. Unlike the rest of a Source it may be called from any goroutine
// until Close (a tracer's watcher uses it to decide when to read).
func (s *Source) Pending() int { return s.rd.AvailableBytes() }

// SetDeadline makes Next return os.ErrDeadlineExceeded once t passes
// with no complete event. The zero time removes the deadline. Like
// Next, it is for the reading goroutine.
func (s *Source) SetDeadline(t time.Time) { s.deadline = t }

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("bpfev: source closed")

// Next blocks until the next complete event and decodes it into e,
// reusing e.Bytes. It returns ErrClosed after Close and
// os.ErrDeadlineExceeded after the deadline.
//
// Events come in the order their call records were reserved in the ring
// (close to, but not exactly, the order of Time across CPUs).
func (s *Source) Next(e *Event) error {
	for !s.pop(e) {
		// wait for a wakeup (WakeBytes), the next poll, or the deadline;
		// the reader returns at once when a record is there
		now := time.Now()
		expired := !s.deadline.IsZero() && !now.Before(s.deadline)
		wait := now.Add(s.cfg.Poll)
		if !s.deadline.IsZero() && s.deadline.Before(wait) {
			wait = s.deadline
		}
		s.rd.SetDeadline(wait)
		if err := s.read(); errors.Is(err, os.ErrDeadlineExceeded) {
			if expired {
				return err
			}
		} else if err != nil {
			return err
		}
	}
	return nil
}

// TryNext is Next without blocking: it reports false when no complete
// event is in the ring. A tracer calls it at a stop to take every event
// written before the stop: a call record is committed before its thread
// returns to user space, so every call that completed before the stop is
// there.
//
// It never waits: the bytes in the ring may all be records the program
// discarded (a page it could not copy), which the reader skips and would
// then wait for the next record; so TryNext reads with a deadline already
// past.
func (s *Source) TryNext(e *Event) (bool, error) {
	if s.pop(e) {
		return true, nil
	}
	if s.rd.AvailableBytes() == 0 {
		return false, nil
	}
	s.rd.SetDeadline(time.Unix(1, 0))
	defer s.rd.SetDeadline(s.deadline)
	for !s.pop(e) {
		s.rd.SetDeadline(time.Unix(1, 0)) // in the past: never wait
		if err := s.read(); errors.Is(err, os.ErrDeadlineExceeded) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// pop moves the oldest pending event into e when all its pages are in.
func (s *Source) pop(e *Event) bool {
	if len(s.pending) == 0 || s.pending[0].want > 0 {
		return false
	}
	p := s.pending[0]
	s.pending[0] = nil
	s.pending = s.pending[1:]
	buf, gens := e.Bytes[:0], e.Gens[:0]
	*e = p.ev
	p.ev.Bytes, p.ev.Gens = buf, gens
	s.free = append(s.free, p)
	return true
}

// read takes one record from the ring, blocking until there is one or
// the reader's deadline passes.
func (s *Source) read() error {
	if err := s.rd.ReadInto(&s.rec); err != nil {
		if errors.Is(err, ringbuf.ErrClosed) || errors.Is(err, os.ErrClosed) {
			return ErrClosed
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		return fmt.Errorf("bpfev: ring buffer: %w", err)
	}
	return s.take(s.rec.RawSample)
}

// take files one record.
func (s *Source) take(b []byte) error {
	if len(b) < 4 {
		return fmt.Errorf("bpfev: record of %d bytes", len(b))
	}
	switch binary.LittleEndian.Uint32(b) {
	case kindCall:
		var p *pendingEvent
		if n := len(s.free); n > 0 {
			p, s.free = s.free[n-1], s.free[:n-1]
		} else {
			p = new(pendingEvent)
		}
		n, err := decodeCall(b, &p.ev)
		if err != nil {
			return err
		}
		p.npg, p.bad = n, false
		p.want = n - bits.OnesCount64(p.ev.Same)
		s.pending = append(s.pending, p)
		s.fillSame(p)
	case kindPage:
		if len(b) < pageRecSize {
			return fmt.Errorf("bpfev: page record of %d bytes, want %d", len(b), pageRecSize)
		}
		le := binary.LittleEndian
		tid := int(le.Uint32(b[pageOffTID:]))
		idx := le.Uint32(b[pageOffIdx:])
		for _, p := range s.pending {
			if p.ev.TID != tid || p.want == 0 {
				continue
			}
			p.want--
			s.sent++
			var gen uint64
			if p.ev.Epoch != 0 {
				gen = s.remember(p.ev.Epoch, le.Uint64(b[pageOffVA:]), b[pageDataOff:pageRecSize])
			} else {
				s.gen++
				gen = s.gen
			}
			if p.bad {
				return nil
			}
			if got := uint32(len(p.ev.Bytes) / pageSize); idx != got {
				return fmt.Errorf("bpfev: tid %d: page %d of a call where page %d was due", tid, idx, got)
			}
			p.ev.Bytes = append(p.ev.Bytes, b[pageDataOff:pageRecSize]...)
			p.ev.Gens = append(p.ev.Gens, gen)
			s.fillSame(p)
			return nil
		}
		return fmt.Errorf("bpfev: page record of tid %d with no call record before it", tid)
	default:
		return fmt.Errorf("bpfev: record of kind %d", binary.LittleEndian.Uint32(b))
	}
	return nil
}

// remember keeps the reader's copy of a page the program sent and put in
// the cache, and returns its number.
func (s *Source) remember(epoch, va uint64, data []byte) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	pages := s.mirror[epoch]
	if pages == nil {
		pages = map[uint64]*mirrorPage{}
		s.mirror[epoch] = pages
	}
	m := pages[va]
	if m == nil {
		m = new(mirrorPage)
		pages[va] = m
		s.mirrored++
		if !s.noCache && s.mirrored > mirrorFactor*s.cfg.CachePages {
			s.endCaching()
		}
	}
	m.gen = s.gen
	copy(m.data[:], data)
	return s.gen
}

// fillSame appends to p's bytes the pages the program found unchanged
// that come next, from the reader's copies. A page it does not hold
// makes the event a fallback (ReasonUnknownPage): never expected, since
// the cache holds only what was sent, but never a wrong page either.
func (s *Source) fillSame(p *pendingEvent) {
	for !p.bad {
		i := len(p.ev.Bytes) / pageSize
		if i >= p.npg || p.ev.Same&(1<<i) == 0 {
			return
		}
		s.mu.Lock()
		m := s.mirror[p.ev.Epoch][p.ev.Addr+uint64(i)*pageSize]
		s.mu.Unlock()
		if m == nil {
			p.bad = true
			p.ev.Flags |= FlagFallback
			p.ev.Reason = ReasonUnknownPage
			return
		}
		s.same++
		p.ev.Bytes = append(p.ev.Bytes, m.data[:]...)
		p.ev.Gens = append(p.ev.Gens, m.gen)
	}
}

// Close detaches the programs, frees the maps and unblocks Next (which
// then returns ErrClosed). A second Close does nothing.
func (s *Source) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, l := range s.links {
		errs = append(errs, l.Close())
	}
	for _, p := range s.progs {
		errs = append(errs, p.Close())
	}
	if s.rd != nil {
		errs = append(errs, s.rd.Close())
	}
	for _, m := range []*ebpf.Map{s.tgids, s.ring, s.counters, s.scratch, s.cache, s.stopping} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	s.links, s.progs = nil, nil
	return errors.Join(errs...)
}
