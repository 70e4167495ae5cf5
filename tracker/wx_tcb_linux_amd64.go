package tracker

import (
	"encoding/binary"
	"slices"

	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Thread control blocks in W^X memory. The kernel itself writes some of a
// thread's memory: the thread id at clone (CLONE_PARENT_SETTID,
// CLONE_CHILD_SETTID), 0 there at the thread's exit (CLONE_CHILD_CLEARTID,
// then the futex wake pthread_join waits for), and the thread's rseq area
// each time the thread returns to user mode after it was descheduled (a
// ptrace stop is one). Where W^X keeps such a word's page executable-only
// the kernel's write fails, and silently: the thread id stays 0, so
// pthread_join returns before the thread ran, and the first rseq update
// kills the thread with SIGSEGV. glibc keeps a thread's struct pthread
// (the tid word and the rseq area) at the top of its stack, so every
// thread whose stack is RWX memory (pthread_attr_setstack on such memory,
// or any thread of a program with an executable stack, whose thread
// stacks glibc maps RWX) has its control block there.
//
// So at a clone that shares the address space, the pages of those words
// that W^X keeps from being written become batch pages marked tcb
// (writable, not executable) before the new thread runs, and a tid the
// kernel failed to write is written by ptjit. A tcb page is recorded at
// its first execution like any batch page (the thread and IP that run it,
// as for fresh memory: its stores were not watched), but is then made
// writable and executable, as the program has it, not executable-only: the
// kernel's next write must succeed. Changes to code in such a page after
// its first execution are not seen (README, "What ptjit cannot see").

// cloneWords are the addresses the kernel writes for a new thread, from
// the clone or clone3 call that made it (0: none).
type cloneWords struct {
	parentTID uint64 // CLONE_PARENT_SETTID: written at the clone
	childTID  uint64 // CLONE_CHILD_SETTID and CLONE_CHILD_CLEARTID
	childSet  bool   // CLONE_CHILD_SETTID: written as the child starts
	rseq      uint64 // the child's rseq area, where the parent's is at the same offset from its TLS
	rseqLen   uint64
}

// cloneArgs reads the words of the clone or clone3 th is in (at its
// PTRACE_EVENT_CLONE stop), with the clone's flags.
//
// Precondition: on the locked tracer thread; th is in its clone event stop.
func cloneArgs(th *thread, regs unix.PtraceRegs) (flags uint64, w cloneWords) {
	var tls uint64
	switch regs.Orig_rax {
	case unix.SYS_CLONE:
		// clone(flags, stack, parent_tid, child_tid, tls)
		flags, w.parentTID, w.childTID, tls = regs.Rdi, regs.Rdx, regs.R10, regs.R8
	case unix.SYS_CLONE3:
		// struct clone_args: flags, pidfd, child_tid, parent_tid,
		// exit_signal, stack, stack_size, tls
		var b [64]byte
		if snapshot.ReadMem(th.tid, regs.Rdi, b[:]) != nil {
			return uint64(unix.SIGCHLD), cloneWords{}
		}
		le := binary.LittleEndian
		flags, w.childTID, w.parentTID, tls = le.Uint64(b[0:]), le.Uint64(b[16:]), le.Uint64(b[24:]), le.Uint64(b[56:])
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
	if flags&unix.CLONE_SETTLS != 0 && flags&unix.CLONE_VM != 0 {
		// The new thread registers its own rseq area (CLONE_VM clears
		// the registration), where the C library puts every thread's:
		// at the parent's offset from the thread pointer.
		if c, err := getRseq(th.tid); err == nil && c.Pointer != 0 && regs.Fs_base != 0 {
			w.rseq, w.rseqLen = tls+(c.Pointer-regs.Fs_base), uint64(max(c.Size, 32))
		}
	}
	return flags, w
}

// wxBlocksWrite reports whether W^X keeps the kernel from writing addr of
// sp: memory the program has writable and executable that ptjit has
// executable-only (not a batch page).
func (sp *space) wxBlocksWrite(addr uint64) bool {
	p, ok := sp.PieceAt(addr)
	if !ok || !isWX(p.Prot) {
		return false
	}
	page := addr &^ (pageSize - 1)
	_, batch := sp.wx.batch[page]
	return !batch && !sp.wx.tcb[page]
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
// pages of the words the kernel writes for th that W^X manages (memory
// the program has writable and executable) become tcb pages (see above):
// batch pages marked tcb, made writable where W^X had them
// executable-only; a CLONE_CHILD_SETTID tid the kernel could not write is
// written.
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
	var pages []uint64
	add := func(lo, n uint64) {
		for p := lo &^ (pageSize - 1); lo != 0 && p < lo+n; p += pageSize {
			if v := sp.ProtOf(p); isWX(v) && !slices.Contains(pages, p) {
				pages = append(pages, p)
			}
		}
	}
	add(w.childTID, 4)
	add(w.rseq, w.rseqLen)
	if shared {
		add(w.parentTID, 4) // the parent's memory is th's
	}
	ws := sp.wxs()
	for _, p := range pages {
		opened, known := ws.tcb[p]
		if !known {
			ws.tcb[p] = false
			t.result.Stats.TCBPages++
		}
		if bp, batch := ws.batch[p]; batch {
			bp.tcb = true // writable already: left so when executed
			ws.batch[p] = bp
			continue
		}
		if opened {
			continue // executed: writable and executable already
		}
		if err := t.protect(th, p, p+pageSize, sp.ProtOf(p)&^unix.PROT_EXEC, "wx: a thread's control block (the kernel writes it)"); err != nil {
			t.warnOp(err)
			return
		}
		ws.batch[p] = batchPage{tcb: true}
	}
}

// wxTCBEffect (exitEffects, after wxMovedEffect): memory the call unmaps
// or maps anew holds no control block any more; a tcb page the program
// protects again as writable and executable is one again (wxClearEffect
// forgot its batch state, and the entry rewrite made it executable-only):
// writable again, executable too once it was executed.
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) wxTCBEffect(x *sysExit) {
	sp, a := x.sp, x.op.args
	if len(sp.wx.tcb) == 0 {
		return
	}
	var lo, hi uint64
	switch x.op.nr {
	case unix.SYS_MMAP:
		lo, hi = x.ret, x.ret+pageUp(a[1])
	case unix.SYS_MUNMAP, unix.SYS_MREMAP, unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		lo, hi = a[0], a[0]+pageUp(a[1])
	default:
		return
	}
	w := sp.wxs()
	for p, opened := range w.tcb {
		if p < lo || p >= hi {
			continue
		}
		if x.op.nr != unix.SYS_MPROTECT && x.op.nr != unix.SYS_PKEY_MPROTECT {
			delete(w.tcb, p)
			continue
		}
		view := sp.ProtOf(p)
		if !isWX(view) {
			continue // the program's own protection: W^X leaves it
		}
		prot := view
		if !opened {
			prot &^= unix.PROT_EXEC
		}
		if err := t.protect(x.th, p, p+pageSize, prot, "wx: a thread's control block (the kernel writes it)"); err != nil {
			t.warnOp(err)
			continue
		}
		if !opened {
			w.batch[p] = batchPage{tcb: true}
		}
	}
}
