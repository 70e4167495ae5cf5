package tracker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/ptjit/ptjit/snapshot"
)

// Writes through /proc/PID/mem. A program can rewrite code, its own or a
// child's, by writing to an open /proc/PID/mem file: the kernel writes
// through the page protection, so neither W^X nor a protection change shows
// it. ptjit catches it in two steps:
//
//  1. The filter stops every open(at) for writing (and every openat2). At
//     the exit stop, if the new descriptor is a /proc/PID/mem of a traced
//     process, ptjit injects a second seccomp filter into the program (all
//     its threads, SECCOMP_FILTER_FLAG_TSYNC) that stops write, pwrite64,
//     writev, pwritev and pwritev2 on that descriptor number only.
//  2. At such a write's exit stop, the pages it wrote are read again and
//     recorded as new versions with cause "procmem".
//
// Filters cannot be removed: if the descriptor is closed and its number
// reused, writes to it still stop, are seen not to be a mem file, and go
// on (a cost, never a miss). Not caught: a mem descriptor duplicated to
// another number (dup, fcntl, SCM_RIGHTS), or one opened by a process ptjit
// does not trace.

// procmemNeedsExit (exitNeeds): an open that may give a /proc/PID/mem
// descriptor, a write through a watched one into a traced process, and a
// process_vm_writev into a traced process's code (the other writes
// another process's memory with no protection change). It fills in
// op.target and op.ranges.
func (t *Tracer) procmemNeedsExit(th *thread, op *pendingOp) bool {
	a := op.args
	switch {
	case op.nr == unix.SYS_OPEN:
		return openMayBeMem(th.tid, a[0])
	case op.nr == unix.SYS_OPENAT || op.nr == unix.SYS_OPENAT2:
		return openMayBeMem(th.tid, a[1])
	case isMemWrite(op.nr):
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
		op.mem.target = target
		op.mem.ranges = []ival{{off, off}} // the length is known at the exit
		return true
	case op.nr == unix.SYS_PROCESS_VM_WRITEV:
		target := t.procs[int(int32(a[0]))]
		if target == nil || target.space == nil || target.helper {
			t.warnf("pid %d: process_vm_writev into pid %d, which ptjit does not trace", th.proc.pid, int32(a[0]))
			return false
		}
		op.mem.target = target
		op.mem.ranges = readRemoteIovecs(th.tid, a[3], a[4])
		for _, r := range op.mem.ranges {
			if target.space.Overlaps(r.s, r.e) {
				return true
			}
		}
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

// procmemEffect (exitEffects): a new /proc/PID/mem descriptor of a traced
// process is watched; the pages a write through one, or a
// process_vm_writev, wrote into a traced process's code are recorded
// again.
//
// Precondition: on the locked tracer thread; x.th is in syscall-exit-stop.
func (t *Tracer) procmemEffect(x *sysExit) {
	p, ret, tp := x.p, x.ret, x.op.mem.target
	switch {
	case x.op.nr == unix.SYS_OPEN || x.op.nr == unix.SYS_OPENAT || x.op.nr == unix.SYS_OPENAT2:
		if target := t.procs[memFileTarget(p.pid, ret)]; target != nil {
			if err := t.watchMemFD(x.th, ret); err != nil {
				t.warnf("pid %d: cannot watch writes to /proc/%d/mem (fd %d): %v", p.pid, target.pid, ret, err)
			}
		}
	case isMemWrite(x.op.nr):
		if tp == nil || tp.space == nil || ret == 0 {
			return
		}
		s, e := x.op.mem.ranges[0].s&^(pageSize-1), pageUp(x.op.mem.ranges[0].s+ret)
		if tp.space.Overlaps(s, e) {
			tp.space.Refresh(s, e, false, x.st.because("procmem"))
		}
	case x.op.nr == unix.SYS_PROCESS_VM_WRITEV:
		if tp == nil || tp.space == nil {
			return
		}
		t.warnf("pid %d: process_vm_writev of %d bytes into the code of pid %d", p.pid, int64(ret), tp.pid)
		for _, r := range x.op.mem.ranges {
			if tp.space.Overlaps(r.s, r.e) {
				tp.space.Refresh(r.s, r.e, false, x.change())
			}
		}
	}
}

// memFileTarget returns the pid whose memory fd of tid's process is open
// on, or 0.
func memFileTarget(pid int, fd uint64) int {
	link, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/" + strconv.FormatUint(fd, 10))
	if err != nil {
		return 0
	}
	rest, ok := strings.CutPrefix(link, "/proc/")
	if !ok {
		return 0
	}
	num, ok := strings.CutSuffix(rest, "/mem")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return 0
	}
	return n
}

// openMayBeMem reports whether an open of path may give a /proc/PID/mem
// descriptor (the exit stop checks what it really is).
func openMayBeMem(tid int, pathAddr uint64) bool {
	var buf [256]byte
	n := readString(tid, pathAddr, buf[:])
	return bytes.HasSuffix(buf[:n], []byte("mem"))
}

// readString reads a NUL-terminated string (up to len(buf) bytes) from the
// tracee, page by page.
func readString(tid int, addr uint64, buf []byte) int {
	n := 0
	for n < len(buf) {
		chunk := min(len(buf)-n, int(4096-(addr+uint64(n))&4095))
		if err := snapshot.ReadMem(tid, addr+uint64(n), buf[n:n+chunk]); err != nil {
			return n
		}
		if i := bytes.IndexByte(buf[n:n+chunk], 0); i >= 0 {
			return n + i
		}
		n += chunk
	}
	return n
}

// isMemWrite reports whether nr is a write-family syscall the mem filter
// stops.
func isMemWrite(nr int) bool {
	switch nr {
	case unix.SYS_WRITE, unix.SYS_PWRITE64, unix.SYS_WRITEV, unix.SYS_PWRITEV, unix.SYS_PWRITEV2:
		return true
	}
	return false
}

// memWriteOffset returns the file offset (= address) a write-family call
// on a mem descriptor writes at; it is called at the entry stop.
func memWriteOffset(pid int, nr int, a [6]uint64) (uint64, bool) {
	switch nr {
	case unix.SYS_PWRITE64, unix.SYS_PWRITEV:
		return a[3], true
	case unix.SYS_PWRITEV2:
		if int64(a[3]) != -1 {
			return a[3], true
		}
	}
	// write, writev, pwritev2 at offset -1: the descriptor's position.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/fdinfo/" + strconv.FormatUint(a[0], 10))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "pos:"); ok {
			pos, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return pos, err == nil
		}
	}
	return 0, false
}

// MemFilterRules is the filter injected for one mem descriptor.
func MemFilterRules(fd uint64) []Rule {
	on := []Cond{{Arg: 0, Equal: []uint32{uint32(fd)}}}
	why := "a write to /proc/PID/mem changes code without a protection change"
	return []Rule{
		{"write", unix.SYS_WRITE, on, why},
		{"pwrite64", unix.SYS_PWRITE64, on, why},
		{"writev", unix.SYS_WRITEV, on, why},
		{"pwritev", unix.SYS_PWRITEV, on, why},
		{"pwritev2", unix.SYS_PWRITEV2, on, why},
	}
}

// watchMemFD injects, into th's process, a seccomp filter that stops
// writes to descriptor fd. th is at a syscall-exit stop.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) watchMemFD(th *thread, fd uint64) error {
	return t.injectFilter(th, MemFilterRules(fd))
}

// injectFilter installs rules as a seccomp filter in th's process, all its
// threads (SECCOMP_FILTER_FLAG_TSYNC). th is at a syscall-exit stop or a
// signal-delivery-stop. A thread whose filters differ from th's makes
// TSYNC fail: the error names it.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) injectFilter(th *thread, rules []Rule) error {
	if t.att.on {
		// a filter cannot be removed: the process must be left as found
		return errors.New("no seccomp filter is added to an attached process")
	}
	if th.proc.ownFilter {
		return errOwnFilter
	}
	prog, err := Compile(rules)
	if err != nil {
		return err
	}
	// struct sock_fprog {u16 len; u8 pad[6]; sock_filter *filter} and the
	// filter right after it, below the red zone of th's stack.
	regs, err := getRegs(th.tid)
	if err != nil {
		return err
	}
	size := 16 + 8*len(prog)
	at := (regs.Rsp - 128 - uint64(size)) &^ 15
	buf := make([]byte, 16, size)
	binary.LittleEndian.PutUint16(buf[0:], uint16(len(prog)))
	binary.LittleEndian.PutUint64(buf[8:], at+16)
	buf = append(buf, FilterBytes(prog)...)
	if err := t.memWrite(th, at, buf); err != nil {
		return err
	}
	const seccompSetModeFilter, seccompFilterFlagTsync = 1, 1
	ret, err := t.inject(th, unix.SYS_SECCOMP, seccompSetModeFilter, seccompFilterFlagTsync, at)
	if err == nil && ret > 0 {
		return fmt.Errorf("seccomp(SECCOMP_FILTER_FLAG_TSYNC): thread %d has other filters", ret)
	}
	if err == nil {
		th.proc.full.filters++
	}
	return err
}
