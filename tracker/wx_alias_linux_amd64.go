package tracker

import (
	"errors"
	"fmt"
	"os"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/snapshot"
	"github.com/ptjit/ptjit/tracker/internal/x86emu"
	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// W^X for writable aliases: the same file pages (a memfd, a shared file)
// mapped twice with MAP_SHARED, writable at one address and executable at
// another — the double-mapping JITs use to avoid RWX. Every MAP_SHARED mmap
// stops (filter_linux_amd64.go), so with W^X on the tracker knows each shared mapping's
// file, offset and the program's protection. Where a writable shared
// mapping and an executable one map the same file pages, the writable alias
// is made read-only (an injected mprotect, recorded with ProtChange); a
// store through it faults, is carried out precisely (emulated, or stepped
// with the alias page briefly writable) and recorded as a write at the
// executable address, whose page gets a new version. A burst of stores
// through an alias page goes batch (wx_alias_batch_linux_amd64.go).

// aliasState is the writable-alias state of one address space
// (space.alias).
type aliasState struct {
	shared []sharedMap            // MAP_SHARED file mappings (writable aliases)
	files  map[[2]uint64]*os.File // alias files by (dev, inode), for emulated stores
	// open: alias pages ptjit made writable in batch mode
	// (wx_alias_batch_linux_amd64.go), by the file page they map; the
	// executable twins of those file pages are batch pages (wxState.batch,
	// batchPage.alias) until one runs.
	open map[uint64]filePage
}

// close releases the alias files.
func (s *aliasState) close() {
	for _, f := range s.files {
		f.Close()
	}
	s.files = nil
}

// sharedMap is a MAP_SHARED file mapping.
type sharedMap struct {
	start, end uint64
	dev, inode uint64
	off        uint64 // file offset of start
	view       int    // the program's protection
	ro         bool   // ptjit removed PROT_WRITE (an executable twin exists)
}

func (m *sharedMap) fileOf(addr uint64) uint64 { return m.off + (addr - m.start) }

// aliasTouches reports whether [start, end) overlaps a tracked shared
// mapping.
func (sp *space) aliasTouches(start, end uint64) bool {
	for _, m := range sp.alias.shared {
		if m.start < end && start < m.end {
			return true
		}
	}
	return false
}

// aliasForget drops [start, end) from the shared-mapping table.
func (sp *space) aliasForget(start, end uint64) {
	var out []sharedMap
	for _, m := range sp.alias.shared {
		if m.end <= start || m.start >= end {
			out = append(out, m)
			continue
		}
		if m.start < start {
			l := m
			l.end = start
			out = append(out, l)
		}
		if m.end > end {
			r := m
			r.off = m.fileOf(end)
			r.start = end
			out = append(out, r)
		}
	}
	sp.alias.shared = out
}

// aliasMmap records a fresh MAP_SHARED file mapping and re-applies alias
// protection.
//
// Precondition: on the locked tracer thread; th is in syscall-exit-stop.
func (t *Tracer) aliasMmap(th *thread, start, end uint64, prot int) {
	sp := th.proc.space
	sp.aliasForget(start, end)
	if m, ok := mapAt(th.tid, start); ok && m.Shared && m.Inode != 0 {
		sp.alias.shared = append(sp.alias.shared, sharedMap{start: start, end: end, dev: m.Dev, inode: m.Inode,
			off: m.Offset + (start - m.Start), view: prot})
		// the calls that change it must stop
		t.aliasFilter(th, start, end)
	}
	t.aliasApply(th)
}

// aliasRO reports whether [start, end) lies in aliases ptjit keeps
// read-only (the program asking for PROT_WRITE there gets it rewritten
// away at the syscall's entry, so no other thread can write in between).
func (sp *space) aliasRO(start, end uint64) bool {
	// all of [start, end) must be read-only alias: the rewrite applies to
	// the whole call
	at := start
	for at < end {
		found := false
		for _, m := range sp.alias.shared {
			if m.ro && m.start <= at && at < m.end {
				at, found = m.end, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// aliasProtect: the program set [start, end) to prot (the kernel got it
// without PROT_WRITE when rewrote).
func (t *Tracer) aliasProtect(th *thread, start, end uint64, prot int, rewrote bool) {
	sp := th.proc.space
	if !sp.aliasTouches(start, end) {
		return
	}
	var out []sharedMap
	for _, m := range sp.alias.shared {
		if m.end <= start || m.start >= end {
			out = append(out, m)
			continue
		}
		if m.start < start {
			l := m
			l.end = start
			out = append(out, l)
		}
		mid := m
		mid.start, mid.end = max(m.start, start), min(m.end, end)
		mid.off = m.fileOf(mid.start)
		mid.view, mid.ro = prot, rewrote && prot&unix.PROT_WRITE != 0
		out = append(out, mid)
		if m.end > end {
			r := m
			r.off = m.fileOf(end)
			r.start = end
			out = append(out, r)
		}
	}
	sp.alias.shared = out
	t.aliasApply(th)
}

// aliasSettleExec: the program's mprotect made [start, end) executable,
// and with it executable twins W^X kept non-executable while their alias
// pages are written (batch pages): the kernel runs them now, so their
// files are settled at once (the alias pages write-protected, the twins
// recorded), as if code had run there. Before, the alias pages stayed
// writable under twins that ran: stores after the mprotect went unseen
// (found by the new-user trial: 3 of 4 calls ran unrecorded bytes).
//
// Precondition: on the locked tracer thread; th is in the call's
// syscall-exit-stop, before wxClearEffect forgets the batch pages and
// before the Space and the alias table take the call.
func (t *Tracer) aliasSettleExec(th *thread, start, end uint64) {
	sp := th.proc.space
	files := map[[2]uint64]bool{}
	for _, p := range sp.wx.batch.in(start, end, 0) {
		if bp, ok := sp.wx.batch.get(p); ok && bp.alias {
			if fp, ok := sp.twinFilePage(p); ok {
				files[[2]uint64{fp.dev, fp.inode}] = true
			}
		}
	}
	for file := range files {
		t.aliasSettleFile(th, file, nil)
	}
}

// aliasMove: mremap moved (or resized) a shared mapping.
func (t *Tracer) aliasMove(th *thread, old, oldSize, newSize, to uint64) {
	sp := th.proc.space
	var moved []sharedMap
	for _, m := range sp.alias.shared {
		if m.start < old+oldSize && old < m.end {
			c := m
			c.start, c.end = max(m.start, old), min(m.end, old+min(oldSize, newSize))
			if c.start >= c.end {
				continue
			}
			c.off = m.fileOf(c.start)
			c.start, c.end = to+(c.start-old), to+(c.end-old)
			moved = append(moved, c)
		}
	}
	sp.aliasForget(old, old+oldSize)
	sp.aliasForget(to, to+newSize)
	sp.alias.shared = append(sp.alias.shared, moved...)
	for _, m := range moved {
		// the calls that change it where it is now must stop
		t.aliasFilter(th, m.start, m.end)
	}
	t.aliasApply(th)
}

// twin is the executable mapping of some file bytes.
type twin struct {
	addr, off, n uint64 // address, file offset, length
}

// execTwins returns where file bytes [off, off+n) of (dev, inode) are
// mapped executable and shared.
func (sp *space) execTwins(dev, inode, off, n uint64) []twin {
	var out []twin
	for _, m := range sp.alias.shared {
		if m.dev != dev || m.inode != inode || m.view&unix.PROT_EXEC == 0 {
			continue
		}
		lo, hi := max(m.off, off), min(m.off+(m.end-m.start), off+n)
		if lo < hi {
			out = append(out, twin{m.start + (lo - m.off), lo, hi - lo})
		}
	}
	return out
}

// aliasApply write-protects every writable shared page whose file page is
// also mapped executable, and gives the program's protection back to
// pages that lost their executable twin.
func (t *Tracer) aliasApply(th *thread) {
	sp := th.proc.space
	t.aliasSettleStale(th)
	sh := sp.alias.shared
	for i := range sh {
		m := &sh[i]
		if m.view&unix.PROT_WRITE == 0 || m.view&unix.PROT_EXEC != 0 {
			continue
		}
		twin := len(sp.execTwins(m.dev, m.inode, m.off, m.end-m.start)) > 0
		switch {
		case twin && !m.ro:
			if err := t.protect(th, m.start, m.end, m.view&^unix.PROT_WRITE, "wx: writable alias of executable pages"); err != nil {
				t.warnOp(err)
				continue
			}
			m.ro = true
		case !twin && m.ro:
			if err := t.protect(th, m.start, m.end, m.view, "wx: alias no longer has an executable twin"); err != nil {
				t.warnOp(err)
				continue
			}
			m.ro = false
		}
	}
}

// aliasAt returns the write-protected alias containing addr.
func (sp *space) aliasAt(addr uint64) (*sharedMap, bool) {
	for i := range sp.alias.shared {
		m := &sp.alias.shared[i]
		if m.start <= addr && addr < m.end && m.ro {
			return m, true
		}
	}
	return nil, false
}

// aliasNeedsExit (exitNeeds): with W^X on, every MAP_SHARED mmap is
// tracked; an mprotect, munmap or mremap of a tracked shared mapping, or
// a MAP_FIXED mmap over one, changes the table.
func (t *Tracer) aliasNeedsExit(th *thread, op *pendingOp) bool {
	sp := th.proc.space
	a := op.args
	switch op.nr {
	case unix.SYS_MMAP:
		// a shared mapping may be an alias; a private one only ends
		// those it replaces (MAP_FIXED)
		shared := a[3]&unix.MAP_TYPE != unix.MAP_PRIVATE
		return t.wxOn() && (shared || a[3]&unix.MAP_FIXED != 0 && sp.aliasTouches(op.rng.s, op.rng.e))
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT, unix.SYS_MUNMAP:
		return sp.aliasTouches(op.rng.s, op.rng.e)
	case unix.SYS_MREMAP:
		return sp.aliasTouches(op.rng.s, op.rng.e) || a[3]&mremapFixed != 0 && sp.aliasTouches(op.to.s, op.to.e)
	}
	return false
}

// aliasEntryProt (entryRewrites): the program makes an alias ptjit keeps
// read-only writable again; the kernel keeps it read-only, so that no
// other thread can write in between.
func (t *Tracer) aliasEntryProt(th *thread, op *pendingOp, prot uint64) (uint64, string) {
	a := op.args
	switch op.nr {
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		if t.wxOn() && a[2]&unix.PROT_WRITE != 0 && th.proc.space.aliasRO(op.rng.s, op.rng.e) {
			return prot &^ unix.PROT_WRITE, wxEntryReason
		}
	}
	return prot, ""
}

// aliasEffect (exitEffects): the shared-mapping table follows the call,
// and the alias protection is applied again.
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) aliasEffect(x *sysExit) {
	sp, a, ret, th := x.sp, x.op.args, x.ret, x.th
	switch x.op.nr {
	case unix.SYS_MMAP:
		if !t.wxOn() {
			return
		}
		start, end := x.out.s, x.out.e
		sp.aliasForget(start, end)
		if a[3]&unix.MAP_SHARED != 0 && a[3]&unix.MAP_ANONYMOUS == 0 {
			t.aliasMmap(th, start, end, int(a[2])&protRWX)
		} else {
			t.aliasApply(th) // MAP_FIXED may have replaced a twin
		}
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		if !t.wxOn() || a[2]&(protGrowsdown|protGrowsup) != 0 {
			return // a PROT_GROWSDOWN call re-read the whole map (coreEffect)
		}
		t.aliasProtect(th, x.op.rng.s, x.op.rng.e, int(a[2])&protRWX, x.op.rewrite.done && x.op.rewrite.kprot&unix.PROT_WRITE == 0)
	case unix.SYS_MUNMAP:
		if sp.aliasTouches(x.op.rng.s, x.op.rng.e) {
			sp.aliasForget(x.op.rng.s, x.op.rng.e)
			t.aliasApply(th)
		}
	case unix.SYS_MREMAP:
		if sp.aliasTouches(x.op.rng.s, x.op.rng.e) || a[3]&mremapFixed != 0 && sp.aliasTouches(x.out.s, x.out.e) {
			t.aliasMove(th, a[0], pageUp(a[1]), pageUp(a[2]), ret)
		}
	}
}

// aliasRetry reports whether a fault at addr is on a writable alias ptjit
// made writable again meanwhile (its executable twin went away) and not
// yet retried: the store is retried, once.
func (sp *space) aliasRetry(addr uint64, lastStale [2]uint64) bool {
	for _, sm := range sp.alias.shared {
		if sm.start <= addr && addr < sm.end && sm.view&unix.PROT_WRITE != 0 {
			return lastStale != [2]uint64{0, addr}
		}
	}
	return false
}

// aliasChange is one store through an alias: its address and bytes.
type aliasChange struct {
	addr     uint64
	old, new []byte
}

// aliasFault handles a stopAliasFault: a store that faulted at addr on a
// write-protected alias is carried out (emulated, or stepped with the
// alias pages it writes writable) and recorded at the executable twin's
// addresses, or its page goes batch (aliasBatch); a fault on an alias made
// writable again meanwhile is retried. The fault is ptjit's; th is resumed
// by the caller.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) aliasFault(th *thread, addr uint64) {
	sp := th.proc.space
	at := clock.Now()
	m, ok := sp.aliasAt(addr)
	page := addr &^ (pageSize - 1)
	if _, open := sp.alias.open[page]; !ok || open {
		// made writable meanwhile (its twin went away, or another
		// thread's store sent the page batch): retried, once
		th.wx.lastStale = [2]uint64{0, addr} // aliasRetry
		return
	}
	al := *m
	regs, err := getRegs(th.tid)
	if err != nil {
		return
	}
	var e *emulated // computed once, when first asked
	emulation := func() emulated {
		if e == nil {
			em := emulateStore(th.tid, regs)
			e = &em
		}
		return *e
	}
	if t.aliasGoBatch(th, &al, addr, regs, at, func() bool { return emulation().err == nil }) {
		return
	}
	in, changes, err := t.aliasEmulate(th, &al, addr, emulation())
	if err != nil {
		if errors.Is(goneErr(th.tid, err), ErrThreadGone) {
			return
		}
		// written so far: recorded; the step writes them again
		st := stampAt(th, regs.Rip, clock.Now())
		for _, c := range changes {
			t.recordAliasChange(th, st, in, &al, c)
		}
		t.stepWrite(th, regs, in)
		return
	}
	st := stampAt(th, regs.Rip, clock.Now())
	for _, c := range changes {
		t.recordAliasChange(th, st, in, &al, c)
	}
}

// recordAliasChange records a store through alias al at every executable
// twin of the file bytes it changed: the store went to the alias, the code
// changed there.
func (t *Tracer) recordAliasChange(th *thread, st Stamp, in x86asm.Inst, al *sharedMap, c aliasChange) {
	fo := al.fileOf(c.addr)
	for _, tw := range th.proc.space.execTwins(al.dev, al.inode, fo, uint64(len(c.new))) {
		i := tw.off - fo
		t.recordWrite(th, st, in, tw.addr, c.old[i:i+tw.n], c.new[i:i+tw.n])
	}
}

// aliasEmulate carries out e, the emulated store that faulted at fault,
// through the alias al, writing the alias's file. On an error the stores written so far are
// returned with it.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) aliasEmulate(th *thread, al *sharedMap, fault uint64, e emulated) (x86asm.Inst, []aliasChange, error) {
	in, stores, nr, err := e.in, e.stores, e.after, e.err
	if err != nil {
		return in, nil, err
	}
	if !storesCover(stores, fault) {
		// the emulator got the instruction wrong: stepped instead
		return in, nil, fmt.Errorf("its stores miss the faulting address %#x", fault)
	}
	var changes []aliasChange
	for _, s := range stores {
		old := make([]byte, len(s.Data))
		if err := snapshot.ReadMem(th.tid, s.Addr, old); err != nil {
			return in, changes, err
		}
		// /proc/PID/mem refuses forced writes to shared mappings:
		// write the file itself.
		if err := t.aliasWrite(th, al, s.Addr, s.Data); err != nil {
			return in, changes, err
		}
		changes = append(changes, aliasChange{s.Addr, old, s.Data})
	}
	if err := unix.PtraceSetRegs(th.tid, &nr); err != nil {
		return in, changes, err
	}
	t.result.Stats.Emulated++
	return in, changes, nil
}

// aliasWrite writes data at addr of a shared alias through its file (the
// store lands in the same page cache page the twin executes).
func (t *Tracer) aliasWrite(th *thread, al *sharedMap, addr uint64, data []byte) error {
	if addr < al.start || addr+uint64(len(data)) > al.end {
		return x86emu.ErrNotEmulated // the store leaves the alias
	}
	w := &th.proc.space.alias
	key := [2]uint64{al.dev, al.inode}
	f := w.files[key]
	if f == nil {
		if m, ok := mapAt(th.tid, addr); ok {
			// root (CAP_SYS_ADMIN) may open a mapping's file here
			var err error
			f, err = os.OpenFile(fmt.Sprintf("/proc/%d/map_files/%x-%x", th.tid, m.Start, m.End), os.O_RDWR, 0)
			if err != nil {
				return err
			}
		}
		if f == nil {
			return x86emu.ErrNotEmulated
		}
		if w.files == nil {
			w.files = map[[2]uint64]*os.File{}
		}
		w.files[key] = f
	}
	_, err := f.WriteAt(data, int64(al.fileOf(addr)))
	return err
}

// AliasRangeRules is the filter ptjit adds to a process where W^X tracks
// shared file mappings, for the mappings in ranges (a filter per mapping,
// added at the exit stop of the mmap or mremap that put it there; past
// maxRangeFilters of them, AliasRules). A writable alias of code must be
// write-protected, or opened, at the stop of the call that makes it one,
// before the program runs on (aliasEffect acts in the stopped thread),
// and only a tracked shared mapping can be an alias or an alias's
// executable twin, so every such call changes one: its protection
// (mprotect, pkey_mprotect), its existence (munmap, an mmap over it). A
// MAP_SHARED mmap and mremap stop in any case (LaunchRules).
//
// The launch filter stops an mprotect only when it adds PROT_EXEC (with
// BPF events, not even then), so without this one a view mapped
// read-only and made writable by mprotect after its twin became
// executable was a writable alias nobody write-protected: its stores
// changed code unseen (TestE2EAliasMprotect, alias-jit's section 0).
func AliasRangeRules(ranges []AddrRange) []Rule {
	when := []Cond{{Arg: 0, Overlaps: ranges}}
	return []Rule{
		{"mprotect", unix.SYS_MPROTECT, when, "a shared file mapping: a protection change there may make or unmake an alias"},
		{"pkey_mprotect", unix.SYS_PKEY_MPROTECT, when, "as mprotect"},
		{"munmap", unix.SYS_MUNMAP, when, "an alias or its executable twin may go"},
		{"mmap", unix.SYS_MMAP, when, "may replace an alias or its twin"},
	}
}

// AliasRules is AliasRangeRules for a process with more shared file
// mappings than range filters: every protection change, munmap and
// MAP_FIXED mmap.
var AliasRules = []Rule{
	{"mprotect", unix.SYS_MPROTECT, nil, "a process with many shared file mappings: every protection change"},
	{"pkey_mprotect", unix.SYS_PKEY_MPROTECT, nil, "as mprotect"},
	{"munmap", unix.SYS_MUNMAP, nil, "an alias's executable twin may go"},
	{"mmap", unix.SYS_MMAP, []Cond{{Arg: 3, AnyBit: unix.MAP_FIXED}}, "may replace an alias's twin"},
}

// aliasFilter makes the calls that can change the shared file mapping at
// [lo, hi) in th's process stop (AliasRangeRules): a filter for the range,
// or, past maxRangeFilters of them, the one for every call (AliasRules),
// once. An attached process gets no filter (it could not be removed); the
// README says that writable aliases are not followed there.
//
// Precondition: on the locked tracer thread; th is at a syscall-exit stop.
func (t *Tracer) aliasFilter(th *thread, lo, hi uint64) {
	p := th.proc
	if t.att.on || p.full.calls || lo >= hi || ivalsCover(p.full.alias, lo, hi) {
		return
	}
	if len(p.full.alias) < maxRangeFilters {
		err := t.injectFilter(th, AliasRangeRules([]AddrRange{{lo, hi}}))
		if err == nil {
			p.full.alias = append(p.full.alias, ival{lo, hi})
			return
		}
		if errors.Is(err, ErrThreadGone) {
			return
		}
		// the filter for every call below warns if it fails too
	}
	if err := t.injectFilter(th, AliasRules); err != nil {
		if !errors.Is(err, ErrThreadGone) {
			t.warnf("pid %d: cannot add the filter that stops the calls over shared mappings (%v): "+
				"writable aliases of code are not followed there", p.pid, err)
		}
		return
	}
	p.full.calls = true
}
