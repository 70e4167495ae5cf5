package tracker

import (
	"bytes"
	"slices"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Batch mode for writable aliases. A runtime that maps its JIT memory
// twice (asmjit, Erlang's BeamAsm, .NET's W^X mode) writes code through
// the writable view in bursts: a function, a module, a copy with memcpy.
// Each store faulting and being emulated costs a stop; a 256 KiB fill
// with 8-byte stores is 32,768 of them. As for RWX memory (wxFault), a
// burst sends the page batch instead:
//
//  1. the store's page of the writable alias maps one file page; every
//     executable twin of that file page loses PROT_EXEC (an injected
//     mprotect; the twin is a batch page, batchPage.alias, with the
//     store's thread and IP), and only then the alias page gets the
//     program's protection back (writable): no instruction can run from
//     bytes that are being written;
//  2. the program writes the page at full speed;
//  3. the first instruction fetch from any twin faults (classifySignal:
//     a fetch from an alias twin's batch page is W^X's, a store or
//     anything else there is the program's own fault); aliasSettle
//     write-protects every alias page open in that file again, then
//     makes the file's batch twins executable and records them, a
//     version per run of adjacent pages (cause "wx-batch"). Protect
//     first, then read: a store after the read faults again. A JIT
//     writes, then runs what it wrote: one write-run cycle costs two
//     stops however many pages it wrote.
//
// Which stores go batch is storePolicy's decision, as for RWX memory:
// always under --wx=batch, never under precise, and under auto a page's
// third store within autoWindow, a store the emulator cannot carry out
// (VEX and EVEX stores: glibc's memcpy), or a store into zeros up to its
// page's end (no code there yet: a JIT appending code). Such a store
// opens, with its page, the pages of zeros after it in the alias (up to
// maxAliasRun): filling fresh memory costs one fault per run, not per
// page. A store whose instruction runs from a twin of the page it writes
// stays precise. A change of the alias table (the program maps a new
// twin, re-protects or unmaps one) settles every file with an open page
// that then has an executable twin not in batch (aliasSettleStale), so an
// alias page is never writable while its file page can run anywhere.
//
// Erlang/OTP 25 starting and halting (BeamAsm, an 8 MiB memfd mapped RX
// then RW) writes about 3,950 pages this way in about 670 stops; with a
// stop per page it took 2,100 stops, and with a stop per store it could
// not start (the memcpy above).

// filePage is a page of a shared file: what an alias page and its
// executable twins map.
type filePage struct{ dev, inode, off uint64 }

// filePageAt returns the file page m maps at page.
func (m *sharedMap) filePageAt(page uint64) filePage {
	return filePage{m.dev, m.inode, m.fileOf(page)}
}

// storePolicy decides how one faulting store into memory W^X keeps is
// carried out: batch (its page made writable until code runs there) or
// precise (emulated or stepped, and logged). r is the page's precise
// stores in the current window (auto mode), now the time of this store,
// self whether the storing instruction runs from a page the store would
// make non-executable; emulatable whether the emulator can carry it out
// and zero whether the page holds only zeros (no code yet: a JIT filling
// fresh memory, as wxFreshEffect's pages), each called only when needed.
// It returns the decision and, when counted, the page's rate after this
// store.
func storePolicy(mode WXMode, r pageRate, now int64, self bool, emulatable, zero func() bool) (batch bool, next pageRate, counted bool) {
	switch mode {
	case WXBatch:
		return !self, r, false
	case WXAuto:
	default:
		return false, r, false
	}
	if now-r.since > int64(autoWindow) {
		r = pageRate{since: now}
	}
	batch = r.n >= autoBatchAfter || !self && (r.n == 0 && zero() || !emulatable())
	r.n++
	return batch && !self, r, true
}

// storeBatch is storePolicy for a store into page at now, counting it in
// the page's rate where the policy does (auto mode).
func (w *wxState) storeBatch(mode WXMode, page uint64, now int64, self bool, emulatable, zero func() bool) bool {
	batch, r, counted := storePolicy(mode, w.writes[page], now, self, emulatable, zero)
	if counted {
		w.countStore(page, r, now)
	}
	return batch
}

// countStore keeps r as page's store rate after a store at now.
func (w *wxState) countStore(page uint64, r pageRate, now int64) {
	w.writes[page] = r
	if w.added++; w.added >= pruneWritesEvery {
		w.pruneWrites(now)
	}
}

// runsIn reports whether the instruction at rip may lie in page (it
// starts there or reaches into it).
func runsIn(rip, page uint64) bool {
	return rip&^(pageSize-1) == page || (rip+15)&^(pageSize-1) == page
}

// aliasGoBatch decides (storePolicy) whether the store at regs.Rip into
// page of alias al goes batch and, if so, makes the executable twins of
// the page's file page batch pages and the alias page writable (see
// above). A store into zeros up to its page's end (no code there yet: a
// JIT appending code, or filling fresh memory) goes batch at once and
// opens with its page the pages of zeros that follow in the alias, up to
// maxAliasRun: the fill goes on without a fault per page. It reports true
// when the store is left to run: th, resumed, executes it again.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) aliasGoBatch(th *thread, al *sharedMap, addr uint64, regs unix.PtraceRegs, at clock.Stamp, emulatable func() bool) bool {
	page := addr &^ (pageSize - 1)
	sp := th.proc.space
	w := sp.wxs()
	fp := al.filePageAt(page)
	twins := sp.execTwins(fp.dev, fp.inode, fp.off, pageSize)
	self := false
	for _, tw := range twins {
		self = self || runsIn(regs.Rip, tw.addr&^(pageSize-1))
	}
	var zeros uint64 // pages of zeros from page on, when asked
	zero := func() bool {
		zeros = zeroRun(th.tid, addr, min(al.end, page+maxAliasRun*pageSize))
		return zeros > 0
	}
	if !w.storeBatch(t.wxMode(th), page, at.MonoNS, self, emulatable, zero) {
		return false
	}
	end := page + pageSize
	for p := end; p < page+zeros*pageSize; p += pageSize {
		if _, open := sp.alias.open[p]; open || t.selfRun(sp, al, p, regs.Rip) {
			break
		}
		end = p + pageSize
	}
	return t.aliasOpen(th, al, page, end, batchPage{tid: th.tid, ip: regs.Rip, alias: true})
}

// aliasOpen makes the alias pages [page, end) of al writable and the
// executable twins of their file pages batch pages bp, the twins first:
// no instruction runs from bytes being written. It reports false when an
// injected mprotect failed (the twins made batch so far settle at their
// first run).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasOpen(th *thread, al *sharedMap, page, end uint64, bp batchPage) bool {
	sp := th.proc.space
	w := sp.wxs()
	fp := al.filePageAt(page)
	var pages []uint64
	for _, tw := range sp.execTwins(fp.dev, fp.inode, fp.off, end-page) {
		for tp := tw.addr; tp < tw.addr+tw.n; tp += pageSize {
			if !w.batch.has(tp) && sp.ProtOf(tp)&unix.PROT_EXEC != 0 {
				pages = append(pages, tp)
			}
		}
	}
	slices.Sort(pages)
	for _, run := range protRuns(pages, func(p uint64) int { return sp.kernelProt(p, sp.ProtOf(p)) &^ unix.PROT_EXEC }) {
		if err := t.protect(th, run.s, run.e, run.prot, "wx-batch: executable twin of an alias page being written"); err != nil {
			t.warnOp(err)
			return false
		}
		for p := run.s; p < run.e; p += pageSize {
			w.batch.set(p, bp)
		}
	}
	if err := t.protect(th, page, end, al.view, "wx-batch: alias page writable until its twin runs"); err != nil {
		t.warnOp(err)
		return false
	}
	if sp.alias.open == nil {
		sp.alias.open = map[uint64]filePage{}
	}
	for p := page; p < end; p += pageSize {
		sp.alias.open[p] = al.filePageAt(p)
	}
	t.result.Stats.BatchWrites += int((end - page) / pageSize)
	return true
}

// maxAliasRun bounds the pages of zeros one store opens (aliasGoBatch).
const maxAliasRun = 64

// selfRun reports whether the instruction at rip runs from a twin of
// alias al's page p.
func (t *Tracer) selfRun(sp *space, al *sharedMap, p, rip uint64) bool {
	fp := al.filePageAt(p)
	for _, tw := range sp.execTwins(fp.dev, fp.inode, fp.off, pageSize) {
		if runsIn(rip, tw.addr&^(pageSize-1)) {
			return true
		}
	}
	return false
}

// protRun is a run of pages [s, e) that get one protection.
type protRun struct {
	s, e uint64
	prot int
}

// protRuns groups sorted pages into runs of adjacent pages with the same
// protection prot(page).
func protRuns(pages []uint64, prot func(uint64) int) []protRun {
	var runs []protRun
	for _, p := range pages {
		pr := prot(p)
		if k := len(runs) - 1; k >= 0 && runs[k].e == p && runs[k].prot == pr {
			runs[k].e += pageSize
			continue
		}
		runs = append(runs, protRun{p, p + pageSize, pr})
	}
	return runs
}

// twinFilePage returns the file page an executable shared mapping maps at
// page.
func (sp *space) twinFilePage(page uint64) (filePage, bool) {
	for i := range sp.alias.shared {
		m := &sp.alias.shared[i]
		if m.start <= page && page < m.end && m.view&unix.PROT_EXEC != 0 {
			return m.filePageAt(page), true
		}
	}
	return filePage{}, false
}

// aliasSettle: code runs in twin, a batch page of an alias's executable
// twin: every alias page open in its file is write-protected again, then
// the file's twins that are batch pages are made executable and recorded
// (see above). The whole file at once: a JIT writes, then runs what it
// wrote, and each write-run cycle costs two stops.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasSettle(th *thread, twin uint64) {
	sp := th.proc.space
	if fp, ok := sp.twinFilePage(twin); ok {
		t.aliasSettleFile(th, [2]uint64{fp.dev, fp.inode}, &fp)
	}
	if bp, ok := sp.wx.batch.get(twin); ok {
		// no longer mapped from the file (or its map could not be
		// read): settled alone
		sp.wx.batch.del(twin)
		t.settleTwins(th, []uint64{twin}, map[uint64]batchPage{twin: bp})
	}
}

// aliasSettleFile write-protects the alias pages open in file (dev,
// inode) and settles the file's executable twins that are batch pages.
// When code ran (ran: the file page it ran from), an open page that is
// still a hole of the file (SEEK_DATA: never written, so no code there)
// stays open, writable in the alias with its twins batch pages, but for
// ran's own: a JIT appending code into fresh pages writes the next
// function into pages opened for the last one, and each one kept saves
// the next burst's fault and two protection changes (Erlang's BeamAsm
// loading a module: 112 write faults a run before). The invariant holds:
// an alias page is writable only while no twin of its file page can run.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasSettleFile(th *thread, file [2]uint64, ran *filePage) {
	sp := th.proc.space
	var open []uint64
	for page, fp := range sp.alias.open {
		if fp.dev == file[0] && fp.inode == file[1] {
			open = append(open, page)
		}
	}
	slices.Sort(open)
	if ran != nil {
		open = t.aliasKeepHoles(th, open, *ran)
	}
	fps := map[filePage]bool{}
	for _, page := range open {
		fps[sp.alias.open[page]] = true
		delete(sp.alias.open, page)
	}
	view := func(p uint64) int {
		if al, ok := sp.aliasAt(p); ok {
			return al.view &^ unix.PROT_WRITE
		}
		return -1 // no longer a write-protected alias: the program's
	}
	for _, run := range protRuns(open, view) {
		if run.prot < 0 {
			continue
		}
		if err := t.protect(th, run.s, run.e, run.prot, "wx-batch: alias write-protected, its twin runs"); err != nil {
			t.warnOp(err)
		}
	}
	var twins []uint64
	bps := map[uint64]batchPage{}
	for fp := range fps {
		for _, tw := range sp.execTwins(fp.dev, fp.inode, fp.off, pageSize) {
			tp := tw.addr &^ (pageSize - 1)
			if bp, ok := sp.wx.batch.get(tp); ok && bp.alias {
				sp.wx.batch.del(tp)
				twins, bps[tp] = append(twins, tp), bp
			}
		}
	}
	slices.Sort(twins)
	t.settleTwins(th, twins, bps)
}

// aliasKeepHoles returns the pages of open (sorted alias pages) to settle:
// all but those whose file page is a hole of the file, and not ran. Where
// the file cannot be asked, every page is settled.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasKeepHoles(th *thread, open []uint64, ran filePage) []uint64 {
	sp := th.proc.space
	var settle []uint64
	for i := 0; i < len(open); {
		j := i + 1 // a run of adjacent pages
		for j < len(open) && open[j] == open[j-1]+pageSize {
			j++
		}
		data, upTo := sharedDataRuns(th.tid, open[i], open[j-1]+pageSize)
		for _, page := range open[i:j] {
			if page >= upTo || data.touches(page, page+pageSize) || sp.alias.open[page] == ran {
				settle = append(settle, page)
			}
		}
		i = j
	}
	return settle
}

// settleTwins makes the twins, sorted and no longer batch pages,
// executable again, in runs, and records each run as a new version with
// the thread and IP of its first page's first store.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) settleTwins(th *thread, twins []uint64, bps map[uint64]batchPage) {
	sp := th.proc.space
	for _, run := range protRuns(twins, func(p uint64) int { return sp.kernelProt(p, sp.ProtOf(p)) }) {
		if err := t.protect(th, run.s, run.e, run.prot, "wx-batch: alias twin executed"); err != nil {
			t.warnOp(err)
			continue
		}
		bp := bps[run.s]
		// the first store's thread and IP, read through th
		st := Stamp{At: clock.Now(), IP: bp.ip, TID: bp.tid, Via: th.tid}
		sp.RefreshSplit(run.s, run.e, st.because("wx-batch"))
	}
}

// aliasSettleStale (aliasApply, after the alias table changed): an open
// alias page that is no longer a write-protected alias is forgotten (the
// program set its protection); a file with an open page that has an
// executable twin not a batch page (mapped or re-protected since) is
// settled now.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasSettleStale(th *thread) {
	sp := th.proc.space
	settle := map[[2]uint64]bool{}
	for page, fp := range sp.alias.open {
		if _, ok := sp.aliasAt(page); !ok {
			delete(sp.alias.open, page)
			continue
		}
		for _, tw := range sp.execTwins(fp.dev, fp.inode, fp.off, pageSize) {
			if bp, ok := sp.wx.batch.get(tw.addr &^ (pageSize - 1)); !ok || !bp.alias {
				settle[[2]uint64{fp.dev, fp.inode}] = true
				break
			}
		}
	}
	for file := range settle {
		t.aliasSettleFile(th, file, nil)
	}
}

// fetchMatters reports whether classifySignal needs RIP for a W^X
// fault at addr: in an alias twin's batch page, or in tracked code the
// program has executable and not writable (a stale fetch fault). A store
// into RWX code or through an alias, the faults W^X takes most, needs
// no register read here (their handlers read them).
func (sp *space) fetchMatters(addr uint64) bool {
	if sp.aliasTwinBatch(addr) {
		return true
	}
	p, ok := sp.PieceAt(addr)
	return ok && !isWX(p.Prot) && p.Prot&unix.PROT_EXEC != 0
}

// aliasTwinBatch reports whether addr is in an alias twin's batch page
// (classify then reads RIP: a fetch fault there is W^X's).
func (sp *space) aliasTwinBatch(addr uint64) bool {
	bp, ok := sp.wx.batch.get(addr &^ (pageSize - 1))
	return ok && bp.alias
}

// zeroRun returns how many pages of tid's memory hold only zeros from
// from (any address in the first of them) on, before end: the first
// from from to its end, the rest whole. 0 when the first does not, or
// cannot be read. Zeros from a store's address to its page's end are
// memory the program has not written code into yet.
func zeroRun(tid int, from, end uint64) uint64 {
	if n, ok := zeroRunFile(tid, from, end); ok {
		return n
	}
	// Read in chunks that double from the first page's rest, and stop at
	// the first page that is not all zeros: a store into a page of code
	// being appended reads that page alone, not maxAliasRun of them
	// (Erlang's BeamAsm: up to 256 KiB a fault before, 2026-11-27).
	n := uint64(0)
	at, chunk := from, pageUp(from+1)-from
	for at < end {
		b := make([]byte, min(chunk, end-at))
		if snapshot.ReadMem(tid, at, b) != nil {
			if len(b) <= pageSize {
				return n // unreadable: no run of zeros here
			}
			chunk = pageUp(at+1) - at // a page at a time near the end of what is readable
			continue
		}
		for len(b) > 0 {
			k := min(pageUp(at+1)-at, uint64(len(b)))
			if !bytes.Equal(b[:k], zeroPage[:k]) {
				return n
			}
			n++
			at += k
			b = b[k:]
		}
		chunk = min(2*max(chunk, pageSize), maxAliasRun*pageSize)
	}
	return n
}

// zeroRunFile is zeroRun for memory that maps a file shared (an alias
// of JIT code, a memfd): the file's holes are zeros without a read, and
// only its pages with data are read, one at a time. Reading a hole
// through the mapping would also give the program's file a page it never
// wrote (a fault on a shmem hole allocates one). ok is false where from is
// not in such a mapping or its file cannot be asked (zeroRun reads).
func zeroRunFile(tid int, from, end uint64) (n uint64, ok bool) {
	data, upTo := sharedDataRuns(tid, from&^(pageSize-1), end)
	if upTo <= from {
		return 0, false
	}
	b := make([]byte, pageSize)
	for at := from; at < upTo; {
		pe := min(pageUp(at+1), upTo)
		if data.touches(at, pe) {
			k := pe - at
			if snapshot.ReadMem(tid, at, b[:k]) != nil || !bytes.Equal(b[:k], zeroPage[:k]) {
				return n, true
			}
		}
		n++
		at = pe
	}
	return n, true
}

// zeroPage is a page of zeros to compare with.
var zeroPage [pageSize]byte
