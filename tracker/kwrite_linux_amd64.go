package tracker

import (
	"encoding/binary"
	"slices"

	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Kernel writes into code. W^X keeps the code of RWX memory executable
// and not writable in the kernel (and a writable alias of code read-only),
// so that every store of the program faults and is seen. The kernel's own
// copies into that memory do not fault to the program: read(2) into a JIT
// buffer after code ran there failed with EFAULT, where alone it works.
//
// The calls that copy data into a buffer the program names — read,
// pread64, recvfrom, getrandom, readlink, readlinkat, getcwd, and through
// iovecs readv, preadv, preadv2, recvmsg, recvmmsg, process_vm_readv —
// stop (KernelWriteRules) where their buffer may lie in memory ptjit
// manages: a direct buffer when it overlaps a managed range (the range
// filters of fullprotect_linux_amd64.go carry these rules, and a process
// with the filter that stops every mprotect gets a kernel-write filter per
// managed range, up to maxRangeFilters), an iovec call always once a
// process has managed memory (the filter cannot read the iovecs). At the
// stop (kernelWriteEntry) ptjit reads the destination ranges; where they
// hold pages W^X write-protects, the call is skipped, those pages become
// batch pages (writable, not executable; an alias page opens as for a
// burst of stores, its executable twins not executable), and the call is
// restarted: it runs as alone, and each page is recorded as a new version
// when code next runs there (cause wx-batch, with the thread and the IP of
// the call), in every --wx mode (a copy by the kernel is no store an
// instruction made: there is nothing to emulate or step). A call whose
// buffer holds no such page costs the stop only.
//
// What was considered: userfaultfd write-protection in synchronous mode
// would make the kernel's copy wait instead of failing, but only in a
// writable VMA: W^X's pages are made not writable so that a store faults
// to ptrace with its instruction (precise mode logs it, batch mode needs
// the page's next fetch to fault too), and a userfaultfd made inside the
// program for the mm (as changed-page tracking does) reports kernel faults
// only without UFFD_USER_MODE_ONLY, which an unprivileged program cannot
// ask for. Catching the EFAULT at the call's exit and running it again
// would repeat side effects (a datagram consumed, a pipe's bytes gone).
//
// Not covered: other kernel writes into code W^X protects — the structs of
// stat(2) and its kind, wait4's status, a signal frame or a futex word
// placed in code (threads' stacks and control blocks are kept writable:
// wx_tcb_linux_amd64.go), io_uring's completions; and, in a process with
// more than maxRangeFilters managed ranges under the filter that stops
// every mprotect, the ranges after those.

// kernelWriteCall is a call the kernel copies data through into memory
// the program names: the argument holding the buffer's address (and the
// next its length), or an iovec array and its count, or a msghdr.
type kernelWriteCall struct {
	name string
	nr   int
	arg  int  // the buffer, the iovec array, the msghdr or mmsghdr array
	kind byte // 'b' buffer and length at arg+1, 'v' iovecs (count at arg+1), 'm' msghdr, 'M' mmsghdr array (count at arg+1)
}

var kernelWriteCalls = []kernelWriteCall{
	{"read", unix.SYS_READ, 1, 'b'},
	{"pread64", unix.SYS_PREAD64, 1, 'b'},
	{"recvfrom", unix.SYS_RECVFROM, 1, 'b'},
	{"getrandom", unix.SYS_GETRANDOM, 0, 'b'},
	{"readlink", unix.SYS_READLINK, 1, 'b'},
	{"readlinkat", unix.SYS_READLINKAT, 2, 'b'},
	{"getcwd", unix.SYS_GETCWD, 0, 'b'},
	{"readv", unix.SYS_READV, 1, 'v'},
	{"preadv", unix.SYS_PREADV, 1, 'v'},
	{"preadv2", unix.SYS_PREADV2, 1, 'v'},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV, 1, 'v'},
	{"recvmsg", unix.SYS_RECVMSG, 1, 'm'},
	{"recvmmsg", unix.SYS_RECVMMSG, 1, 'M'},
}

// KernelWriteRules stops the calls of kernelWriteCalls whose buffer
// overlaps one of ranges, and every iovec or msghdr one (see above).
func KernelWriteRules(ranges []AddrRange) []Rule {
	var rules []Rule
	for _, c := range kernelWriteCalls {
		if c.kind == 'b' {
			rules = append(rules, Rule{c.name, c.nr, []Cond{{Arg: c.arg, Overlaps: ranges}},
				"the kernel copies into the buffer: memory ptjit write-protects there (kwrite_linux_amd64.go)"})
			continue
		}
		rules = append(rules, Rule{c.name, c.nr, nil,
			"the kernel copies into the buffers of an array the filter cannot read: where ptjit manages memory, every call"})
	}
	return rules
}

func kernelWriteCallOf(nr int) (kernelWriteCall, bool) {
	for _, c := range kernelWriteCalls {
		if c.nr == nr {
			return c, true
		}
	}
	return kernelWriteCall{}, false
}

// maxKernelWriteIovecs bounds the iovecs and messages read at a stop
// (UIO_MAXIOV is 1024).
const maxKernelWriteIovecs = 1024

// kernelWriteDests returns the pages the call op may copy into (page
// ranges, unsorted), read through tid.
func kernelWriteDests(tid int, c kernelWriteCall, op *pendingOp) []ival {
	a := op.args
	span := func(base, n uint64) []ival {
		if n == 0 || base+n < base {
			return nil
		}
		return []ival{{base &^ (pageSize - 1), pageUp(base + n)}}
	}
	switch c.kind {
	case 'b':
		return span(a[c.arg], a[c.arg+1])
	case 'v':
		return readRemoteIovecs(tid, a[c.arg], min(a[c.arg+1], maxKernelWriteIovecs))
	case 'm':
		return msghdrDests(tid, a[c.arg])
	case 'M':
		var out []ival
		for i := uint64(0); i < min(a[c.arg+1], maxKernelWriteIovecs); i++ {
			// struct mmsghdr: a msghdr (56 bytes) and the length the
			// kernel writes, padded to 64
			at := a[c.arg] + 64*i
			out = append(out, msghdrDests(tid, at)...)
			out = append(out, span(at+56, 4)...)
		}
		return out
	}
	return nil
}

// msghdrDests returns the pages a recvmsg may write for the struct msghdr
// at addr: its name, its iovecs, its control data, and its own fields.
func msghdrDests(tid int, addr uint64) []ival {
	var b [56]byte // must match struct msghdr
	if snapshot.ReadMem(tid, addr, b[:]) != nil {
		return nil
	}
	le := binary.LittleEndian
	var out []ival
	add := func(base, n uint64) {
		if n != 0 && base+n > base {
			out = append(out, ival{base &^ (pageSize - 1), pageUp(base + n)})
		}
	}
	add(le.Uint64(b[0:]), uint64(le.Uint32(b[8:]))) // msg_name, msg_namelen
	add(le.Uint64(b[32:]), le.Uint64(b[40:]))       // msg_control, msg_controllen
	add(addr, 56)                                   // msg_namelen, msg_controllen, msg_flags
	out = append(out, readRemoteIovecs(tid, le.Uint64(b[16:]), min(le.Uint64(b[24:]), maxKernelWriteIovecs))...)
	return out
}

// kernelWriteEntry handles the seccomp stop of a call of kernelWriteCalls
// (op, with th's registers regs): where its destination holds pages W^X
// write-protects, the call is restarted around kernelWriteOpen; else it
// runs. It reports false when op is no such call.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) kernelWriteEntry(th *thread, regs unix.PtraceRegs, op *pendingOp) bool {
	c, ok := kernelWriteCallOf(op.nr)
	if !ok {
		return false
	}
	sp := th.proc.space
	if th.proc.helper || sp == nil || !t.wxOn() {
		t.resume(th.tid, 0)
		return true
	}
	var pages []uint64
	for _, d := range mergeIvals(kernelWriteDests(th.tid, c, op)) {
		for p := d.s; p < d.e; p += pageSize {
			if sp.kernelWriteBlocked(p) {
				pages = append(pages, p)
			}
			if len(pages) > maxKernelWritePages {
				break
			}
		}
	}
	if len(pages) == 0 {
		t.resume(th.tid, 0)
		return true
	}
	return t.restartAround(th, regs, op, func(th *thread) { t.kernelWriteOpen(th, pages, op.ip) })
}

// maxKernelWritePages bounds the pages one call opens (a read of a
// gigabyte into code opens the first 64 MiB of it; the rest fails as
// before).
const maxKernelWritePages = 16384

// kernelWriteBlocked reports whether the kernel cannot write page because
// of W^X: RWX memory kept executable-only, or a write-protected alias
// page not open for a batch.
func (sp *space) kernelWriteBlocked(page uint64) bool {
	if sp.wxBlocksWrite(page) {
		return true
	}
	if _, ok := sp.aliasAt(page); ok {
		_, open := sp.alias.open[page]
		return !open
	}
	return false
}

// kernelWriteOpen makes pages writable for a kernel copy as batch pages
// (see above): RWX memory's pages writable and not executable, an alias's
// pages writable with their executable twins not executable. tid and ip
// (the call's) are the versions' thread and IP.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) kernelWriteOpen(th *thread, pages []uint64, ip uint64) {
	sp := th.proc.space
	w := sp.wxs()
	slices.Sort(pages)
	pages = slices.Compact(pages)
	var code []uint64
	for _, p := range pages {
		if sp.wxBlocksWrite(p) {
			code = append(code, p)
			continue
		}
		if al, ok := sp.aliasAt(p); ok {
			if _, open := sp.alias.open[p]; !open {
				t.aliasOpen(th, al, p, p+pageSize, batchPage{tid: th.tid, ip: ip, alias: true})
			}
		}
	}
	rw := func(uint64) int { return unix.PROT_READ | unix.PROT_WRITE }
	for _, run := range protRuns(code, rw) {
		if err := t.protect(th, run.s, run.e, run.prot, "wx-batch: writable for a kernel copy"); err != nil {
			t.warnOp(err)
			continue
		}
		for p := run.s; p < run.e; p += pageSize {
			w.batch.set(p, batchPage{tid: th.tid, ip: ip})
		}
		t.result.Stats.KernelWrites += int((run.e - run.s) / pageSize)
	}
}
