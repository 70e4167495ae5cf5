package tracker

import (
	"encoding/binary"
	"errors"

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
	}
	if t.opts.OnSeccomp != nil {
		t.opts.OnSeccomp(StopInfo{PID: th.proc.pid, TID: th.tid, Nr: op.nr, Args: op.args, IP: op.ip})
	}
	if th.proc.helper || th.proc.space == nil || !t.needExit(th, op) {
		t.resume(th.tid, 0)
		return
	}
	th.op = op
	rwAlias := (op.nr == unix.SYS_MPROTECT || op.nr == unix.SYS_PKEY_MPROTECT) && op.args[2]&unix.PROT_WRITE != 0 &&
		th.proc.space.aliasRO(op.args[0], op.args[0]+pageUp(op.args[1]))
	kprot := op.args[2]
	if t.wxOn() && (op.nr == unix.SYS_MMAP || op.nr == unix.SYS_MPROTECT || op.nr == unix.SYS_PKEY_MPROTECT) && (isWX(int(op.args[2])) || rwAlias) {
		// W^X: the program asked for writable and executable memory; the
		// kernel gets executable-only, the Space keeps the program's view.
		kprot &^= unix.PROT_WRITE
		op.reason = "wx: the program asked for write+exec"
	}
	if k := th.proc.space.filterEntryProt(op, kprot); k != kprot {
		kprot = k
		op.reason = "soft-filter: new code hidden until entered"
	}
	if kprot != op.args[2] {
		// the kernel gets kprot, the Space keeps the program's view
		regs.Rdx = kprot
		op.kprot = kprot
		if err := unix.PtraceSetRegs(th.tid, &regs); err == nil {
			op.rewrote = true
		}
	} else if t.oneStopProtect(th, op) {
		th.op = nil
		return
	}
	if err := unix.PtraceSyscall(th.tid, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		t.warnf("PTRACE_SYSCALL %d: %v", th.tid, err)
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
// RW↔RX (LuaJIT) costs one stop per call instead of two.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) oneStopProtect(th *thread, op *pendingOp) bool {
	a := op.args
	start, end := a[0], a[0]+pageUp(a[1])
	sp := th.proc.space
	// one thread, and none born but not yet seen (a new thread stays
	// stopped until its first stop is handled)
	alone := len(t.threads) == 1 && len(t.newborn) == 0 && len(t.pending) == 0
	if op.nr != unix.SYS_MPROTECT || t.soft != nil || !alone || start&(pageSize-1) != 0 || end <= start ||
		a[2]&^uint64(unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC) != 0 || isWX(int(a[2])) ||
		sp.aliasTouches(start, end) || !sp.Mapped(start, end) {
		return false
	}
	t.cur.th, t.cur.ip, t.cur.at = th, op.ip, snapshot.Now()
	t.resumeCont(th.tid, 0)
	sp.clearBatch(start, end) // the program's protection replaces W^X batch pages
	sp.Protect(start, end, int(a[2]), syscallName(op.nr))
	return true
}

// needExit reports whether the syscall can change tracked memory.
func (t *Tracer) needExit(th *thread, op *pendingOp) bool {
	sp := th.proc.space
	a := op.args
	switch op.nr {
	case unix.SYS_MMAP:
		// the filter let only PROT_EXEC, MAP_FIXED and MAP_SHARED through;
		// a plain shared mapping matters only to W^X (writable aliases)
		return a[2]&unix.PROT_EXEC != 0 || a[3]&unix.MAP_FIXED != 0 || t.wxOn()
	case unix.SYS_SHMAT:
		return true // the filter let only SHM_EXEC/SHM_REMAP through
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		return a[2]&unix.PROT_EXEC != 0 || sp.Touches(a[0], a[0]+pageUp(a[1])) || a[2]&(protGrowsdown|protGrowsup) != 0 ||
			sp.aliasTouches(a[0], a[0]+pageUp(a[1]))
	case unix.SYS_MUNMAP:
		return sp.Touches(a[0], a[0]+pageUp(a[1])) || sp.aliasTouches(a[0], a[0]+pageUp(a[1]))
	case unix.SYS_MREMAP:
		return sp.Touches(a[0], a[0]+pageUp(a[1])) || a[3]&mremapFixed != 0 && sp.Touches(a[4], a[4]+pageUp(a[2])) ||
			sp.aliasTouches(a[0], a[0]+pageUp(a[1])) || a[3]&mremapFixed != 0 && sp.aliasTouches(a[4], a[4]+pageUp(a[2]))
	case unix.SYS_MADVISE:
		switch a[2] {
		case madvDontneed, madvFree, madvRemove, madvDontneedLocked:
			return sp.Overlaps(a[0], a[0]+pageUp(a[1]))
		}
		return false // DONTFORK/WIPEONFORK and the like: the fork copy is read from /proc
	case unix.SYS_BRK:
		return sp.AnonOutside(sp.vdso[0], sp.vdso[1])
	case unix.SYS_SHMDT:
		return sp.Touches(a[0], a[0]+1)
	case unix.SYS_REMAP_FILE_PAGES:
		return sp.Touches(a[0], a[0]+pageUp(a[1]))
	case unix.SYS_OPEN:
		return openMayBeMem(th.tid, a[0])
	case unix.SYS_OPENAT, unix.SYS_OPENAT2:
		return openMayBeMem(th.tid, a[1])
	case unix.SYS_WRITE, unix.SYS_PWRITE64, unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2:
		// Only writes to a descriptor a mem filter watches stop here.
		target := t.procs[memFileTarget(th.proc.pid, a[0])]
		if target == nil || target.space == nil || target.helper {
			return false
		}
		off, ok := memWriteOffset(th.proc.pid, op.nr, a)
		if !ok {
			t.warnf("pid %d: write to /proc/%d/mem at an unknown offset", th.proc.pid, target.pid)
			return false
		}
		op.target = target
		op.ranges = []ival{{off, off}} // the length is known at the exit
		return true
	case unix.SYS_PROCESS_VM_WRITEV:
		target := t.procs[int(int32(a[0]))]
		if target == nil || target.space == nil || target.helper {
			t.warnf("pid %d: process_vm_writev into pid %d, which ptjit does not trace", th.proc.pid, int32(a[0]))
			return false
		}
		op.target = target
		op.ranges = readRemoteIovecs(th.tid, a[3], a[4])
		for _, r := range op.ranges {
			if target.space.Overlaps(r.s, r.e) {
				return true
			}
		}
		return false
	}
	return false
}

// readRemoteIovecs reads the remote iovec array of a process_vm_writev
// (struct iovec: base, len; 16 bytes each) and returns page ranges.
func readRemoteIovecs(tid int, addr, n uint64) []ival {
	if n == 0 || n > 1024 {
		return nil
	}
	b := make([]byte, 16*n)
	if snapshot.ReadMem(tid, addr, b) != nil {
		return nil
	}
	var out []ival
	for i := uint64(0); i < n; i++ {
		base := binary.LittleEndian.Uint64(b[16*i:])
		l := binary.LittleEndian.Uint64(b[16*i+8:])
		if l == 0 {
			continue
		}
		out = append(out, ival{base &^ (pageSize - 1), pageUp(base + l)})
	}
	return out
}

// syscallExit applies the effect of a syscall whose exit we asked for.
//
// Precondition: on the locked tracer thread; th is in syscall-exit-stop.
func (t *Tracer) syscallExit(th *thread) {
	op := th.op
	th.op = nil
	defer func() {
		if t.threads[th.tid] != nil {
			t.resumeThread(th, 0)
		}
	}()
	if op == nil || th.proc.space == nil {
		return
	}
	regs, err := getRegs(th.tid)
	if err != nil {
		return
	}
	ret := regs.Rax
	failed := int64(ret) < 0 && int64(ret) >= -4095
	if op.rewrote {
		// the program sees its own argument register again
		regs.Rdx = op.args[2]
		unix.PtraceSetRegs(th.tid, &regs)
	}
	t.cur.th, t.cur.ip, t.cur.at = th, op.ip, snapshot.Now()
	p := th.proc
	sp := p.space
	a := op.args
	cause := syscallName(op.nr)
	if failed {
		// mprotect/munmap that fail with ENOMEM may have changed the
		// mappings before the hole; re-read them.
		if errno := unix.Errno(-int64(ret)); errno == unix.ENOMEM &&
			(op.nr == unix.SYS_MPROTECT || op.nr == unix.SYS_PKEY_MPROTECT || op.nr == unix.SYS_MUNMAP) {
			t.syncSpace(p, cause)
		}
		return
	}
	if sp.filterOn() {
		lo, hi := uint64(0), ^uint64(0)
		switch op.nr {
		case unix.SYS_MMAP:
			lo, hi = ret, ret+pageUp(a[1])
		case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
			lo, hi = a[0], a[0]+pageUp(a[1])
		case unix.SYS_MREMAP:
			lo, hi = ret, ret+pageUp(a[2])
		case unix.SYS_MUNMAP, unix.SYS_MADVISE, unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2,
			unix.SYS_WRITE, unix.SYS_PWRITE64, unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2, unix.SYS_PROCESS_VM_WRITEV:
			hi = 0 // makes nothing executable
		}
		// after the Space took the syscall's effect (defers run last first)
		defer t.filterSyscallExit(th, lo, hi, op.rewrote && op.kprot&unix.PROT_EXEC == 0)
	}
	if op.rewrote {
		start := a[0]
		if op.nr == unix.SYS_MMAP {
			start = ret
		}
		t.rec.ProtChange(db.ProtChange{PID: sp.owner, At: t.cur.at, Addr: start, Size: pageUp(a[1]),
			Prot: int(op.kprot), Reason: op.reason})
	}
	switch op.nr {
	case unix.SYS_MMAP:
		sp.clearBatch(ret, ret+pageUp(a[1]))
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT, unix.SYS_MUNMAP:
		sp.clearBatch(a[0], a[0]+pageUp(a[1]))
	case unix.SYS_MREMAP:
		// batch pages (RW in the kernel) that moved must become
		// executable-only again at their new place
		var moved []uint64
		for p := range sp.wx.batch {
			if p >= a[0] && p < a[0]+min(pageUp(a[1]), pageUp(a[2])) {
				moved = append(moved, ret+(p-a[0]))
			}
		}
		sp.clearBatch(a[0], a[0]+pageUp(a[1]))
		defer func() {
			for _, p := range moved {
				if err := t.protect(th, p, p+pageSize, sp.kernelProt(p, sp.ProtOf(p)), "wx: batch page moved by mremap"); err != nil {
					t.warnf("%v", err)
				}
			}
		}()
	}
	switch op.nr {
	case unix.SYS_MMAP:
		start, end := ret, ret+pageUp(a[1])
		prot := int(a[2]) & (unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC)
		var file *FileInfo
		if prot&unix.PROT_EXEC != 0 && a[3]&unix.MAP_ANONYMOUS == 0 {
			// nil for a memfd, a deleted file or a device: bytes are copied
			file = t.fileAt(p, start, a[5])
		}
		sp.Map(start, end, prot, file, cause)
		if t.wxOn() {
			sp.aliasForget(start, end)
			if a[3]&unix.MAP_SHARED != 0 && a[3]&unix.MAP_ANONYMOUS == 0 {
				t.aliasMmap(th, start, end, prot)
			} else {
				t.aliasApply(th) // MAP_FIXED may have replaced a twin
			}
		}
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
		if a[2]&(protGrowsdown|protGrowsup) != 0 {
			t.syncSpace(p, cause)
			return
		}
		sp.Protect(a[0], a[0]+pageUp(a[1]), int(a[2])&(unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC), cause)
		if t.wxOn() {
			t.aliasProtect(th, a[0], a[0]+pageUp(a[1]), int(a[2])&(unix.PROT_READ|unix.PROT_WRITE|unix.PROT_EXEC), op.rewrote && op.kprot&unix.PROT_WRITE == 0)
		}
	case unix.SYS_MUNMAP:
		sp.Unmap(a[0], a[0]+pageUp(a[1]), cause)
		if sp.aliasTouches(a[0], a[0]+pageUp(a[1])) {
			sp.aliasForget(a[0], a[0]+pageUp(a[1]))
			t.aliasApply(th)
		}
	case unix.SYS_MREMAP:
		sp.Remap(a[0], pageUp(a[1]), pageUp(a[2]), a[3], ret, cause)
		if sp.aliasTouches(a[0], a[0]+pageUp(a[1])) || a[3]&mremapFixed != 0 && sp.aliasTouches(ret, ret+pageUp(a[2])) {
			t.aliasMove(th, a[0], pageUp(a[1]), pageUp(a[2]), ret)
		}
	case unix.SYS_MADVISE:
		sp.Refresh(a[0], a[0]+pageUp(a[1]), a[2] != madvRemove, cause)
	case unix.SYS_BRK, unix.SYS_SHMDT, unix.SYS_REMAP_FILE_PAGES:
		t.syncSpace(p, cause)
	case unix.SYS_SHMAT:
		maps, err := snapshot.ReadMaps(p.pid)
		if err != nil {
			return
		}
		for _, m := range maps {
			if m.Start == ret {
				sp.Map(m.Start, m.End, m.Prot, nil, cause)
				break
			}
		}
	case unix.SYS_OPEN, unix.SYS_OPENAT, unix.SYS_OPENAT2:
		if target := t.procs[memFileTarget(p.pid, ret)]; target != nil {
			if err := t.watchMemFD(th, ret); err != nil {
				t.warnf("pid %d: cannot watch writes to /proc/%d/mem (fd %d): %v", p.pid, target.pid, ret, err)
			}
		}
	case unix.SYS_WRITE, unix.SYS_PWRITE64, unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2:
		tp := op.target
		if tp == nil || tp.space == nil || ret == 0 {
			return
		}
		s, e := op.ranges[0].s&^(pageSize-1), pageUp(op.ranges[0].s+ret)
		if tp.space.Overlaps(s, e) {
			tp.space.Refresh(s, e, false, "procmem")
		}
	case unix.SYS_PROCESS_VM_WRITEV:
		tp := op.target
		if tp == nil || tp.space == nil {
			return
		}
		t.warnf("pid %d: process_vm_writev of %d bytes into the code of pid %d", p.pid, int64(ret), tp.pid)
		for _, r := range op.ranges {
			if tp.space.Overlaps(r.s, r.e) {
				tp.space.Refresh(r.s, r.e, false, cause)
			}
		}
	}
}

// fileAt returns the file behind a fresh executable mapping at addr when
// the decoder can read its bytes from the file, else nil.
func (t *Tracer) fileAt(p *process, addr, offset uint64) *FileInfo {
	maps, err := snapshot.ReadMaps(p.pid)
	if err != nil {
		return nil
	}
	for _, m := range maps {
		if m.Start <= addr && addr < m.End {
			if !fileReadable(m) {
				return nil
			}
			return &FileInfo{Path: m.Path, Dev: m.Dev, Inode: m.Inode, Offset: offset}
		}
	}
	return nil
}

func syscallName(nr int) string {
	if r, ok := RuleByNr(nr); ok {
		return r.Name
	}
	return "syscall"
}
