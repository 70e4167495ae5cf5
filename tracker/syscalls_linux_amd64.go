package tracker

import (
	"errors"
	"fmt"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Handling of the syscalls the seccomp filter stops. At the seccomp stop
// (syscall entry) the tracker decides from the arguments and its address
// map whether the call can change tracked memory; only then does it ask
// for the syscall-exit stop (PTRACE_SYSCALL), where it applies the effect
// of a successful call. Everything else continues with PTRACE_CONT.

const pageSize = 4096

func pageUp(n uint64) uint64 { return (n + pageSize - 1) &^ (pageSize - 1) }

// Madvise values whose effect on executable pages the tracker records.
const (
	madvDontneed       = 4
	madvFree           = 8
	madvRemove         = 9
	madvDontneedLocked = 24
	mremapFixed        = 2
	protGrowsdown      = 0x01000000
	protGrowsup        = 0x02000000
)

// Each feature decides its part of a syscall in its own file; the three
// lists below say in which order, and why each entry has its place. They
// are the one description of that order (doc.go and the features'
// comments point here rather than repeat it); TestEffectOrder pins them by
// name, so an entry moved or added fails it until its place is declared
// there too.

// exitNeed is one feature's answer, at the seccomp stop, to whether the
// call needs its syscall-exit stop. The first that says yes wins, and the
// ones after it do not run.
type exitNeed struct {
	name string
	fn   func(*Tracer, *thread, *pendingOp) bool
	why  string // what it claims, and why it has its place
}

// entryRewrite is one feature's change, at the seccomp stop, of the
// protection the kernel gets for the program's mmap, mprotect or
// pkey_mprotect. Each is given what the previous one left; the last that
// changed it names the reason recorded with the change (rewriteEffect).
type entryRewrite struct {
	name string
	fn   func(*Tracer, *thread, *pendingOp, uint64) (uint64, string)
	why  string
}

// exitEffect is one feature's part of the effect of a successful call, at
// its syscall-exit stop. All of them run, in order.
type exitEffect struct {
	name string
	fn   func(*Tracer, *sysExit)
	why  string
}

var exitNeeds = []exitNeed{
	{"namesSeeOpen", (*Tracer).namesSeeOpen,
		"first: it never asks for the exit stop, it only notes the open of a perf map or jitdump; placed after a feature that said yes it would miss that open"},
	{"coreNeedsExit", (*Tracer).coreNeedsExit,
		"the call can change the Space's executable memory. A call one of the features claims is none of the others', so among core, alias, procmem and W^X the order only decides which check runs first"},
	{"aliasNeedsExit", (*Tracer).aliasNeedsExit,
		"with W^X on, a MAP_SHARED mmap, and an mprotect, munmap, mremap or MAP_FIXED mmap over a tracked shared mapping, change the alias table"},
	{"procmemNeedsExit", (*Tracer).procmemNeedsExit,
		"opens that may give a /proc/PID/mem descriptor, writes through a watched one, process_vm_writev into a traced process's code; it fills in op.target and op.ranges, so it must run for those calls: no feature before it claims them"},
	{"wxNeedsExit", (*Tracer).wxNeedsExit,
		"a call W^X let run as asked over kernel-written memory (op.kw). op.kw is set by wxEntryProt, which runs after this list, and such a call is an mprotect adding PROT_EXEC, which coreNeedsExit claims first: this entry states W^X's own need, it decides nothing today"},
}

var entryRewrites = []entryRewrite{
	{"wxEntryProt", (*Tracer).wxEntryProt,
		"W^X takes PROT_WRITE away from writable-and-executable memory (or PROT_EXEC from a fresh mapping, whose pages start as batch pages)"},
	{"aliasEntryProt", (*Tracer).aliasEntryProt,
		"writable aliases: an alias ptjit keeps read-only stays so in the kernel (PROT_WRITE away)"},
	{"filterEntryProt", (*Tracer).filterEntryProt,
		"last: the soft filter takes PROT_EXEC away from new code in a closed space, from whatever W^X and aliases left"},
}

// A failed call runs none of exitEffects; an mprotect or munmap failing
// with ENOMEM, which may have changed the mappings before the hole, has
// them re-read (exitFailed).
var exitEffects = []exitEffect{
	{"seenEffect", (*Tracer).seenEffect,
		"first: an mremap that moved or grew memory in ranges where every mprotect stops (fullprotect_linux_amd64.go) makes them stop where the memory is now, before anything else acts there"},
	{"rewriteEffect", (*Tracer).rewriteEffect,
		"the protection ptjit gave the kernel at the entry (W^X, the soft filter) is recorded, stamped at this stop like every version the call makes; where it took PROT_WRITE away, the kernel's copies into the range stop from now on (kwrite_linux_amd64.go)"},
	{"wxClearEffect", (*Tracer).wxClearEffect,
		"W^X forgets its batch pages in the range the call sets (the program's protection replaces ptjit's; an mprotect that makes alias twins executable settles their files first: aliasSettleExec) and notes those an mremap moves; before coreEffect, because a re-read of /proc/PID/maps there (a PROT_GROWSDOWN mprotect) must not take them for batch pages"},
	{"pagesEffect", (*Tracer).pagesEffect,
		"--copy forgets the tracked ranges an munmap, mremap or mmap changed (pages_linux_amd64.go), before coreEffect records the call's versions there"},
	{"unmapFirstEffect", (*Tracer).unmapFirstEffect,
		"another thread's munmap still in flight over the range this call mapped has happened (the kernel gave the addresses out again): the Space takes it before coreEffect takes this call"},
	{"coreEffect", (*Tracer).coreEffect,
		"the Space takes the call's effect (versions, regions, file mappings); the effects after it read the Space it leaves"},
	{"wxFreshEffect", (*Tracer).wxFreshEffect,
		"after coreEffect, which mapped the fresh memory: its pages become W^X batch pages with no first store; before filterEffect, which skips batch pages"},
	{"procmemEffect", (*Tracer).procmemEffect,
		"a write through /proc/PID/mem or process_vm_writev re-records the pages it wrote; a new mem descriptor is watched. These calls are no other feature's, so the place is free; it is next to the core, whose kind of effect it is"},
	{"aliasEffect", (*Tracer).aliasEffect,
		"the shared-mapping table follows the call and the writable aliases are write-protected again (injected mprotects of the mapping the call left), after coreEffect"},
	{"wxMovedEffect", (*Tracer).wxMovedEffect,
		"batch pages an mremap moved (noted by wxClearEffect) become executable-only at their new place; kernelProt reads the Space after the move"},
	{"wxTCBEffect", (*Tracer).wxTCBEffect,
		"after an mprotect over memory the kernel writes for a thread (its stack, its control block), which ran as asked, the rest of the range gets W^X's protection; memory unmapped or mapped anew is forgotten; after coreEffect, whose protections it reads"},
	{"filterEffect", (*Tracer).filterEffect,
		"last: the soft filter brings the kernel's protections in line with the Space every other effect left; it skips W^X batch pages, so they must be settled before"},
}

// seccompEntry handles a seccomp stop.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) seccompEntry(th *thread) {
	regs, err := getRegs(th.tid)
	if err != nil {
		t.resume(th.tid, 0)
		return
	}
	op := &pendingOp{
		nr:   int(regs.Orig_rax),
		args: [6]uint64{regs.Rdi, regs.Rsi, regs.Rdx, regs.R10, regs.R8, regs.R9},
		ip:   regs.Rip - 2, // after the 2-byte syscall instruction
		rsp:  regs.Rsp,
	}
	op.rng = ival{op.args[0], op.args[0] + pageUp(op.args[1])}
	if op.nr == unix.SYS_MREMAP && op.args[3]&mremapFixed != 0 {
		op.to = ival{op.args[4], op.args[4] + pageUp(op.args[2])}
	}
	t.eventsMark(th, &regs)
	if t.opts.OnSeccomp != nil {
		t.opts.OnSeccomp(StopInfo{PID: th.proc.pid, TID: th.tid, Nr: op.nr, Args: op.args, IP: op.ip})
	}
	if op.nr == unix.SYS_PTRACE {
		t.ptraceEntry(th, op)
		t.resume(th.tid, 0)
		return
	}
	if t.ownFilterEntry(th, regs, op) {
		return // a seccomp filter of the program's: resumed
	}
	if t.kernelWriteEntry(th, regs, op) {
		return // a kernel copy into memory W^X manages: resumed
	}
	if th.proc.helper || th.proc.space == nil || !t.needExit(th, op) {
		t.resume(th.tid, 0)
		return
	}
	if t.restartForPages(th, regs, op) {
		return // the call stops again, with the userfaultfd made
	}
	if t.restartForMremap(th, regs, op) {
		return // the call stops again, its range one protection
	}
	th.op = op
	kprot := op.args[2]
	for _, rewrite := range entryRewrites {
		if k, reason := rewrite.fn(t, th, op, kprot); k != kprot {
			kprot, op.rewrite.reason = k, reason
		}
	}
	if kprot != op.args[2] && t.restartForFullProtect(th, regs, op) {
		// ptjit manages memory here from now on: the call was restarted
		// with a filter that stops every mprotect there in place, and
		// stops again
		th.op = nil
		return
	}
	if kprot != op.args[2] {
		// the kernel gets kprot, the Space keeps the program's view
		regs.Rdx = kprot
		op.rewrite.kprot = kprot
		if err := unix.PtraceSetRegs(th.tid, &regs); err == nil {
			op.rewrite.done = true
		}
	} else if t.oneStopProtect(th, op) {
		th.op = nil
		return
	}
	if err := unix.PtraceSyscall(th.tid, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		t.warnf("PTRACE_SYSCALL %d: %v", th.tid, err)
	}
}

// programTrace handles a seccomp stop that a filter the program installed
// itself asked for (SECCOMP_RET_TRACE with data other than TraceData; see
// classifySeccomp). Alone the program has no tracer, and the kernel then
// fails the call with ENOSYS without executing it; so does ptjit: the
// syscall number becomes -1, which makes the kernel skip the call, and the
// return value -ENOSYS. Nothing ran, so nothing is recorded — also when
// ptjit's filter traces the same call (the program's newer filter's data
// wins, see TraceData).
//
// Precondition: on the locked tracer thread; th is in a seccomp stop.
func (t *Tracer) programTrace(th *thread) {
	regs, err := getRegs(th.tid)
	if err == nil {
		regs.Orig_rax = ^uint64(0)
		enosys := -int64(unix.ENOSYS)
		regs.Rax = uint64(enosys)
		err = unix.PtraceSetRegs(th.tid, &regs)
	}
	if err != nil && !errors.Is(err, unix.ESRCH) {
		t.warnf("tid %d: failing a syscall the program's seccomp filter traces: %v", th.tid, err)
	}
	t.resume(th.tid, 0)
}

// ptraceRequests names the requests the filter stops ptrace on.
var ptraceRequests = map[uint64]string{
	unix.PTRACE_TRACEME: "PTRACE_TRACEME", unix.PTRACE_ATTACH: "PTRACE_ATTACH", unix.PTRACE_SEIZE: "PTRACE_SEIZE",
}

// ptraceWarning returns the warning for a ptrace call of the program, or
// "" when the call does not collide with ptjit: PTRACE_TRACEME always does
// (the caller is ptjit's tracee), PTRACE_ATTACH/SEIZE when the target is a
// thread ptjit traces (traced). Either fails with EPERM, as the kernel
// makes it: a thread has one tracer. Attaching to a process ptjit does not
// trace is the program's business and may work.
func ptraceWarning(pid int, req, target uint64, traced func(int) bool) string {
	name, ok := ptraceRequests[req]
	if !ok {
		return ""
	}
	call := name
	if req != unix.PTRACE_TRACEME {
		if !traced(int(int32(target))) {
			return ""
		}
		call = fmt.Sprintf("%s, %d", name, int32(target))
	}
	return fmt.Sprintf("pid %d: ptrace(%s) fails with EPERM: the program is already traced by ptjit and a process "+
		"has only one tracer, so debuggers and tracers (gdb, strace) cannot run under ptjit (reported once)", pid, call)
}

// ptraceEntry handles the seccomp stop of a ptrace call: the first call
// that collides with ptjit gets one warning per run (a debugger retries,
// strace probes with several children). The call itself runs unchanged.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) ptraceEntry(th *thread, op *pendingOp) {
	if t.root.ptraceWarned {
		return
	}
	traced := func(tid int) bool {
		_, known := t.threads[tid]
		_, held := t.pending[tid]
		_, born := t.newborn[tid]
		return known || held || born
	}
	if w := ptraceWarning(th.proc.pid, op.args[0], op.args[1], traced); w != "" {
		t.root.ptraceWarned = true
		t.warnf("%s", w)
	}
}

// oneStopProtect applies an mprotect at its seccomp stop, without a
// syscall-exit stop, when its outcome is certain and nothing can race with
// it: the program is one thread (so no other thread can write the pages
// between this stop and the call, or run in between), the range lies in
// memory ptjit knows is mapped (a live region), the protection has only
// R/W/X bits and ptjit rewrites nothing. The thread resumes first; the
// versions are then read while it runs — the bytes cannot change: the
// thread is in the mprotect, and after it the pages are executable and not
// writable until its next mprotect, which stops and waits for this stop's
// work. The stamp is taken before the resume. A JIT toggling its code area
// RW↔RX (LuaJIT) costs one stop per call instead of two. Where no filter
// stops every mprotect of the range (fullprotect_linux_amd64.go) the next
// mprotect does not stop, so there the version is read before
// the thread resumes: one stop per version, the copy on the
// program's time, as the floor supervisor (testdata/floor) does it.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) oneStopProtect(th *thread, op *pendingOp) bool {
	a := op.args
	start, end := op.rng.s, op.rng.e
	sp := th.proc.space
	// one thread, and none born but not yet seen (a new thread stays
	// stopped until its first stop is handled)
	alone := len(t.threads) == 1 && len(t.newborn) == 0 && len(t.pending) == 0
	if op.nr != unix.SYS_MPROTECT || t.soft != nil || !alone || start&(pageSize-1) != 0 || end <= start ||
		a[2]&^uint64(unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC) != 0 || isWX(int(a[2])) ||
		sp.aliasTouches(start, end) || !sp.Mapped(start, end) {
		return false
	}
	c := stampAt(th, op.ip, clock.Now()).because(syscallName(op.nr))
	if !th.proc.full.seen(start, end) {
		// Without a filter that stops every mprotect there, the thread's
		// next mprotect (RW) would not stop and wait for this read: it
		// could write the pages while they are read. So the version is
		// read first, while the thread is still stopped before the call
		// (the bytes are final: the program asks for exec after
		// writing them), and the thread resumes after.
		sp.Protect(start, end, int(a[2]), c)
		t.resumeCont(th.tid, 0)
		return true
	}
	t.resumeCont(th.tid, 0)
	sp.clearBatch(start, end) // the program's protection replaces W^X batch pages
	sp.Protect(start, end, int(a[2]), c)
	return true
}

// needExit reports whether the syscall can change tracked memory (one of
// exitNeeds says so).
func (t *Tracer) needExit(th *thread, op *pendingOp) bool {
	for _, need := range exitNeeds {
		if need.fn(t, th, op) {
			return true
		}
	}
	return false
}

// coreNeedsExit: the call can change the address space's tracked
// executable memory. A MAP_FIXED mmap without PROT_EXEC over memory
// nothing tracks changes none (ld.so maps each library's data so), unless
// another thread's call in flight may be mapping code there: its exit
// stop, not handled yet, would record code this call then replaced.
func (t *Tracer) coreNeedsExit(th *thread, op *pendingOp) bool {
	sp := th.proc.space
	if op.nr == unix.SYS_BRK {
		return brkNeedsExit(sp, op)
	}
	if coreNeeds(sp, op) {
		return true
	}
	if op.nr != unix.SYS_MMAP || op.args[3]&unix.MAP_FIXED == 0 {
		return false
	}
	busy := false
	t.spaceThreads(sp, func(u *thread) { busy = busy || u != th && u.op != nil })
	return busy
}

// brkNeedsExit: a brk changes tracked memory only where it shrinks the
// heap over it: it unmaps [new break, old break), page-rounded. (The heap
// it grows is not executable but under the READ_IMPLIES_EXEC personality,
// which ptjit does not see: doc.go.) Every brk stops at its entry and the
// break moves by brk alone, so sp.brkMax, raised to each call's argument
// here and to the break each exit stop returns, is at least the old
// break: the call needs its exit only where [argument, brkMax) touches
// tracked memory, or where brkMax is not known yet (the first brk after
// an exec or an attach). Erlang calls brk 80 times a run; each exit was a
// stop and a read of /proc/PID/maps (300 µs).
func brkNeedsExit(sp *space, op *pendingOp) bool {
	old := sp.brkMax
	if op.args[0] == 0 {
		return old == 0 // asks for the break and changes nothing (learnt at the exit)
	}
	want := pageUp(op.args[0])
	sp.brkMax = max(sp.brkMax, want)
	return old == 0 || sp.Touches(want, old)
}

// coreNeeds: op can change sp's tracked executable memory.
func coreNeeds(sp *space, op *pendingOp) bool {
	a := op.args
	switch op.nr {
	case unix.SYS_MMAP:
		// the filter let only PROT_EXEC, MAP_FIXED and MAP_SHARED through;
		// a plain shared mapping matters only to W^X (aliasNeedsExit), a
		// MAP_FIXED one only where it replaces what is tracked
		return a[2]&unix.PROT_EXEC != 0 || a[3]&unix.MAP_FIXED != 0 && sp.Touches(op.rng.s, op.rng.e)
	case unix.SYS_SHMAT:
		return true // the filter let only SHM_EXEC/SHM_REMAP through
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		return a[2]&unix.PROT_EXEC != 0 || sp.Touches(op.rng.s, op.rng.e) || a[2]&(protGrowsdown|protGrowsup) != 0
	case unix.SYS_MUNMAP, unix.SYS_REMAP_FILE_PAGES:
		return sp.Touches(op.rng.s, op.rng.e)
	case unix.SYS_MREMAP:
		return sp.Touches(op.rng.s, op.rng.e) || a[3]&mremapFixed != 0 && sp.Touches(op.to.s, op.to.e)
	case unix.SYS_MADVISE:
		switch a[2] {
		case madvDontneed, madvFree, madvRemove, madvDontneedLocked:
			return sp.Overlaps(op.rng.s, op.rng.e)
		}
		return false // DONTFORK/WIPEONFORK and the like: the fork copy is read from /proc
	case unix.SYS_BRK:
		return sp.AnonOutside(sp.vdso[0], sp.vdso[1])
	case unix.SYS_SHMDT:
		return sp.Touches(a[0], a[0]+1)
	}
	return false
}

// sysExit is the syscall-exit stop whose effects are being applied.
type sysExit struct {
	th    *thread
	op    *pendingOp
	ret   uint64   // the call's result
	p     *process // th's process
	sp    *space   // its space at this stop
	cause string   // the syscall's name
	st    Stamp    // this stop: every record the call makes is stamped with it
	// out: the range a successful mmap or mremap returned
	// ([ret, ret+pageUp(length)), the new length for an mremap)
	out   ival
	moved []uint64 // W^X: batch pages mremap moved (wxClearEffect to wxMovedEffect)
	// data: the bytes of the call's range from its BPF event (nil: read
	// from the program; events_linux_amd64.go)
	data *image
	// late: the call is applied after it returned, from its event, not at
	// its exit stop (applyCall): the program may have written its memory
	late bool
}

// change is the Change of the call at this stop.
func (x *sysExit) change() Change {
	c := x.st.because(x.cause)
	c.data = x.data
	return c
}

// syscallExit applies the effect of a syscall whose exit we asked for and
// resumes th.
//
// Precondition: on the locked tracer thread; th is in syscall-exit-stop.
func (t *Tracer) syscallExit(th *thread) {
	if th.kw.exit {
		t.kernelWriteSettle(th) // a kernel copy into code ended (kwrite_linux_amd64.go)
	}
	op := th.op
	th.op = nil
	if op != nil && th.proc.space != nil {
		t.applyExit(th, op)
	}
	if t.threads[th.tid] != nil {
		t.resume(th.tid, 0)
	}
}

// applyExit reads the result and runs exitEffects (or exitFailed).
//
// Precondition: on the locked tracer thread; th is in syscall-exit-stop.
func (t *Tracer) applyExit(th *thread, op *pendingOp) {
	regs, err := getRegs(th.tid)
	if err != nil {
		return
	}
	ret := regs.Rax
	if op.rewrite.done {
		// the program sees its own argument register again
		regs.Rdx = op.args[2]
		unix.PtraceSetRegs(th.tid, &regs)
	}
	x := &sysExit{th: th, op: op, ret: ret, p: th.proc, sp: th.proc.space, cause: syscallName(op.nr),
		st: stampAt(th, op.ip, clock.Now())}
	switch op.nr {
	case unix.SYS_MMAP:
		x.out = ival{ret, ret + pageUp(op.args[1])}
	case unix.SYS_MREMAP:
		x.out = ival{ret, ret + pageUp(op.args[2])}
	}
	if int64(ret) < 0 && int64(ret) >= -4095 {
		t.exitFailed(x, unix.Errno(-int64(ret)))
		return
	}
	for _, effect := range exitEffects {
		effect.fn(t, x)
	}
	t.noteLater(x)
}

// mappedRange is the range a successful mmap, mprotect or mremap made
// mapped (ok false for other calls).
func mappedRange(x *sysExit) (r ival, ok bool) {
	switch x.op.nr {
	case unix.SYS_MMAP:
		return x.out, true
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		return x.op.rng, true
	case unix.SYS_MREMAP:
		return x.out, true
	}
	return ival{}, false
}

// unmapFirstEffect: a call that made [lo, hi) mapped exited while another
// thread's munmap of an overlapping range is in flight (its exit stop not
// handled yet). The kernel gave these addresses out only after that
// munmap freed them, and an munmap removes its whole range under the
// mmap lock held for writing: all of it has happened, before this call.
// Left to the munmap's exit, the Space would take this call's mapping as
// one over the old region's pages and keep the rest of the old range as a
// split version of its own, a version the program never had (jit-threads:
// one thread's mmap and mprotect at addresses another thread's munmap
// freed, about one run in 50). So the munmap's range, less what calls
// since mapped there (op.later), is unmapped now, stamped at this stop and
// recorded as the munmap's thread's; its exit then leaves the Space alone
// (op.unmapped).
//
// Precondition: on the locked tracer thread; x.th is in its
// syscall-exit-stop.
func (t *Tracer) unmapFirstEffect(x *sysExit) {
	r, ok := mappedRange(x)
	if !ok {
		return
	}
	t.spaceThreads(x.sp, func(u *thread) {
		if u == x.th || u.op == nil || u.op.nr != unix.SYS_MUNMAP || u.op.munmap.unmapped {
			return
		}
		s, e := u.op.rng.s, u.op.rng.e
		if !(r.s < e && s < r.e) {
			return
		}
		u.op.munmap.unmapped = true
		st := x.st
		st.TID = u.tid // the munmap's, read through this stop's thread
		for _, m := range minus(s, e, u.op.munmap.later) {
			x.sp.Unmap(m.s, m.e, st.because("munmap"))
		}
	})
}

// noteLater: a call that made [lo, hi) mapped (mmap, mprotect, mremap)
// exited while another thread's munmap of an overlapping range is in
// flight. The exit stops of two threads come in any order, but the kernel
// could give out these addresses only after the munmap freed them: that
// munmap's exit must leave them alone (its op.later), or the Space would
// lose the new code and its faults would go to the program (as
// testdata/jit-storm under --soft-filter=jit showed).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) noteLater(x *sysExit) {
	r, ok := mappedRange(x)
	if !ok {
		return
	}
	t.spaceThreads(x.sp, func(u *thread) {
		if u != x.th && u.op != nil && u.op.nr == unix.SYS_MUNMAP {
			if s, e := u.op.rng.s, u.op.rng.e; r.s < e && s < r.e {
				u.op.munmap.later = append(u.op.munmap.later, ival{max(r.s, s), min(r.e, e)})
			}
		}
	})
}

// minus returns [s, e) without the ranges in cut.
func minus(s, e uint64, cut []ival) []ival {
	out := []ival{{s, e}}
	for _, c := range cut {
		var next []ival
		for _, r := range out {
			if c.e <= r.s || c.s >= r.e {
				next = append(next, r)
				continue
			}
			if r.s < c.s {
				next = append(next, ival{r.s, c.s})
			}
			if c.e < r.e {
				next = append(next, ival{c.e, r.e})
			}
		}
		out = next
	}
	return out
}

// exitFailed: mprotect/munmap that fail with ENOMEM may have changed the
// mappings before the hole; re-read them.
func (t *Tracer) exitFailed(x *sysExit, errno unix.Errno) {
	switch x.op.nr {
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT, unix.SYS_MUNMAP:
		if errno == unix.ENOMEM {
			t.syncAfter(x)
		}
	}
}

// rewriteEffect records the protection the kernel got instead of the
// program's (seccompEntry rewrote the prot argument).
func (t *Tracer) rewriteEffect(x *sysExit) {
	op := x.op
	if !op.rewrite.done {
		return
	}
	r := op.rng
	if op.nr == unix.SYS_MMAP {
		r = x.out
	}
	t.rec.ProtChange(db.ProtChange{PID: x.sp.owner, At: x.st.At, Addr: r.s, Size: r.e - r.s,
		Prot: int(op.rewrite.kprot), Reason: op.rewrite.reason})
	if op.args[2]&unix.PROT_WRITE != 0 && op.rewrite.kprot&unix.PROT_WRITE == 0 {
		// the kernel's copies into it stop from now on
		// (kwrite_linux_amd64.go); before this stop no other thread
		// knew an mmap's address
		t.ensureKernelWritesSeen(x.th, r.s, r.e)
	}
}

// coreEffect: the Space takes the effect of the call on the address space.
func (t *Tracer) coreEffect(x *sysExit) {
	sp, a, ret, c := x.sp, x.op.args, x.ret, x.change()
	switch x.op.nr {
	case unix.SYS_MMAP:
		start, end := x.out.s, x.out.e
		prot := int(a[2]) & protRWX
		var file *FileInfo
		if prot&unix.PROT_EXEC != 0 && a[3]&unix.MAP_ANONYMOUS == 0 {
			// nil for a memfd, a deleted file or a device: bytes are copied
			file = t.fileAt(x.p, start, a[5])
		}
		if freshAnon(x) {
			c.zero = x.out
		}
		sp.Map(start, end, prot, file, c)
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		if a[2]&(protGrowsdown|protGrowsup) != 0 {
			t.syncAfter(x)
			return
		}
		sp.Protect(x.op.rng.s, x.op.rng.e, int(a[2])&protRWX, c)
	case unix.SYS_MUNMAP:
		if x.op.munmap.unmapped {
			return // unmapFirstEffect did, at an earlier stop
		}
		for _, r := range minus(x.op.rng.s, x.op.rng.e, x.op.munmap.later) {
			sp.Unmap(r.s, r.e, c)
		}
	case unix.SYS_MREMAP:
		sp.Remap(a[0], pageUp(a[1]), pageUp(a[2]), a[3], ret, c)
	case unix.SYS_MADVISE:
		sp.Refresh(x.op.rng.s, x.op.rng.e, a[2] != madvRemove, c)
	case unix.SYS_BRK:
		if !x.late {
			x.sp.brkMax = max(x.sp.brkMax, pageUp(ret)) // brk returns the break (brkNeedsExit)
		}
		t.syncAfter(x)
	case unix.SYS_SHMDT, unix.SYS_REMAP_FILE_PAGES:
		t.syncAfter(x)
	case unix.SYS_SHMAT:
		maps, err := snapshot.ReadMaps(x.p.pid)
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.Start == ret {
				sp.Map(m.Start, m.End, m.Prot, nil, c)
				break
			}
		}
	}
}

// freshAnon reports whether x, a successful mmap, made anonymous memory
// that holds zeros at this stop: every anonymous mapping starts so, and
// no other thread can have written one whose address the kernel chose
// (only this thread has it, in its result register). A MAP_FIXED one
// counts only in an address space with no other thread.
func freshAnon(x *sysExit) bool {
	if x.late || x.op.args[3]&unix.MAP_ANONYMOUS == 0 {
		return false
	}
	return x.op.args[3]&(unix.MAP_FIXED|unix.MAP_FIXED_NOREPLACE) == 0 || x.sp.refs == 1 && len(x.p.threads) == 1
}

// fileAt returns the file behind a fresh executable mapping at addr when
// the decoder can read its bytes from the file, else nil.
func (t *Tracer) fileAt(p *process, addr, offset uint64) *FileInfo {
	m, ok := mapAt(p.pid, addr)
	if !ok || !fileReadable(m) {
		return nil
	}
	return &FileInfo{Path: m.Path, Dev: m.Dev, Inode: m.Inode, Offset: offset}
}

// mapAt is the mapping of pid that covers addr: asked of the kernel for
// that one mapping (snapshot.QueryMap), or found in /proc/PID/maps where
// the kernel cannot answer that.
func mapAt(pid int, addr uint64) (snapshot.Mapping, bool) {
	m, err := snapshot.QueryMap(pid, addr)
	if err == nil {
		return m, true
	}
	if !errors.Is(err, snapshot.ErrNoQuery) {
		return snapshot.Mapping{}, false
	}
	maps, err := snapshot.ReadMaps(pid)
	if err != nil {
		return snapshot.Mapping{}, false
	}
	for _, m := range maps {
		if m.Start <= addr && addr < m.End {
			return m, true
		}
	}
	return snapshot.Mapping{}, false
}

func syscallName(nr int) string {
	if r, ok := RuleByNr(nr); ok {
		return r.Name
	}
	return "syscall"
}
