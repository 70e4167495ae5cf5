package tracker

import (
	"slices"

	"golang.org/x/sys/unix"
)

// Kernel writes into code. W^X keeps the code of RWX memory executable
// and not writable in the kernel (and a writable alias of code read-only),
// so that every store of the program faults and is seen. The kernel's own
// copies into that memory do not fault to the program: read(2) into a JIT
// buffer after code ran there failed with EFAULT, where alone it works.
//
// The calls that copy data into one buffer the program names — read,
// pread64, recvfrom (recv), getrandom, readlink, readlinkat, getcwd —
// stop (KernelWriteRules) where the buffer overlaps memory ptjit manages:
// the range filters of fullprotect_linux_amd64.go come with a
// kernel-write filter, and a process with the filter that stops every
// mprotect gets one per managed range, up to maxRangeFilters. At the stop
// (kernelWriteEntry) ptjit looks at the destination; where it holds pages
// W^X write-protects, the call is skipped, those pages become batch pages
// (writable, not executable; an alias page opens as for a burst of stores,
// its executable twins not executable), and the call is restarted: it runs
// as alone, and each page is recorded as a new version when code next runs
// there (cause wx-batch, with the thread and the IP of the call), in every
// --wx mode (a copy by the kernel is no store an instruction made: there
// is nothing to emulate or step). A call whose buffer holds no such page
// costs the stop only.
//
// The calls that copy through an array of buffers (readv, preadv,
// preadv2, recvmsg, recvmmsg, process_vm_readv) are left out: the filter
// cannot read the array, so each would stop in every process with managed
// memory (java, node: their code is RWX). Measured (2026-11-26, load 2):
// 20,000 one-byte readv calls from a pipe took 0.02–0.03 s alone, 0.05–0.10
// s under ptjit without the rule and 0.52–0.83 s with it. Such a call into
// code W^X protects fails with EFAULT, as before.
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

// kernelWriteCall is a call the kernel copies data through into one
// buffer the program names: the argument holding its address (and the
// next its length).
type kernelWriteCall struct {
	name string
	nr   int
	arg  int
}

var kernelWriteCalls = []kernelWriteCall{
	{"read", unix.SYS_READ, 1},
	{"pread64", unix.SYS_PREAD64, 1},
	{"recvfrom", unix.SYS_RECVFROM, 1},
	{"getrandom", unix.SYS_GETRANDOM, 0},
	{"readlink", unix.SYS_READLINK, 1},
	{"readlinkat", unix.SYS_READLINKAT, 2},
	{"getcwd", unix.SYS_GETCWD, 0},
}

// KernelWriteRules stops the calls of kernelWriteCalls whose buffer
// overlaps one of ranges (see above).
func KernelWriteRules(ranges []AddrRange) []Rule {
	var rules []Rule
	for _, c := range kernelWriteCalls {
		rules = append(rules, Rule{c.name, c.nr, []Cond{{Arg: c.arg, Overlaps: ranges}},
			"the kernel copies into the buffer: memory ptjit write-protects there (kwrite_linux_amd64.go)"})
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

// kernelWriteDest returns the pages the call op may copy into.
func kernelWriteDest(c kernelWriteCall, op *pendingOp) (ival, bool) {
	base, n := op.args[c.arg], op.args[c.arg+1]
	if n == 0 || base+n < base {
		return ival{}, false
	}
	return ival{base &^ (pageSize - 1), pageUp(base + n)}, true
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
	if d, ok := kernelWriteDest(c, op); ok {
		for p := d.s; p < d.e && len(pages) < maxKernelWritePages; p += pageSize {
			if sp.kernelWriteBlocked(p) {
				pages = append(pages, p)
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
// gigabyte into code opens the first 64 MiB of it: the call copies less
// than asked or fails as before).
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
