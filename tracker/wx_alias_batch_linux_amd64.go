package tracker

import (
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
//     write-protects the alias pages of that file page again, then
//     records every twin of it as a new version (cause "wx-batch") and
//     makes it executable. Protect first, then read: a store after the
//     read faults as in precise mode.
//
// Which stores go batch is storePolicy's decision, as for RWX memory:
// always under --wx=batch, never under precise, and under auto a page's
// third store within autoWindow or a store the emulator cannot carry out
// (VEX and EVEX stores: glibc's memcpy). A store whose instruction runs
// from a twin of the page it writes stays precise. A change of the alias
// table (the program maps a new twin, re-protects or unmaps one) settles
// every open file page that then has an executable twin not in batch
// (aliasSettleStale), so an alias page is never writable while its file
// page runs anywhere.

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

// runsIn reports whether the instruction at rip may lie in page (it
// starts there or reaches into it).
func runsIn(rip, page uint64) bool {
	return rip&^(pageSize-1) == page || (rip+15)&^(pageSize-1) == page
}

// aliasGoBatch decides (storePolicy) whether the store at regs.Rip into
// page of alias al goes batch and, if so, makes the page's executable
// twins batch pages and the alias page writable (see above). It reports
// true when the store is left to run: th, resumed, executes it again.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) aliasGoBatch(th *thread, al *sharedMap, page uint64, regs unix.PtraceRegs, emulatable bool) bool {
	sp := th.proc.space
	w := sp.wxs()
	fp := al.filePageAt(page)
	twins := sp.execTwins(fp.dev, fp.inode, fp.off, pageSize)
	self := false
	for _, tw := range twins {
		self = self || runsIn(regs.Rip, tw.addr&^(pageSize-1))
	}
	batch, r, counted := storePolicy(t.opts.WX, w.writes[page], t.cur.at.MonoNS, self,
		func() bool { return emulatable }, func() bool { return zeroPage(th.tid, page) })
	if counted {
		w.writes[page] = r
		if w.added++; w.added >= pruneWritesEvery {
			w.pruneWrites(t.cur.at.MonoNS)
		}
	}
	if !batch {
		return false
	}
	for _, tw := range twins {
		tp := tw.addr &^ (pageSize - 1)
		if _, ok := w.batch[tp]; ok {
			continue
		}
		view := sp.ProtOf(tp)
		if view&unix.PROT_EXEC == 0 {
			continue // not tracked code
		}
		if err := t.protect(th, tp, tp+pageSize, sp.kernelProt(tp, view)&^unix.PROT_EXEC, "wx-batch: executable twin of an alias page being written"); err != nil {
			t.warnOp(err)
			return false // the twins made batch so far settle at their first run
		}
		w.batch[tp] = batchPage{tid: th.tid, ip: regs.Rip, alias: true}
	}
	if err := t.protect(th, page, page+pageSize, al.view, "wx-batch: alias page writable until its twin runs"); err != nil {
		t.warnOp(err)
		return false
	}
	if sp.alias.open == nil {
		sp.alias.open = map[uint64]filePage{}
	}
	sp.alias.open[page] = fp
	t.result.Stats.BatchWrites++
	return true
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
// twin: the file page's alias pages are write-protected again, then each
// of its twins is recorded and made executable (see above).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasSettle(th *thread, twin uint64) {
	sp := th.proc.space
	if fp, ok := sp.twinFilePage(twin); ok {
		t.aliasSettleFile(th, fp)
	}
	if bp, ok := sp.wx.batch[twin]; ok {
		// no longer mapped from the file (or its map could not be
		// read): settled alone
		delete(sp.wx.batch, twin)
		t.settleTwin(th, twin, bp)
	}
}

// aliasSettleFile write-protects the alias pages open for fp and settles
// fp's executable twins that are batch pages.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasSettleFile(th *thread, fp filePage) {
	sp := th.proc.space
	for page, f := range sp.alias.open {
		if f != fp {
			continue
		}
		delete(sp.alias.open, page)
		if al, ok := sp.aliasAt(page); ok {
			if err := t.protect(th, page, page+pageSize, al.view&^unix.PROT_WRITE, "wx-batch: alias write-protected, its twin runs"); err != nil {
				t.warnOp(err)
			}
		}
	}
	for _, tw := range sp.execTwins(fp.dev, fp.inode, fp.off, pageSize) {
		tp := tw.addr &^ (pageSize - 1)
		if bp, ok := sp.wx.batch[tp]; ok && bp.alias {
			delete(sp.wx.batch, tp)
			t.settleTwin(th, tp, bp)
		}
	}
}

// settleTwin makes twin, no longer a batch page, executable again and
// records it as a new version.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) settleTwin(th *thread, twin uint64, bp batchPage) {
	sp := th.proc.space
	if err := t.protect(th, twin, twin+pageSize, sp.kernelProt(twin, sp.ProtOf(twin)), "wx-batch: alias twin executed"); err != nil {
		t.warnOp(err)
		return
	}
	t.recordBatch(th, twin, bp, bp.ip, false)
}

// aliasSettleStale (aliasApply, after the alias table changed): an open
// alias page that is no longer a write-protected alias is forgotten (the
// program set its protection); a file page with an executable twin that
// is not a batch page (mapped or re-protected since) is settled now.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) aliasSettleStale(th *thread) {
	sp := th.proc.space
	var settle []filePage
	for page, fp := range sp.alias.open {
		if _, ok := sp.aliasAt(page); !ok {
			delete(sp.alias.open, page)
			continue
		}
		for _, tw := range sp.execTwins(fp.dev, fp.inode, fp.off, pageSize) {
			if bp, ok := sp.wx.batch[tw.addr&^(pageSize-1)]; !ok || !bp.alias {
				settle = append(settle, fp)
				break
			}
		}
	}
	for _, fp := range settle {
		t.aliasSettleFile(th, fp)
	}
}

// aliasTwinBatch reports whether addr is in an alias twin's batch page
// (classify then reads RIP: a fetch fault there is W^X's).
func (sp *space) aliasTwinBatch(addr uint64) bool {
	bp, ok := sp.wx.batch[addr&^(pageSize-1)]
	return ok && bp.alias
}

// zeroPage reports whether the page at page of tid reads as zeros.
func zeroPage(tid int, page uint64) bool {
	b := make([]byte, pageSize)
	if snapshot.ReadMem(tid, page, b) != nil {
		return false
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
