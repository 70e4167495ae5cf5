package tracker

import (
	"encoding/binary"
	"sort"

	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Memory the kernel writes for the program's threads. The kernel itself
// writes a thread's stack (signal frames, and every syscall's output into
// a buffer there: read, pipe, wait4) and its control block: the thread id
// at clone (CLONE_PARENT_SETTID, CLONE_CHILD_SETTID), 0 there at the
// thread's exit (CLONE_CHILD_CLEARTID, then the futex wake pthread_join
// waits for), and the rseq area each time the thread returns to user mode
// after it was descheduled (a ptrace stop is one). Where W^X keeps such a
// page executable-only the kernel's write fails: a syscall gets EFAULT, a
// signal or an rseq update kills the thread with SIGSEGV, the tid stays 0
// so pthread_join returns before the thread ran, and a shared futex on the
// tid word fails with EFAULT. glibc keeps a thread's struct pthread (tid
// word, rseq area) at the top of its stack, and maps every thread stack
// RWX in a program with an executable stack (and makes them all RWX when
// such a library is dlopen'ed); pthread_attr_setstack takes any memory.
//
// So W^X keeps that memory writable (wxState.kw): each thread's stack (the
// bounds clone3 gives, within its executable region) and the pages of its
// control words, from the clone that made it (the parent waits in its
// clone event stop until the child's first stop made them writable, where
// a word the kernel could not write is written by ptjit) until unmapped.
// Writable-and-executable memory there is writable, not executable, until
// code runs in a page: that page is recorded then (cause "wx-tcb", the
// thread and IP that run it: its stores were not watched). A page of
// control words is then left writable and executable, since the kernel
// writes it any time: changes to code there after its first execution are
// not seen (README, "What ptjit cannot see"). Any other stack page that
// runs code is code from then on, W^X's like any other (a thread's stack
// reused as a JIT area once the thread is gone keeps its history). A
// program mprotect that makes kernel-written memory, or the memory around
// the caller's stack pointer, or a PROT_GROWSDOWN stack, writable and
// executable keeps it writable (wxEntryProt leaves the call alone,
// wxTCBEffect protects the rest of the range after it).

// cloneWords are the addresses the kernel writes for a new thread, from
// the clone or clone3 call that made it (0: none).
type cloneWords struct {
	parentTID uint64 // CLONE_PARENT_SETTID: written at the clone
	childTID  uint64 // CLONE_CHILD_SETTID and CLONE_CHILD_CLEARTID
	childSet  bool   // CLONE_CHILD_SETTID: written as the child starts
	rseq      uint64 // the child's rseq area, where the parent's is at the same offset from its TLS
	rseqLen   uint64
	// the child's stack (CLONE_VM): clone3 gives its bounds, clone only
	// its top (stackLo 0)
	stackLo, stackHi uint64
}

// maxStackGuess bounds the stack below a clone's top where clone (unlike
// clone3) gives no size: glibc's default thread stack.
const maxStackGuess = 8 << 20

// cloneArgs reads the words of the clone or clone3 th is in (at its
// PTRACE_EVENT_CLONE stop), with the clone's flags.
//
// Precondition: on the locked tracer thread; th is in its clone event stop.
func cloneArgs(th *thread, regs unix.PtraceRegs) (flags uint64, w cloneWords) {
	var tls, stackLo, stackHi uint64
	switch regs.Orig_rax {
	case unix.SYS_CLONE:
		// clone(flags, stack, parent_tid, child_tid, tls)
		flags, stackHi, w.parentTID, w.childTID, tls = regs.Rdi, regs.Rsi, regs.Rdx, regs.R10, regs.R8
	case unix.SYS_CLONE3:
		// struct clone_args: flags, pidfd, child_tid, parent_tid,
		// exit_signal, stack, stack_size, tls
		var b [64]byte
		if snapshot.ReadMem(th.tid, regs.Rdi, b[:]) != nil {
			return uint64(unix.SIGCHLD), cloneWords{}
		}
		le := binary.LittleEndian
		flags, w.childTID, w.parentTID, tls = le.Uint64(b[0:]), le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint64(b[56:])
		if base := le.Uint64(b[40:]); base != 0 {
			stackLo, stackHi = base, base+le.Uint64(b[48:])
		}
	default:
		return uint64(unix.SIGCHLD), cloneWords{}
	}
	if flags&unix.CLONE_PARENT_SETTID == 0 {
		w.parentTID = 0
	}
	if flags&(unix.CLONE_CHILD_SETTID|unix.CLONE_CHILD_CLEARTID) == 0 {
		w.childTID = 0
	}
	w.childSet = flags&unix.CLONE_CHILD_SETTID != 0
	if flags&unix.CLONE_VM != 0 {
		w.stackLo, w.stackHi = stackLo, stackHi
		if flags&unix.CLONE_SETTLS != 0 {
			// The new thread registers its own rseq area (CLONE_VM
			// clears the registration), where the C library puts
			// every thread's: at the parent's offset from the thread
			// pointer.
			if c, err := getRseq(th.tid); err == nil && c.Pointer != 0 && regs.Fs_base != 0 {
				w.rseq, w.rseqLen = tls+(c.Pointer-regs.Fs_base), uint64(max(c.Size, 32))
			}
		}
	}
	return flags, w
}

// inKW reports whether the page at addr is memory the kernel writes for a
// thread (wxState.kw).
func (sp *space) inKW(addr uint64) bool { return inSorted(sp.wx.kw, addr) }

// inWords reports whether the page at addr holds a thread's control
// words (its tid, its rseq area: wxState.words).
func (sp *space) inWords(addr uint64) bool { return inSorted(sp.wx.words, addr) }

// inSorted is inIvals for sorted, merged rs (mergeIvals): a binary search.
func inSorted(rs []ival, a uint64) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].e > a })
	return i < len(rs) && rs[i].s <= a
}

// regionExtent returns the extent of the anonymous executable region that
// holds addr: the adjacent pieces of its Region (W^X and precise stores
// split a mapping into pieces page by page).
func (sp *space) regionExtent(addr uint64) (ival, bool) {
	i := sp.first(addr)
	if i >= len(sp.pieces) || sp.pieces[i].Start > addr || sp.pieces[i].Kind != Anon {
		return ival{}, false
	}
	lo, hi, reg := i, i, sp.pieces[i].Region
	for lo > 0 && sp.pieces[lo-1].End == sp.pieces[lo].Start && sp.pieces[lo-1].Kind == Anon && sp.pieces[lo-1].Region == reg {
		lo--
	}
	for hi+1 < len(sp.pieces) && sp.pieces[hi+1].Start == sp.pieces[hi].End && sp.pieces[hi+1].Kind == Anon && sp.pieces[hi+1].Region == reg {
		hi++
	}
	return ival{sp.pieces[lo].Start, sp.pieces[hi].End}, true
}

// dropKW forgets kernel-written memory in [lo, hi): unmapped or mapped
// anew.
func (sp *space) dropKW(lo, hi uint64) {
	sp.wx.kw = subIval(sp.wx.kw, lo, hi)
	sp.wx.words = subIval(sp.wx.words, lo, hi)
	for p := range sp.wx.opened {
		if p >= lo && p < hi {
			delete(sp.wx.opened, p)
		}
	}
}

// wxBlocksWrite reports whether W^X keeps the kernel from writing addr of
// sp: memory the program has writable and executable that ptjit has
// executable-only.
func (sp *space) wxBlocksWrite(addr uint64) bool {
	p, ok := sp.PieceAt(addr)
	if !ok || !isWX(p.Prot) {
		return false
	}
	return sp.kernelProt(addr, p.Prot)&unix.PROT_WRITE == 0 && !sp.isBatch(addr)
}

// isBatch reports whether the page at addr is a W^X batch page.
func (sp *space) isBatch(addr uint64) bool {
	ok := sp.wx.batch.has(addr &^ (pageSize - 1))
	return ok
}

// wxCloneTID (cloneEvent, the parent in its clone event stop): the tid
// CLONE_PARENT_SETTID had the kernel write where W^X kept it from writing
// (in the parent's memory), written by ptjit.
func (t *Tracer) wxCloneTID(th *thread, w cloneWords, child int) {
	if !t.wxOn() || w.parentTID == 0 || th.proc.space == nil || !th.proc.space.wxBlocksWrite(w.parentTID) {
		return
	}
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(child))
	if err := t.memWrite(th, w.parentTID, b[:]); err != nil {
		t.warnOp(err)
	}
}

// wxHoldParent (cloneEvent, before the child's first stop) reports whether
// the parent must wait in its clone event stop until the child's first
// stop made the child's control block writable (wxTCB): a word of it is in
// memory W^X has executable-only, and the parent may wait on the tid word
// at once (pthread_join), which the kernel refuses (EFAULT) on a
// read-only page as it does for every shared futex.
func (t *Tracer) wxHoldParent(th *thread, b birth) bool {
	sp := th.proc.space
	if !t.wxOn() || sp == nil || !(b.thread || b.shareVM) {
		return false
	}
	w := b.words
	for _, a := range []uint64{w.parentTID, w.childTID, w.rseq} {
		if a != 0 && sp.wxBlocksWrite(a) {
			return true
		}
	}
	return false
}

// wxTCB (adopt, the new thread in its first stop, before it ran): the
// thread's stack mapping and the pages of the words the kernel writes for
// it become kernel-written memory (see above), made writable where W^X had
// them executable-only; a CLONE_CHILD_SETTID tid the kernel could not
// write is written.
//
// Precondition: on the locked tracer thread; th is in its first stop.
func (t *Tracer) wxTCB(th *thread, w cloneWords, shared bool) {
	sp := th.proc.space
	if !t.wxOn() || sp == nil {
		return
	}
	if w.childSet && sp.wxBlocksWrite(w.childTID) {
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], uint32(th.tid))
		if err := t.memWrite(th, w.childTID, b[:]); err != nil {
			t.warnOp(err)
		}
	}
	var words []ival // the control words' pages (left executable once run)
	page := func(a, n uint64) {
		if a != 0 {
			words = append(words, ival{a &^ (pageSize - 1), pageUp(a + n)})
		}
	}
	page(w.childTID, 4)
	page(w.rseq, w.rseqLen)
	if shared {
		page(w.parentTID, 4) // the parent's memory is th's
	}
	add := append([]ival(nil), words...)
	if w.stackHi != 0 {
		// The stack as clone gave it, within its executable region
		// (a JIT's code in the same mapping is not the stack).
		if r, ok := sp.regionExtent(w.stackHi - 1); ok {
			lo := w.stackLo
			if lo == 0 && w.stackHi > maxStackGuess {
				lo = w.stackHi - maxStackGuess
			}
			add = append(add, ival{max(r.s, lo&^(pageSize-1)), min(r.e, pageUp(w.stackHi))})
		}
	}

	if len(add) == 0 {
		return
	}
	ws := sp.wxs()
	// What W^X has executable-only in the new memory, before it joins
	// kw (kernelProt then says writable).
	var open []ival
	for _, r := range mergeIvals(add) {
		for _, p := range sp.pieces[sp.first(r.s):] {
			if p.Start >= r.e {
				break
			}
			if !isWX(p.Prot) {
				continue
			}
			for a := max(p.Start, r.s); a < min(p.End, r.e); a += pageSize {
				if sp.inKW(a) {
					continue
				}
				t.result.Stats.TCBPages++
				if !sp.isBatch(a) {
					open = append(open, ival{a, a + pageSize})
				}
			}
		}
	}
	ws.kw = mergeIvals(append(ws.kw, add...))
	ws.words = mergeIvals(append(ws.words, words...))
	for _, r := range mergeIvals(open) {
		if err := t.protect(th, r.s, r.e, sp.kernelProt(r.s, sp.ProtOf(r.s)), "wx: a thread's stack or control block (the kernel writes it)"); err != nil {
			t.warnOp(err)
			return
		}
	}
}

// wxKWEntry (wxEntryProt): an mprotect making memory writable and
// executable that holds kernel-written memory, or the calling thread's
// stack pointer, is a thread stack made executable (glibc does it to
// every thread's when it loads a library that needs an executable stack;
// a program may do it to its own): the whole range becomes kernel-written
// memory and the call runs as asked (a thread whose stack or control
// block turned executable-only would die at its next signal or rseq
// update); wxTCBEffect gives each page W^X's protection at the exit.
func (t *Tracer) wxKWEntry(th *thread, op *pendingOp, rsp uint64) bool {
	sp := th.proc.space
	if sp == nil || (op.nr != unix.SYS_MPROTECT && op.nr != unix.SYS_PKEY_MPROTECT) {
		return false
	}
	lo, hi := op.rng.s, op.rng.e
	// PROT_GROWSDOWN: a stack, changed down to its start (glibc makes
	// the main thread's stack executable so, from __libc_stack_end);
	// wxTCBEffect takes the rest of it once the Space knows it.
	hit := rsp >= lo && rsp < hi || op.args[2]&unix.PROT_GROWSDOWN != 0
	for _, r := range sp.wx.kw {
		hit = hit || r.s < hi && r.e > lo
	}
	if hit {
		op.wx.kw = true
		for p := lo; p < hi; p += pageSize {
			if !sp.inKW(p) {
				t.result.Stats.TCBPages++
			}
		}
		ws := sp.wxs()
		ws.kw = mergeIvals(append(ws.kw, ival{lo, hi}))
	}
	return hit
}

// wxNeedsExit (exitNeeds): a call wxKWEntry let run as asked.
func (t *Tracer) wxNeedsExit(th *thread, op *pendingOp) bool { return op.wx.kw }

// wxTCBEffect (exitEffects): memory the call unmaps or maps anew holds
// no thread's stack or control block any more; after an mprotect
// wxKWEntry let run as asked, the range gets what W^X gives each page
// (kernelProt: executable-only outside kernel-written memory, writable
// inside it), in one injected mprotect per run.
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) wxTCBEffect(x *sysExit) {
	sp, a := x.sp, x.op.args
	switch x.op.nr {
	case unix.SYS_MMAP:
		sp.dropKW(x.out.s, x.out.e)
	case unix.SYS_MUNMAP, unix.SYS_MREMAP:
		sp.dropKW(x.op.rng.s, x.op.rng.e)
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		if !x.op.wx.kw {
			return
		}
		lo, hi := x.op.rng.s, x.op.rng.e
		if a[2]&unix.PROT_GROWSDOWN != 0 {
			if r, ok := sp.regionExtent(lo); ok && r.s < lo {
				for p := r.s; p < lo; p += pageSize {
					if !sp.inKW(p) {
						t.result.Stats.TCBPages++
					}
				}
				lo = r.s
				ws := sp.wxs()
				ws.kw = mergeIvals(append(ws.kw, ival{lo, hi}))
			}
		}
		type run struct {
			s, e uint64
			prot int
		}
		var runs []run
		for p := lo; p < hi; p += pageSize {
			view := sp.ProtOf(p)
			if !isWX(view) {
				continue // not W^X's (the call asked for it: it has it)
			}
			prot := sp.kernelProt(p, view)
			if n := len(runs); n > 0 && runs[n-1].e == p && runs[n-1].prot == prot {
				runs[n-1].e = p + pageSize
				continue
			}
			runs = append(runs, run{p, p + pageSize, prot})
		}
		for _, r := range runs {
			if err := t.protect(x.th, r.s, r.e, r.prot, "wx: the rest of an mprotect over a thread's stack or control block"); err != nil {
				t.warnOp(err)
				return
			}
		}
	}
}
