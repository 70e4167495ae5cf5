package tracker

import (
	"bytes"
	"encoding/binary"
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
	prog, err := Compile(MemFilterRules(fd))
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
	buf := make([]byte, size)
	binary.LittleEndian.PutUint16(buf[0:], uint16(len(prog)))
	binary.LittleEndian.PutUint64(buf[8:], at+16)
	for i, in := range prog {
		o := 16 + 8*i
		binary.LittleEndian.PutUint16(buf[o:], in.Code)
		buf[o+2], buf[o+3] = in.Jt, in.Jf
		binary.LittleEndian.PutUint32(buf[o+4:], in.K)
	}
	if err := t.memWrite(th, at, buf); err != nil {
		return err
	}
	const seccompSetModeFilter, seccompFilterFlagTsync = 1, 1
	_, err = t.inject(th, unix.SYS_SECCOMP, seccompSetModeFilter, seccompFilterFlagTsync, at)
	return err
}
