package tracker

import (
	"errors"
	"fmt"
	"time"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/snapshot"
	"github.com/ptjit/ptjit/tracker/internal/x86emu"
	"github.com/ptjit/ptjit/x86"
	"github.com/ptjit/ptjit/x86/att"
	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// W^X write tracking (see doc.go, "W^X"). The program's own view of its
// protections lives in the Space pieces (Piece.Prot); what the kernel
// enforces is actualProt(view): tracked code the program has writable and
// executable is only executable, except pages in batch mode (writable, not
// executable). Everything that changes protections in the tracee without a
// syscall of the program goes through inject and is recorded with
// db.Recorder.ProtChange.

// WXMode is --wx.
type WXMode string

const (
	WXOff     WXMode = "off"
	WXPrecise WXMode = "precise" // every store recorded (emulated or stepped)
	WXBatch   WXMode = "batch"   // page writable until something executes there
	WXAuto    WXMode = "auto"    // precise, unless the page is being written in a burst: then batch
)

// In auto mode a store is precise unless its page already had
// autoBatchAfter precise stores within autoWindow: then the page goes
// batch. A JIT emitting a function into RWX memory makes hundreds of
// stores in microseconds; a patcher toggling a static key makes a few,
// spread out. Measured with java 17 on testdata/Hot.java, medians of 3
// (0.21 s alone): a threshold of 16 stores for the page's whole life took
// 0.57 s, 4 took 0.41 s, 2 took 0.36 s, all-batch 0.32 s; the window keeps
// later, sparse patches of a page precise. A store the emulator cannot
// carry out (AVX-512 copies: x86asm does not decode EVEX) makes its page
// batch at once: stepping it costs two injected mprotects and a step, and
// HotSpot's code-cache copies are made of them.
const (
	autoBatchAfter = 2
	autoWindow     = 10 * time.Millisecond
)

// pageRate counts a page's precise stores in the current window.
type pageRate struct {
	n     int
	since int64 // CLOCK_MONOTONIC ns of the window's first store
}

// ParseWX parses --wx.
func ParseWX(s string) (WXMode, error) {
	switch WXMode(s) {
	case WXOff, WXPrecise, WXBatch, WXAuto:
		return WXMode(s), nil
	}
	return "", fmt.Errorf("--wx: %q is not off, precise, batch or auto", s)
}

const protRWX = unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC

func isWX(prot int) bool { return prot&unix.PROT_WRITE != 0 && prot&unix.PROT_EXEC != 0 }

// actualProt is the protection ptjit enforces for the program's view.
func actualProt(view int) int {
	if isWX(view) {
		return view &^ unix.PROT_WRITE
	}
	return view
}

// wxProt is the protection W^X gives memory the program has as view:
// actualProt's, or view itself where W^X is off (--wx=off: the soft
// filter alone changes protections, and takes only PROT_EXEC away).
func (sp *space) wxProt(view int) int {
	if sp.WritesSeen { // W^X is on (newSpace)
		return actualProt(view)
	}
	return view
}

// wxState is the W^X state of one address space (space.wx); the writable
// aliases have theirs in aliasState.
type wxState struct {
	// gen counts the protection changes ptjit made in the space
	// (protect): a fetch fault retried as stale is stale again, not the
	// program's, when the protections changed since (threadWX.staleAgain)
	gen    uint64
	batch  batchSet            // pages ptjit made RW (not X) in batch mode
	writes map[uint64]pageRate // precise writes per page (auto mode)
	added  int                 // stores counted in writes since pruneWrites
	// kw: memory the kernel writes for the program's threads (their
	// stacks and control blocks: wx_tcb_linux_amd64.go), sorted and
	// merged, until unmapped or run; W^X keeps it writable. words: the
	// pages of their control words (tid, rseq) among it. opened: pages of
	// words that have run code (writable and executable from then on).
	kw, words []ival
	opened    map[uint64]bool
	// flight: pages opened for kernel copies in flight, and how many
	// (kwrite_linux_amd64.go); flightRan: those of them a fetch made
	// writable and executable meanwhile
	flight    map[uint64]int
	flightRan map[uint64]bool
}

// pruneWritesEvery: every so many counted stores, the pages whose window
// has passed are dropped from wxState.writes (they start a new one
// anyway), so that a program storing once into each page of a large
// mapping does not leave one entry per page.
const pruneWritesEvery = 4096

// pruneWrites drops the entries of writes whose window ended before now.
func (w *wxState) pruneWrites(now int64) {
	for p, r := range w.writes {
		if now-r.since > int64(autoWindow) {
			delete(w.writes, p)
		}
	}
	w.added = 0
}

func (t *Tracer) wxOn() bool { return t.opts.WX != "" && t.opts.WX != WXOff }

// wxs returns sp's W^X state, its maps made.
func (sp *space) wxs() *wxState {
	if sp.wx.writes == nil {
		sp.wx.writes, sp.wx.opened = map[uint64]pageRate{}, map[uint64]bool{}
	}
	return &sp.wx
}

// batchPage is a page left writable in batch mode: the first store into it
// (its thread and instruction are the new version's TID and IP).
type batchPage struct {
	tid   int
	ip    uint64
	fresh bool // a page of fresh memory (wxFreshEffect): no store seen
	// alias: an executable twin of an alias page being written
	// (wx_alias_batch_linux_amd64.go): not executable, not writable
	alias bool
}

// batchPages returns the batch pages in [lo, hi), in address order.
func (sp *space) batchPages(lo, hi uint64) []uint64 { return sp.wx.batch.in(lo, hi, 0) }

// clearBatch forgets batch pages in [start, end): a syscall of the program
// just set their protection itself.
func (sp *space) clearBatch(start, end uint64) { sp.wx.batch.clear(start, end) }

// recordBatch records batch page bp at page as a new version (the caller
// made it executable): the first writer's work, with its thread and store
// IP; for a fresh page or kernel-written memory (tcb: a thread's stack,
// wx_tcb_linux_amd64.go), where no store was seen, the thread th and the
// IP ip that first run it.
func (t *Tracer) recordBatch(th *thread, page uint64, bp batchPage, ip uint64, tcb bool) {
	cause, tid := "wx-batch", bp.tid
	switch {
	case tcb: // fresh or not: its stores were not watched
		cause, tid = "wx-tcb", th.tid
	case bp.fresh:
		cause, tid = "wx-fresh", th.tid
	default:
		ip = bp.ip
	}
	st := Stamp{At: clock.Now(), IP: ip, TID: tid, Via: th.tid}
	th.proc.space.RefreshSplit(page, page+pageSize, st.because(cause))
}

// wxEntryProt (entryRewrites): the program asks for writable and
// executable memory; the kernel gets executable-only, the Space keeps the
// program's view.
func (t *Tracer) wxEntryProt(th *thread, op *pendingOp, prot uint64) (uint64, string) {
	switch op.nr {
	case unix.SYS_MMAP, unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		if t.wxOn() && isWX(int(op.args[2])) {
			if t.wxKWEntry(th, op, op.rsp) {
				return prot, "" // over kernel-written memory: wxTCBEffect at the exit
			}
			if t.freshBatch(th, op) {
				op.wx.fresh = true
				return prot &^ unix.PROT_EXEC, wxFreshReason
			}
			return prot &^ unix.PROT_WRITE, wxEntryReason
		}
	}
	return prot, ""
}

const (
	wxEntryReason = "wx: the program asked for write+exec"
	wxFreshReason = "wx: fresh write+exec memory, writable until executed"
)

// Fresh memory. A new private anonymous RWX mapping holds only zeros:
// there is no code in it until the program writes some, and it must run
// none before. In batch and auto modes it starts as batch pages (RW, not
// executable) instead of RX: the program fills it at full speed and each
// page is recorded at its first execution (batchExec), as a batch page
// is. Started RX, a page a JIT fills cost a precise store, a second fault
// that sent it to batch with an injected mprotect, then the same fetch
// fault: java Hot's code heaps are three such mappings of 2.5 MiB that
// HotSpot fills page after page (BENCHMARKS.md). Precise mode keeps every
// store, so it starts RX as before. Any size: the fresh pages are kept as
// runs (batchSet), so SBCL's 1 GiB dynamic space, whose heap pages the
// Lisp writes and whose few code pages it runs, costs a fault per page
// that runs, not one per page written (started RX, mappings over 64 MiB
// did, when batch pages were kept one map entry a page).

// Reserved memory made RWX. qemu-user reserves its 128 MiB translation
// buffer PROT_NONE and makes it RWX with one mprotect before it writes a
// byte there; a Lisp or a JIT may do the same with a heap. Private
// anonymous pages that are neither present nor swapped out read as zeros
// (pages_linux_amd64.go: populated), so such a range is as fresh as a new
// mapping: it starts as batch pages too. A range of which any page is
// populated (read or written since it was mapped, or shorter than
// sparseMin, where the scan is not worth it) may hold code that is about
// to run, and starts executable-only as before, recorded at the call.

// freshBatch reports whether op maps fresh memory, or makes unpopulated
// private anonymous memory writable and executable, that starts as batch
// pages (see above).
func (t *Tracer) freshBatch(th *thread, op *pendingOp) bool {
	if t.wxMode(th) == WXPrecise || op.args[1] == 0 {
		return false
	}
	switch op.nr {
	case unix.SYS_MMAP:
		return op.args[3]&unix.MAP_ANONYMOUS != 0 && op.args[3]&unix.MAP_TYPE == unix.MAP_PRIVATE
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		runs, ok := populated(th.tid, op.rng.s, op.rng.e)
		return ok && len(runs) == 0
	}
	return false
}

// wxFreshEffect (exitEffects): the pages of a fresh mapping are batch
// pages (see freshBatch), with no first store: the version takes the
// thread and IP that first executes there.
func (t *Tracer) wxFreshEffect(x *sysExit) {
	if !x.op.wx.fresh {
		return
	}
	r := x.out // an mmap's
	if x.op.nr != unix.SYS_MMAP {
		r = x.op.rng
	}
	x.sp.wxs().batch.addFresh(r.s, r.e)
	t.result.Stats.FreshMapped += int((r.e - r.s) / pageSize)
}

// wxClearEffect (exitEffects): batch pages in the range the call sets get
// the program's protection, so W^X forgets them; an mremap's moved batch
// pages are noted for wxMovedEffect.
func (t *Tracer) wxClearEffect(x *sysExit) {
	sp, a, ret := x.sp, x.op.args, x.ret
	switch x.op.nr {
	case unix.SYS_MMAP:
		sp.clearBatch(x.out.s, x.out.e)
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT, unix.SYS_MUNMAP:
		if x.op.nr != unix.SYS_MUNMAP && a[2]&unix.PROT_EXEC != 0 {
			t.aliasSettleExec(x.th, x.op.rng.s, x.op.rng.e) // executable twins of alias pages being written
		}
		sp.clearBatch(x.op.rng.s, x.op.rng.e)
	case unix.SYS_MREMAP:
		// batch pages (RW in the kernel) that moved must become
		// executable-only again at their new place (settleBatch made
		// them so before the call: this is for a settle that failed)
		for _, p := range sp.batchPages(a[0], a[0]+min(pageUp(a[1]), pageUp(a[2]))) {
			x.moved = append(x.moved, ret+(p-a[0]))
		}
		sp.clearBatch(x.op.rng.s, x.op.rng.e)
	}
}

// wxMovedEffect (exitEffects): batch pages an mremap moved get ptjit's
// protection at their new place.
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) wxMovedEffect(x *sysExit) {
	sp := x.sp
	for _, p := range x.moved {
		if err := t.protect(x.th, p, p+pageSize, sp.kernelProt(p, sp.ProtOf(p)), "wx: batch page moved by mremap"); err != nil {
			t.warnOp(err)
		}
	}
}

// wxAct is what wxFault does with a fault; wxPolicy decides it.
type wxAct uint8

const (
	// wxRetryStale: another thread's fault changed the page meanwhile
	// (several readers fault on a batch page, the first makes it
	// executable): the instruction runs again, the first time at this
	// (RIP, address).
	wxRetryStale wxAct = iota
	// wxRetryFetch: the same fetch fault again, still stale: the
	// instruction at RIP does not write the address (a thread that runs
	// a page another thread keeps patching can find it non-executable,
	// the patcher's step, time after time).
	wxRetryFetch
	// wxExecBatch: code runs in a batch page: its bytes are recorded and
	// it is made executable again (batchExec).
	wxExecBatch
	// wxStoreBatch: the store's page goes batch, writable until code runs
	// there.
	wxStoreBatch
	// wxStorePrecise: the store is carried out and logged, emulated or
	// stepped (preciseWrite).
	wxStorePrecise
)

// wxFaultIn is what wxPolicy decides a W^X fault from.
type wxFaultIn struct {
	mode  WXMode
	fetch bool // an instruction fetch faulted (else a store)
	// prot: the page's protection in the kernel now (batch pages and
	// kernel-written memory not yet run are writable, not executable)
	prot    int
	inBatch bool // a batch page, or kernel-written memory not yet run
	// again: the thread's last fault retried as stale was this one (same
	// RIP and address); staleFetches: how often it was retried since
	again        bool
	staleFetches int
	self         bool     // the storing instruction runs from the page
	rate         pageRate // the page's recent precise stores (auto mode)
	now          int64    // the fault's time, CLOCK_MONOTONIC ns
	// Asked only when the decision needs them: whether the instruction
	// stores into the faulting address, whether the emulator can carry
	// the store out, whether the page holds only zeros up to its end.
	storesAt, emulatable, zero func() bool
}

// wxPolicy decides what wxFault does with a fault, and the page's store
// rate after it (counted: where storePolicy counts it, auto mode). It
// reads nothing but in.
//
// A fault is stale when the page already allows what faulted. It is
// retried once: the same fault twice is not stale (a store whose target is
// its own RIP). A fetch fault seen again is still stale when the
// instruction at RIP does not write the address; maxStaleFetches bounds
// those retries where the emulator cannot tell. Then a fetch in a batch
// page executes it; anything else is a store, which storePolicy sends
// batch or precise.
func wxPolicy(in wxFaultIn) (act wxAct, rate pageRate, counted bool) {
	stale := in.fetch && in.prot&unix.PROT_EXEC != 0 || !in.fetch && in.prot&unix.PROT_WRITE != 0
	if stale && !in.again {
		return wxRetryStale, in.rate, false
	}
	if stale && in.fetch && in.staleFetches < maxStaleFetches && !in.storesAt() {
		return wxRetryFetch, in.rate, false
	}
	if in.fetch && in.inBatch {
		return wxExecBatch, in.rate, false
	}
	batch, rate, counted := storePolicy(in.mode, in.rate, in.now, in.self, in.emulatable, in.zero)
	if batch {
		return wxStoreBatch, rate, counted
	}
	return wxStorePrecise, rate, counted
}

// wxFault handles a stopWXFault: a SIGSEGV (SEGV_ACCERR) at addr, in
// memory the program has writable and executable. wxPolicy decides, this
// acts. The fault is ptjit's; th is resumed by the caller.
//
// Precondition: on the locked tracer thread; th is in signal-delivery-stop.
func (t *Tracer) wxFault(th *thread, addr uint64, stopRegs *unix.PtraceRegs) {
	sp := th.proc.space
	w := sp.wxs()
	page := addr &^ (pageSize - 1)
	at := clock.Now()
	p, _ := sp.PieceAt(addr)
	var regs unix.PtraceRegs
	if stopRegs != nil {
		regs = *stopRegs
	} else {
		var err error
		if regs, err = getRegs(th.tid); err != nil {
			return // died meanwhile
		}
	}
	in := wxFaultIn{mode: t.wxMode(th), fetch: fetchFault(addr, regs.Rip), prot: actualProt(p.Prot),
		inBatch: w.batch.has(page) || sp.inKW(page) && !w.opened[page],
		// a store into the page holding the storing instruction cannot
		// run in batch mode (the page would stop being executable under
		// it)
		self: runsIn(regs.Rip, page), rate: w.writes[page], now: at.MonoNS}
	if in.inBatch {
		in.prot = p.Prot &^ unix.PROT_EXEC
	}
	key := [2]uint64{regs.Rip, addr}
	in.again, in.staleFetches = !th.wx.staleAgain(key, sp.wx.gen), th.wx.staleFetches
	in.storesAt = func() bool { return storesAt(th.tid, regs, addr) }
	// A store the emulator cannot carry out (an AVX-512 copy: x86asm has
	// no EVEX) would be single-stepped: under auto its page goes batch at
	// once instead (see autoBatchAfter). The emulation is kept for
	// preciseWrite.
	var em *emulated
	in.emulatable = func() bool {
		e := emulateStore(th.tid, regs)
		em = &e
		return e.err == nil
	}
	in.zero = func() bool { return zeroRun(th.tid, addr, page+pageSize) > 0 }
	act, rate, counted := wxPolicy(in)
	if counted {
		w.countStore(page, rate, at.MonoNS)
	}
	switch act {
	case wxRetryStale:
		th.wx.retried(key, sp.wx.gen)
		return
	case wxRetryFetch:
		th.wx.staleFetches++
		return
	}
	th.wx = threadWX{}
	switch act {
	case wxExecBatch:
		t.batchExec(th, page, regs.Rip)
	case wxStoreBatch:
		if err := t.protect(th, page, page+pageSize, unix.PROT_READ|unix.PROT_WRITE, "wx-batch: writable until executed"); err != nil {
			t.warnOp(err)
			return
		}
		w.batch.set(page, batchPage{tid: th.tid, ip: regs.Rip})
		t.result.Stats.BatchWrites++
	case wxStorePrecise:
		t.preciseWrite(th, regs, em, addr, at)
	}
}

// maxStaleFetches bounds the retries of one fetch fault (wxFault).
const maxStaleFetches = 64

// storesAt reports whether the instruction at regs.Rip stores into addr,
// as the emulator sees it (false when it cannot emulate it).
func storesAt(tid int, regs unix.PtraceRegs, addr uint64) bool {
	e := emulateStore(tid, regs)
	if e.err != nil {
		return false
	}
	for _, s := range e.stores {
		if addr >= s.Addr && addr-s.Addr < uint64(len(s.Data)) {
			return true
		}
	}
	return false
}

// batchExec: something executes in a page left writable by batch mode:
// record its bytes as a new version and make it executable (not writable)
// again; the instruction then re-executes.
//
// ip is the instruction that runs there first (the thread's RIP).
func (t *Tracer) batchExec(th *thread, page, ip uint64) {
	sp := th.proc.space
	bp, _ := sp.wx.batch.get(page)
	if bp.alias {
		t.aliasSettle(th, page)
		return
	}
	sp.wx.batch.del(page)
	tcb := sp.inKW(page)
	view := sp.ProtOf(page)
	if view == 0 {
		view = protRWX
	}
	reason := "wx-batch: executed"
	if tcb {
		if sp.inWords(page) {
			// The kernel writes this page any time (tid, rseq):
			// it stays writable (and is no longer watched), as
			// the program has it (kernelProt of an opened page).
			sp.wxs().opened[page] = true
			reason = "wx-tcb: executed; the kernel writes this page any time, so it stays writable"
		} else {
			// Stack memory that runs code is code from now on:
			// W^X's, executable-only (the kernel's writes into
			// it fail, as into any code W^X keeps; README).
			sp.dropKW(page, page+pageSize)
			reason = "wx-tcb: executed; stack memory, code from now on"
		}
	}
	prot := sp.kernelProt(page, view)
	if !tcb && sp.wxs().flight[page] > 0 {
		// another thread's kernel copy into the page is in flight: the
		// page stays writable until that call's exit stop, which makes
		// it a batch page again (kernelWriteSettle)
		prot = view
		sp.wxs().flightRan[page] = true
		reason = "wx-batch: executed while a kernel copy into it is in flight; writable until the copy's call returns"
	}
	if err := t.protect(th, page, page+pageSize, prot, reason); err != nil {
		t.warnOp(err)
		return
	}
	if bp.fresh {
		t.result.Stats.FreshExecuted++
	}
	if tcb {
		t.result.Stats.TCBExecuted++
	}
	t.recordBatch(th, page, bp, ip, tcb)
}

// preciseWrite carries out one store the program could not make because of
// ptjit's protection at fault, and records it: emulated when possible, else
// single-stepped with the page briefly writable. An emulation whose
// stores miss fault is not carried out (it is stepped): the emulator
// got the instruction wrong, and writing through /proc/PID/mem would put
// the bytes wherever it computed.
func (t *Tracer) preciseWrite(th *thread, regs unix.PtraceRegs, em *emulated, fault uint64, at clock.Stamp) {
	if em == nil {
		e := emulateStore(th.tid, regs)
		em = &e
	}
	in, stores, nr, err := em.in, em.stores, em.after, em.err
	if err == nil && !storesCover(stores, fault) {
		err = fmt.Errorf("its stores miss the faulting address %#x", fault)
	}
	if err == nil {
		olds := make([][]byte, len(stores))
		for i, s := range stores {
			olds[i] = make([]byte, len(s.Data))
			if err = snapshot.ReadMem(th.tid, s.Addr, olds[i]); err != nil {
				break
			}
		}
		if err == nil {
			for _, s := range stores {
				if err = t.memWrite(th, s.Addr, s.Data); err != nil {
					break
				}
			}
		}
		if err == nil {
			if err = unix.PtraceSetRegs(th.tid, &nr); err == nil {
				t.result.Stats.Emulated++
				for i, s := range stores {
					t.recordWrite(th, stampAt(th, regs.Rip, at), in, s.Addr, olds[i], s.Data)
				}
				return
			}
		}
		if errors.Is(goneErr(th.tid, err), ErrThreadGone) {
			return // died meanwhile: nothing more to do
		}
		t.warnf("tid %d: emulating %v at %#x: %v; single-stepping it", th.tid, in, regs.Rip, err)
	}
	t.stepWrite(th, regs, in)
}

// storesCover reports whether one of stores writes addr.
func storesCover(stores []x86emu.Store, addr uint64) bool {
	for _, s := range stores {
		if addr >= s.Addr && addr-s.Addr < uint64(len(s.Data)) {
			return true
		}
	}
	return false
}

// emulated is emulateStore's result: the instruction, its stores, the
// registers after it, or why it cannot be emulated.
type emulated struct {
	in     x86asm.Inst
	stores []x86emu.Store
	after  unix.PtraceRegs
	err    error
}

// emulateStore decodes the instruction at regs.Rip of the stopped thread
// tid and computes its stores (x86emu.Emulate): the code and a MOVS source
// are read from the tracee, the XMM registers only when the instruction
// stores one. e.after is regs as executing the instruction leaves them.
//
// Precondition: on the locked tracer thread; tid is stopped.
func emulateStore(tid int, regs unix.PtraceRegs) (e emulated) {
	code := make([]byte, 16)
	for n := 16; n > 0; n -= 4 {
		if snapshot.ReadMem(tid, regs.Rip, code[:n]) == nil {
			code = code[:n]
			break
		}
	}
	e.after = regs
	var fx *fxsave
	var ymm []byte
	e.in, e.stores, e.err = x86emu.Emulate(code, x86emu.Machine{
		Regs: &e.after,
		XMM: func(i int) ([]byte, error) {
			if fx == nil {
				var err error
				if fx, err = getXMM(tid); err != nil {
					return nil, err
				}
			}
			return fx[160+16*i : 176+16*i], nil
		},
		YMMHigh: func(i int) ([]byte, error) {
			if ymm == nil {
				var err error
				if ymm, err = getYMMHigh(tid); err != nil {
					return nil, err
				}
			}
			return ymm[16*i : 16*i+16], nil
		},
		Read: func(a uint64, b []byte) error { return snapshot.ReadMem(tid, a, b) },
	})
	return e
}

// stepWrite runs the faulting instruction with its target pages writable,
// one PTRACE_SINGLESTEP, and protects them again. A target page is RWX
// memory W^X keeps (opened with the program's protection, executable as it
// asked) or a write-protected alias (opened writable, as the program has
// it): the page of the fault, then each page the step faults on, up to
// maxStepPages (a wide store straddling two pages, or two views). What
// changed in each is recorded: at the page itself, or at the executable
// twins of an alias page's file bytes.
func (t *Tracer) stepWrite(th *thread, regs unix.PtraceRegs, in x86asm.Inst) {
	step := &stepPages{t: t, th: th}
	si, _ := getSiginfo(th.tid)
	step.open(si.Addr)
	for {
		if err := unix.PtraceSingleStep(th.tid); err != nil {
			return // gone (ESRCH): nothing to protect again
		}
		kind, sig, err := t.waitThread(th)
		if err != nil {
			return // th is gone: the program cannot store there
		}
		if kind != stopSignal {
			continue
		}
		if sig == int(unix.SIGTRAP) {
			break
		}
		if sig == int(unix.SIGSEGV) {
			// the store reaches into another protected page
			if si, err := getSiginfo(th.tid); err == nil && si.Code == segvAccerr && step.open(si.Addr) {
				continue
			}
		}
		t.hold(th, sig)
		if sig == int(unix.SIGSEGV) || instructionFault(th.tid, sig) {
			// the program's own fault (a store past the end of a
			// shared file's pages is SIGBUS): delivered on resume;
			// stepping again would fault again, for ever
			step.restore()
			return
		}
	}
	step.restore()
	t.result.Stats.Stepped++
	step.record(stampAt(th, regs.Rip, clock.Now()), in)
}

// stepPages are the pages a stepped store is let write (stepWrite).
type stepPages struct {
	t     *Tracer
	th    *thread
	pages []stepPage
}

// stepPage is one page opened for a step, with its bytes before it.
type stepPage struct {
	page uint64
	view int       // RWX memory: the program's view
	al   sharedMap // an alias page: its mapping (al.end != 0)
	old  []byte
}

// open makes the page of addr writable for the step, if it is one W^X
// keeps from the program and not open yet (at most maxStepPages).
func (s *stepPages) open(addr uint64) bool {
	sp := s.th.proc.space
	page := addr &^ (pageSize - 1)
	for _, o := range s.pages {
		if o.page == page {
			return false
		}
	}
	if len(s.pages) >= maxStepPages {
		return false
	}
	o := stepPage{page: page}
	kview := 0
	if view := sp.ProtOf(page); isWX(view) {
		o.view, kview = view, view
		if sp.hidden(page) {
			kview &^= unix.PROT_EXEC // the store is not in JIT code: the filter keeps it hidden
		}
	} else if al, ok := sp.aliasAt(page); ok {
		o.al, kview = *al, al.view
	} else {
		return false
	}
	o.old = make([]byte, pageSize)
	snapshot.ReadMem(s.th.tid, page, o.old)
	if err := s.t.protect(s.th, page, page+pageSize, kview, "wx-precise: step a store"); err != nil {
		s.t.warnOp(err)
		return false
	}
	s.pages = append(s.pages, o)
	return true
}

// restore gives the opened pages W^X's protection again.
func (s *stepPages) restore() {
	sp := s.th.proc.space
	for _, o := range s.pages {
		var err error
		if o.al.end != 0 {
			err = s.t.protect(s.th, o.page, o.page+pageSize, o.al.view&^unix.PROT_WRITE, "wx-precise: step done (alias)")
		} else {
			err = s.t.protect(s.th, o.page, o.page+pageSize, sp.kernelProt(o.page, o.view), "wx-precise: step done")
		}
		if err != nil {
			s.t.warnOp(err)
		}
	}
}

// record records what the step changed in each opened page, stamped st.
func (s *stepPages) record(st Stamp, in x86asm.Inst) {
	for _, o := range s.pages {
		now := make([]byte, pageSize)
		if snapshot.ReadMem(s.th.tid, o.page, now) != nil {
			continue
		}
		lo, hi := diffRange(o.old, now)
		if lo >= hi {
			continue
		}
		if o.al.end != 0 {
			s.t.recordAliasChange(s.th, st, in, &o.al, aliasChange{o.page + uint64(lo), o.old[lo:hi], now[lo:hi]})
		} else {
			s.t.recordWrite(s.th, st, in, o.page+uint64(lo), o.old[lo:hi], now[lo:hi])
		}
	}
}

// maxStepPages bounds the pages one stepped store is let write (a 64-byte
// store straddles two; a REP MOVS the emulator left is stepped one
// iteration at a time).
const maxStepPages = 8

// instructionFault reports whether sig, just reported for tid, is a fault
// of the instruction being stepped (SIGBUS, SIGILL, SIGFPE raised by the
// kernel: si_code > 0), not a signal sent to the thread meanwhile.
func instructionFault(tid, sig int) bool {
	switch unix.Signal(sig) {
	case unix.SIGBUS, unix.SIGILL, unix.SIGFPE:
		si, err := getSiginfo(tid)
		return err == nil && si.Code > 0
	}
	return false
}

func diffRange(a, b []byte) (int, int) {
	lo := 0
	for lo < len(a) && a[lo] == b[lo] {
		lo++
	}
	hi := len(a)
	for hi > lo && a[hi-1] == b[hi-1] {
		hi--
	}
	return lo, hi
}

// recordWrite records one store into tracked code, made by th at st (its
// instruction, and when the store was carried out): new versions of the
// pages it touched, and the write itself.
func (t *Tracer) recordWrite(th *thread, st Stamp, in x86asm.Inst, addr uint64, old, new []byte) {
	sp := th.proc.space
	start := addr &^ (pageSize - 1)
	end := pageUp(addr + uint64(len(new)))
	ip := st.IP
	sp.RefreshSplit(start, end, st.because("write"))
	var ver int64
	if p, ok := sp.PieceAt(addr); ok && p.Kind == Anon {
		ver = p.ID
	}
	t.rec.AddWrite(db.Write{PID: sp.owner, TID: th.tid, At: st.At, IP: ip, Insn: insnText(th.tid, in, ip),
		Addr: addr, Old: old, New: new, Version: ver})
	t.result.Stats.Writes++
}

// Before an mremap. W^X gives the pages of one mapping different
// protections (RX, and RW for batch and fresh pages), so the kernel keeps
// them as several VMAs, and an mremap of a range spanning VMAs fails with
// EFAULT where the program alone, with one RWX mapping, succeeds. At the
// seccomp stop of an mremap whose old range holds batch pages, the call is
// skipped (restartAround), the batch pages are settled, and the call runs
// again: each is recorded as a version as at its first execution (the
// program may have written it since), and its range is made what the rest
// of the mapping is (kernelProt of the view), in one injected mprotect per
// run of pages. The moved memory then faults on stores like any other.
// (In a fork child of the process that split the mapping this does not
// help: the child's copies of the parts have anon_vmas of their own and
// the kernel does not merge them again, so the mremap still fails with
// EFAULT; README, "What ptjit cannot see".)

// restartForMremap reports true when th's mremap was restarted around
// settleBatch (see above).
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) restartForMremap(th *thread, regs unix.PtraceRegs, op *pendingOp) bool {
	if op.nr != unix.SYS_MREMAP {
		return false
	}
	lo, hi := op.rng.s, op.rng.e
	if len(th.proc.space.batchPages(lo, hi)) == 0 {
		return false
	}
	return t.restartAround(th, regs, op, func(th *thread) { t.settleBatch(th, lo, hi, "wx-batch: settled before mremap") })
}

// settleBatch records the batch pages of [lo, hi) and gives them the
// protection of their view (see restartForMremap; ownFilterEntry).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) settleBatch(th *thread, lo, hi uint64, reason string) {
	sp := th.proc.space
	pages := sp.batchPages(lo, hi)
	for _, p := range pages {
		if bp, _ := sp.wx.batch.get(p); bp.alias {
			t.aliasSettle(th, p) // its alias pages first
		}
	}
	pages = sp.batchPages(lo, hi)
	for i := 0; i < len(pages); {
		j, prot := i+1, sp.kernelProt(pages[i], sp.ProtOf(pages[i]))
		for j < len(pages) && pages[j] == pages[j-1]+pageSize && sp.kernelProt(pages[j], sp.ProtOf(pages[j])) == prot {
			j++
		}
		if err := t.protect(th, pages[i], pages[j-1]+pageSize, prot, reason); err != nil {
			t.warnOp(err)
			return
		}
		for _, p := range pages[i:j] {
			bp, _ := sp.wx.batch.get(p)
			sp.wx.batch.del(p)
			t.recordBatch(th, p, bp, 0, false)
		}
		i = j
	}
}

// insnText is the text of the storing instruction in at ip, in GNU (AT&T)
// syntax: x86asm's, or, for the VEX stores x86asm does not decode (in.Op
// 0: x86emu's vex_linux_amd64.go), the text of ptjit's own decoder from
// the bytes at ip.
func insnText(tid int, in x86asm.Inst, ip uint64) string {
	if in.Op != 0 {
		return x86asm.GNUSyntax(in, ip, nil)
	}
	code := make([]byte, x86.MaxInsnLen)
	for n := len(code); n > 0; n -= 4 {
		if snapshot.ReadMem(tid, ip, code[:n]) == nil {
			var d x86.Insn
			if x86.DecodeInsn(code[:n], ip, x86.Mode64, &d) == nil {
				return att.Text(&d)
			}
			break
		}
	}
	return x86asm.GNUSyntax(in, ip, nil)
}
