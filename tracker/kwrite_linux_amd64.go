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
// The calls that copy data into memory the program names — a buffer and
// its length (read, pread64, recvfrom (recv), getrandom, readlink,
// readlinkat, getcwd, getdents, the xattr reads and their kind), a
// struct or value of fixed size (the stat family, wait4's status and
// rusage, waitid's siginfo, pipe's and socketpair's descriptors,
// clock_gettime, uname, an old signal action, timers, limits, and the
// rest of kernelWriteCalls), an array of a count of elements (epoll_wait's
// events, poll's descriptors: the filter multiplies), or a socket address
// or option as long as a socklen_t says (accept, getsockname,
// getsockopt) — stop
// (KernelWriteRules) where a destination overlaps memory ptjit manages:
// the range filters of fullprotect_linux_amd64.go come with a
// kernel-write filter, and a process with the filter that stops every
// mprotect gets one per managed range, up to maxRangeFilters, the first
// two over the code's own mapping, the last over every address (kwRange,
// ensureKernelWritesSeen). At the stop
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
// The calls that copy through an array of buffers — readv, preadv,
// preadv2, recvmsg, recvmmsg (their iovecs, and a message's name and
// control buffers and its header, which the kernel writes back), and
// process_vm_readv (its local iovecs) — stop in every process with a
// kernel-write filter (KernelWriteVecRules, added with its first one): the
// filter cannot read the array, so the stop reads it (kernelWriteVecDests,
// at most UIO_MAXIOV entries, as the kernel) and goes on as above. The
// cost is a stop per such call in a process whose code W^X protects (java,
// node, Guile, Erlang: their code is RWX), where alone the call is cheap.
// Counted with strace -c (2026-11-26): Erlang makes 76 readv and 2
// recvmsg calls starting up; node hot.js, java Hot, Guile, LuaJIT and PHP
// made none. A program that reads through readv in a hot loop pays a stop
// per call: the bench's kwrite-vec row (20,000 one-byte readv calls from a
// pipe) measured 123 µs a call against a minimal tracer's 104 µs a stop in
// the same series (2026-11-26 23:40, load 1; 0.025 s alone, 2.5 s under
// ptjit), in exchange for calls that work as alone instead of failing
// with EFAULT or copying only their first buffers. A seccomp user
// notification instead of the stop costs the same here (BENCHMARKS.md,
// the floor rows: RET_USER_NOTIF 944 against RET_TRACE 951), and a BPF
// program cannot fail or delay the call on this kernel (no kprobes, so
// no bpf_override_return).
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
// The filter tests a destination's address against the managed range with
// the length argument where it follows the address, else with the most
// the kernel writes there (a sched_getaffinity mask, a socket address): a
// call close before the range stops too, and the stop reads the exact
// length. Its syscall numbers are found by a binary search
// (filter_linux_amd64.go, dispatchTree): the filter of each managed range
// costs every other call of the process a few comparisons.
//
// Not covered: other kernel writes into code W^X protects — arrays whose
// length the filter cannot compute from one argument (mincore's vector,
// a page count of a byte length; io_getevents', whose count comes after
// the array; msgrcv's message, 8 bytes longer than its length argument),
// ioctl's arguments (their size is the driver's), a signal frame on an
// alternate stack placed in code (threads' stacks and control blocks are
// kept writable: wx_tcb_linux_amd64.go), io_uring's completions and
// reads. A select's descriptor sets are tested with the most the kernel writes
// (2^20 descriptors: fs.nr_open's default); a larger limit's sets past
// that are not.
//
// A copy in flight: the pages a call was given are marked
// (wxState.flight) from the stop that opened them to the exit stop of the
// restarted call (threadKW, kernelWriteSettle). Another thread that runs
// code on such a page meanwhile faults as on any batch page and its
// version is recorded, but the page stays writable and executable, so
// the copy still succeeds (kernelProt keeps a page in flight writable
// whoever sets its protection: the soft filter hides and shows code
// around it too); at the call's exit the page becomes a batch page again,
// and the next fetch records what the copy wrote. Before, the
// fetch made the page executable-only and a copy not yet done failed with
// EFAULT where alone it succeeds (the new-user trial of 2026-11-27: 8–14
// of 2,000 readv calls into a page a second thread ran code in;
// TestKernelWritesRace). While the copy is in flight, a store by a third
// thread into that page is not seen (the page is writable and executable
// as the program has it); the version recorded at the fetch holds the
// bytes run then. A thread that dies in such a call leaves its pages
// writable and executable.

// kernelWriteCall is a call the kernel copies data into memory the
// program names through: its destinations, each an argument holding an
// address and the length there.
type kernelWriteCall struct {
	name  string
	nr    int
	dests []kwDest
}

// kwDest is one destination of a kernelWriteCall: the address in
// args[arg]; its length in args[lenArg] when lenArg >= 0, else size bytes
// (a struct of fixed size). lenPtr > 0: the length is the 32-bit value
// at args[lenPtr] (a socklen_t the program sets), at most size. mul > 0:
// args[lenArg] is a count of elements of mul bytes each (its low 32 bits,
// as the kernel reads an int). The filter tests the length argument where
// it follows the address (Cond.Overlaps, Cond.Mul), else size, the most
// the kernel writes there.
type kwDest struct {
	arg, lenArg, lenPtr int
	size                uint64
	mul                 uint32
	// bits: args[lenArg] is a count of bits, rounded up to 64-bit words
	// (select's descriptor sets)
	bits bool
	// prctl: the other PR_GET_* write prctlGet bytes, PR_GET_AUXV
	// min(args[2], prctlAuxv) (size, what the filter tests); futex2: only
	// for the futex operations that take a second word (futexOps2)
	prctl, futex2 bool
}

// prctlAuxv is the most PR_GET_AUXV writes: AT_VECTOR_SIZE (52) words;
// prctlGet the most the other PR_GET_* write (PR_GET_NAME's 16 bytes).
const (
	prctlAuxv = 52 * 8
	prctlGet  = 16
)

// futexOps2 are the futex operations whose args[4] is a second futex word:
// FUTEX_REQUEUE, FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, FUTEX_WAIT_REQUEUE_PI,
// FUTEX_CMP_REQUEUE_PI.
var futexOps2 = map[uint64]bool{3: true, 4: true, 5: true, 11: true, 12: true}

func buf(arg, lenArg int) kwDest        { return kwDest{arg: arg, lenArg: lenArg} }
func fixed(arg int, size uint64) kwDest { return kwDest{arg: arg, lenArg: -1, size: size} }

// sockaddr is a socket address the kernel writes at args[arg], as long as
// the socklen_t at args[lenPtr] says (at most sockaddr_storage), and
// that socklen_t.
func sockaddr(arg, lenPtr int) []kwDest {
	return []kwDest{{arg: arg, lenArg: -1, lenPtr: lenPtr, size: 128}, fixed(lenPtr, 4)}
}

// fdsets are select's three descriptor sets, args[1..3], of args[0] bits.
func fdsets() []kwDest {
	var d []kwDest
	for arg := 1; arg <= 3; arg++ {
		d = append(d, kwDest{arg: arg, lenArg: 0, bits: true, size: 1 << 20 / 8})
	}
	return d
}

// Sizes of the structs the kernel writes, on x86-64.
const (
	sizeStat     = 144 // struct stat
	sizeStatx    = 256 // struct statx
	sizeStatfs   = 120 // struct statfs
	sizeRusage   = 144 // struct rusage
	sizeSiginfo  = 128 // siginfo_t
	sizeTimespec = 16
	sizeItimer   = 32  // struct itimerval, struct itimerspec
	sizeTimex    = 208 // struct timex
	sizeUtsname  = 390 // struct new_utsname
	sizeSysinfo  = 112 // struct sysinfo
	sizeSigact   = 32  // the kernel's struct sigaction
	sizeStack    = 24  // stack_t
	sizeRlimit   = 16
	sizeCapData  = 24 // two struct __user_cap_data_struct (capability version 3)
	sizeSockopt  = 4096
)

var kernelWriteCalls = []kernelWriteCall{
	// into a buffer with its length
	{"read", unix.SYS_READ, []kwDest{buf(1, 2)}},
	{"pread64", unix.SYS_PREAD64, []kwDest{buf(1, 2)}},
	{"recvfrom", unix.SYS_RECVFROM, append([]kwDest{buf(1, 2)}, sockaddr(4, 5)...)},
	{"getrandom", unix.SYS_GETRANDOM, []kwDest{buf(0, 1)}},
	{"readlink", unix.SYS_READLINK, []kwDest{buf(1, 2)}},
	{"readlinkat", unix.SYS_READLINKAT, []kwDest{buf(2, 3)}},
	{"getcwd", unix.SYS_GETCWD, []kwDest{buf(0, 1)}},
	{"getdents", unix.SYS_GETDENTS, []kwDest{buf(1, 2)}},
	{"getdents64", unix.SYS_GETDENTS64, []kwDest{buf(1, 2)}},
	{"getxattr", unix.SYS_GETXATTR, []kwDest{buf(2, 3)}},
	{"lgetxattr", unix.SYS_LGETXATTR, []kwDest{buf(2, 3)}},
	{"fgetxattr", unix.SYS_FGETXATTR, []kwDest{buf(2, 3)}},
	{"listxattr", unix.SYS_LISTXATTR, []kwDest{buf(1, 2)}},
	{"llistxattr", unix.SYS_LLISTXATTR, []kwDest{buf(1, 2)}},
	{"flistxattr", unix.SYS_FLISTXATTR, []kwDest{buf(1, 2)}},
	{"mq_timedreceive", unix.SYS_MQ_TIMEDRECEIVE, []kwDest{buf(1, 2)}},
	// the mask's length comes before it: the filter tests the largest
	// mask the kernel writes (8,192 CPUs)
	{"sched_getaffinity", unix.SYS_SCHED_GETAFFINITY, []kwDest{{arg: 2, lenArg: 1, size: 1024}}},
	{"sched_getattr", unix.SYS_SCHED_GETATTR, []kwDest{buf(1, 2)}},
	{"rt_sigprocmask", unix.SYS_RT_SIGPROCMASK, []kwDest{buf(2, 3)}},
	{"rt_sigpending", unix.SYS_RT_SIGPENDING, []kwDest{buf(0, 1)}},
	// into arrays of a count of elements: epoll's events (12 bytes each,
	// at most INT_MAX/12 of them), poll's descriptors (8 bytes each, at
	// most RLIMIT_NOFILE, whose ceiling fs.nr_open is below 2^29)
	{"epoll_wait", unix.SYS_EPOLL_WAIT, []kwDest{{arg: 1, lenArg: 2, mul: 12}}},
	{"epoll_pwait", unix.SYS_EPOLL_PWAIT, []kwDest{{arg: 1, lenArg: 2, mul: 12}}},
	{"epoll_pwait2", unix.SYS_EPOLL_PWAIT2, []kwDest{{arg: 1, lenArg: 2, mul: 12}}},
	{"poll", unix.SYS_POLL, []kwDest{{arg: 0, lenArg: 1, mul: 8}}},
	{"ppoll", unix.SYS_PPOLL, []kwDest{{arg: 0, lenArg: 1, mul: 8}, fixed(2, sizeTimespec)}},
	// into structs of a fixed size
	{"stat", unix.SYS_STAT, []kwDest{fixed(1, sizeStat)}},
	{"fstat", unix.SYS_FSTAT, []kwDest{fixed(1, sizeStat)}},
	{"lstat", unix.SYS_LSTAT, []kwDest{fixed(1, sizeStat)}},
	{"newfstatat", unix.SYS_NEWFSTATAT, []kwDest{fixed(2, sizeStat)}},
	{"statx", unix.SYS_STATX, []kwDest{fixed(4, sizeStatx)}},
	{"statfs", unix.SYS_STATFS, []kwDest{fixed(1, sizeStatfs)}},
	{"fstatfs", unix.SYS_FSTATFS, []kwDest{fixed(1, sizeStatfs)}},
	{"wait4", unix.SYS_WAIT4, []kwDest{fixed(1, 4), fixed(3, sizeRusage)}},
	{"waitid", unix.SYS_WAITID, []kwDest{fixed(2, sizeSiginfo), fixed(4, sizeRusage)}},
	{"getrusage", unix.SYS_GETRUSAGE, []kwDest{fixed(1, sizeRusage)}},
	{"pipe", unix.SYS_PIPE, []kwDest{fixed(0, 8)}},
	{"pipe2", unix.SYS_PIPE2, []kwDest{fixed(0, 8)}},
	{"socketpair", unix.SYS_SOCKETPAIR, []kwDest{fixed(3, 8)}},
	{"clock_gettime", unix.SYS_CLOCK_GETTIME, []kwDest{fixed(1, sizeTimespec)}},
	{"clock_getres", unix.SYS_CLOCK_GETRES, []kwDest{fixed(1, sizeTimespec)}},
	{"gettimeofday", unix.SYS_GETTIMEOFDAY, []kwDest{fixed(0, 16), fixed(1, 8)}},
	{"time", unix.SYS_TIME, []kwDest{fixed(0, 8)}},
	{"nanosleep", unix.SYS_NANOSLEEP, []kwDest{fixed(1, sizeTimespec)}},
	{"clock_nanosleep", unix.SYS_CLOCK_NANOSLEEP, []kwDest{fixed(3, sizeTimespec)}},
	{"sched_rr_get_interval", unix.SYS_SCHED_RR_GET_INTERVAL, []kwDest{fixed(1, sizeTimespec)}},
	{"times", unix.SYS_TIMES, []kwDest{fixed(0, 32)}},
	{"sysinfo", unix.SYS_SYSINFO, []kwDest{fixed(0, sizeSysinfo)}},
	{"uname", unix.SYS_UNAME, []kwDest{fixed(0, sizeUtsname)}},
	{"rt_sigaction", unix.SYS_RT_SIGACTION, []kwDest{fixed(2, sizeSigact)}},
	{"sigaltstack", unix.SYS_SIGALTSTACK, []kwDest{fixed(1, sizeStack)}},
	{"rt_sigtimedwait", unix.SYS_RT_SIGTIMEDWAIT, []kwDest{fixed(1, sizeSiginfo)}},
	{"getitimer", unix.SYS_GETITIMER, []kwDest{fixed(1, sizeItimer)}},
	{"setitimer", unix.SYS_SETITIMER, []kwDest{fixed(2, sizeItimer)}},
	{"timer_gettime", unix.SYS_TIMER_GETTIME, []kwDest{fixed(1, sizeItimer)}},
	{"timer_settime", unix.SYS_TIMER_SETTIME, []kwDest{fixed(3, sizeItimer)}},
	{"timerfd_gettime", unix.SYS_TIMERFD_GETTIME, []kwDest{fixed(1, sizeItimer)}},
	{"timerfd_settime", unix.SYS_TIMERFD_SETTIME, []kwDest{fixed(3, sizeItimer)}},
	{"adjtimex", unix.SYS_ADJTIMEX, []kwDest{fixed(0, sizeTimex)}},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME, []kwDest{fixed(1, sizeTimex)}},
	{"getrlimit", unix.SYS_GETRLIMIT, []kwDest{fixed(1, sizeRlimit)}},
	{"prlimit64", unix.SYS_PRLIMIT64, []kwDest{fixed(3, sizeRlimit)}},
	{"getresuid", unix.SYS_GETRESUID, []kwDest{fixed(0, 4), fixed(1, 4), fixed(2, 4)}},
	{"getresgid", unix.SYS_GETRESGID, []kwDest{fixed(0, 4), fixed(1, 4), fixed(2, 4)}},
	{"getcpu", unix.SYS_GETCPU, []kwDest{fixed(0, 4), fixed(1, 4)}},
	// capget writes its header's version back when it is not the kernel's
	{"capget", unix.SYS_CAPGET, []kwDest{fixed(0, 8), fixed(1, sizeCapData)}},
	// prctl's PR_GET_* write at args[1]: at most 16 bytes (PR_GET_NAME),
	// but for PR_GET_AUXV, as many as args[2] says, at most the auxiliary
	// vector (AT_VECTOR_SIZE: 52 words); arch_prctl's ARCH_GET_FS and
	// ARCH_GET_GS 8
	{"prctl", unix.SYS_PRCTL, []kwDest{{arg: 1, lenArg: -1, size: prctlAuxv, prctl: true}}},
	{"arch_prctl", unix.SYS_ARCH_PRCTL, []kwDest{fixed(1, 8)}},
	{"timer_create", unix.SYS_TIMER_CREATE, []kwDest{fixed(2, 4)}},
	{"io_setup", unix.SYS_IO_SETUP, []kwDest{fixed(1, 8)}},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, []kwDest{fixed(1, 120)}},
	{"mq_getsetattr", unix.SYS_MQ_GETSETATTR, []kwDest{fixed(2, 64)}},
	// the file offsets the kernel advances
	{"sendfile", unix.SYS_SENDFILE, []kwDest{fixed(2, 8)}},
	{"splice", unix.SYS_SPLICE, []kwDest{fixed(1, 8), fixed(3, 8)}},
	{"copy_file_range", unix.SYS_COPY_FILE_RANGE, []kwDest{fixed(1, 8), fixed(3, 8)}},
	// getgroups' count comes before its array: the filter tests the most
	// the kernel writes (NGROUPS_MAX of 4 bytes)
	{"getgroups", unix.SYS_GETGROUPS, []kwDest{{arg: 1, lenArg: 0, mul: 4, size: 65536 * 4}}},
	// select's three descriptor sets, of args[0] bits each (the filter
	// tests the most: fs.nr_open's default, 2^20 descriptors), and the
	// time left it writes back
	{"select", unix.SYS_SELECT, append(fdsets(), fixed(4, 16))},
	{"pselect6", unix.SYS_PSELECT6, append(fdsets(), fixed(4, sizeTimespec))},
	// a futex word in code: the kernel's access faults even for a wake;
	// the second word of the operations that have one (FUTEX_WAKE_OP
	// writes it)
	{"futex", unix.SYS_FUTEX, []kwDest{fixed(0, 4), {arg: 4, lenArg: -1, size: 4, futex2: true}}},
	{"sched_getparam", unix.SYS_SCHED_GETPARAM, []kwDest{fixed(1, 4)}},
	{"get_robust_list", unix.SYS_GET_ROBUST_LIST, []kwDest{fixed(1, 8), fixed(2, 8)}},
	// into a socket address or option as long as the program says
	{"accept", unix.SYS_ACCEPT, sockaddr(1, 2)},
	{"accept4", unix.SYS_ACCEPT4, sockaddr(1, 2)},
	{"getsockname", unix.SYS_GETSOCKNAME, sockaddr(1, 2)},
	{"getpeername", unix.SYS_GETPEERNAME, sockaddr(1, 2)},
	{"getsockopt", unix.SYS_GETSOCKOPT, []kwDest{{arg: 3, lenArg: -1, lenPtr: 4, size: sizeSockopt}, fixed(4, 4)}},
}

// kernelWriteVecCalls are the calls the kernel copies data through into an
// array of buffers (see above).
var kernelWriteVecCalls = []struct {
	name string
	nr   int
}{
	{"readv", unix.SYS_READV}, {"preadv", unix.SYS_PREADV}, {"preadv2", unix.SYS_PREADV2},
	{"recvmsg", unix.SYS_RECVMSG}, {"recvmmsg", unix.SYS_RECVMMSG}, {"process_vm_readv", unix.SYS_PROCESS_VM_READV},
}

// KernelWriteVecRules stops every call of kernelWriteVecCalls: the
// filter cannot read their arrays of buffers (see above).
func KernelWriteVecRules() []Rule {
	var rules []Rule
	for _, c := range kernelWriteVecCalls {
		rules = append(rules, Rule{c.name, c.nr, nil,
			"the kernel copies into an array of buffers the filter cannot read: memory ptjit write-protects may be among them (kwrite_linux_amd64.go)"})
	}
	return rules
}

func isKernelWriteVec(nr int) bool {
	for _, c := range kernelWriteVecCalls {
		if c.nr == nr {
			return true
		}
	}
	return false
}

// uioMaxIOV is UIO_MAXIOV: the kernel fails a call with more iovecs
// (readv's kind) and reads no more messages than that (recvmmsg).
const uioMaxIOV = 1024

// msghdrSize and mmsghdrSize are struct msghdr's and struct mmsghdr's
// sizes on x86-64.
const (
	msghdrSize  = 56
	mmsghdrSize = 64
)

// kernelWriteVecDests returns the ranges a call of kernelWriteVecCalls (op,
// of th) may copy into, read from th's memory: the iovecs, and for a
// message its header, name and control buffers. An array ptjit cannot
// read adds nothing: the kernel cannot read it either, and fails the call
// as alone.
func kernelWriteVecDests(th *thread, op *pendingOp) []ival {
	var out []ival
	a := op.args
	switch op.nr {
	case unix.SYS_READV, unix.SYS_PREADV, unix.SYS_PREADV2, unix.SYS_PROCESS_VM_READV:
		out = iovDests(th.tid, a[1], a[2], out)
	case unix.SYS_RECVMSG:
		b := make([]byte, msghdrSize)
		if snapshot.ReadMem(th.tid, a[1], b) == nil {
			out = msghdrDests(th.tid, a[1], b, out)
		}
	case unix.SYS_RECVMMSG:
		n := min(a[2]&0xffffffff, uioMaxIOV)
		if n == 0 {
			break
		}
		b := make([]byte, n*mmsghdrSize)
		if snapshot.ReadMem(th.tid, a[1], b) != nil {
			break
		}
		for i := uint64(0); i < n; i++ {
			out = msghdrDests(th.tid, a[1]+i*mmsghdrSize, b[i*mmsghdrSize:(i+1)*mmsghdrSize], out)
		}
	}
	return out
}

// iovDests appends the ranges of the cnt iovecs at iov in tid's memory.
func iovDests(tid int, iov, cnt uint64, out []ival) []ival {
	if cnt == 0 || cnt > uioMaxIOV {
		return out // the kernel fails the call (EINVAL), or copies nothing
	}
	b := make([]byte, 16*cnt)
	if snapshot.ReadMem(tid, iov, b) != nil {
		return out
	}
	for i := uint64(0); i < cnt; i++ {
		out = appendDest(out, binary.LittleEndian.Uint64(b[16*i:]), binary.LittleEndian.Uint64(b[16*i+8:]))
	}
	return out
}

// msghdrDests appends the ranges the kernel writes for the message header
// b (at addr in tid's memory): the header itself (msg_namelen,
// msg_controllen, msg_flags, and an mmsghdr's msg_len after it), its name
// and control buffers, and its iovecs.
func msghdrDests(tid int, addr uint64, b []byte, out []ival) []ival {
	out = appendDest(out, addr, uint64(len(b)))
	out = appendDest(out, binary.LittleEndian.Uint64(b[0:]), uint64(binary.LittleEndian.Uint32(b[8:])))
	out = appendDest(out, binary.LittleEndian.Uint64(b[32:]), binary.LittleEndian.Uint64(b[40:]))
	return iovDests(tid, binary.LittleEndian.Uint64(b[16:]), binary.LittleEndian.Uint64(b[24:]), out)
}

// appendDest appends the pages of [base, base+n), if any.
func appendDest(out []ival, base, n uint64) []ival {
	if n == 0 || base+n < base {
		return out
	}
	return append(out, ival{base &^ (pageSize - 1), pageUp(base + n)})
}

// KernelWriteRules stops the calls of kernelWriteCalls one of whose
// destinations overlaps one of ranges (see above).
func KernelWriteRules(ranges []AddrRange) []Rule {
	var rules []Rule
	for _, c := range kernelWriteCalls {
		var when []Cond
		for _, d := range c.dests {
			cond := Cond{Arg: d.arg, Overlaps: ranges, Size: d.size}
			if d.lenArg == d.arg+1 {
				// the length argument (Cond.Overlaps), or a count
				cond.Size, cond.Mul = 0, d.mul
			}
			when = append(when, cond)
		}
		rules = append(rules, Rule{c.name, c.nr, when,
			"the kernel copies into memory the program names: memory ptjit write-protects there (kwrite_linux_amd64.go)"})
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

// kernelWriteDests appends the pages the call op (of tid) may copy into.
func kernelWriteDests(tid int, c kernelWriteCall, op *pendingOp, out []ival) []ival {
	for _, d := range c.dests {
		n := d.size
		switch {
		case d.futex2 && !futexOps2[op.args[1]&127]:
			continue // args[4] is no address for this operation
		case d.prctl && op.args[0] == unix.PR_GET_AUXV:
			n = min(op.args[2], prctlAuxv)
		case d.prctl:
			n = prctlGet
		case d.lenArg >= 0 && d.bits:
			n = (op.args[d.lenArg]&0xffffffff + 63) / 64 * 8
		case d.lenArg >= 0 && d.mul > 0:
			n = op.args[d.lenArg] & 0xffffffff * uint64(d.mul)
		case d.lenArg >= 0:
			n = op.args[d.lenArg]
		case d.lenPtr > 0:
			var b [4]byte
			if snapshot.ReadMem(tid, op.args[d.lenPtr], b[:]) != nil {
				continue // the kernel cannot read it either: no copy
			}
			n = min(uint64(binary.LittleEndian.Uint32(b[:])), d.size)
		}
		out = appendDest(out, op.args[d.arg], n)
	}
	return out
}

// kernelWriteEntry handles the seccomp stop of a call of kernelWriteCalls
// or kernelWriteVecCalls (op, with th's registers regs): where its
// destination holds pages W^X write-protects, the call is restarted around
// kernelWriteOpen; else it runs. It reports false when op is no such call.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) kernelWriteEntry(th *thread, regs unix.PtraceRegs, op *pendingOp) bool {
	c, ok := kernelWriteCallOf(op.nr)
	vec := !ok && isKernelWriteVec(op.nr)
	if !ok && !vec {
		return false
	}
	sp := th.proc.space
	if th.proc.helper || sp == nil || !t.wxOn() {
		t.resume(th.tid, 0)
		return true
	}
	var dests []ival
	if vec {
		dests = kernelWriteVecDests(th, op)
	} else {
		dests = kernelWriteDests(th.tid, c, op, nil)
	}
	var pages, open []uint64
	for _, d := range dests {
		pages, open = sp.kernelWriteBlockedIn(d, pages, open)
	}
	if len(pages) == 0 {
		if len(th.kw.pages) == 0 && len(open) > 0 {
			// pages an earlier copy opened, where no code ran
			// since: writable already, but a fetch by another
			// thread during this copy would make them
			// executable-only under it (the new-user trial of
			// 2026-11-27: a read after a clock_gettime into the same
			// page failed with EFAULT); in flight until the exit
			t.kernelWriteFlight(th, open, op.ip)
		}
		if len(th.kw.pages) > 0 {
			// the call restarted after its pages were opened, or
			// its pages were open already: its exit settles them
			// (kernelWriteSettle)
			th.kw.exit = true
			if err := unix.PtraceSyscall(th.tid, 0); err != nil {
				th.kw.exit = false
			}
			return true
		}
		t.resume(th.tid, 0)
		return true
	}
	return t.restartAround(th, regs, op, func(th *thread) {
		t.kernelWriteOpen(th, pages, op.ip)
		t.kernelWriteFlight(th, open, op.ip)
	})
}

// kernelWriteFlight marks pages, batch pages already writable, in flight
// for th's kernel copy (see above) until its call's exit stop.
func (t *Tracer) kernelWriteFlight(th *thread, pages []uint64, ip uint64) {
	if len(pages) == 0 {
		return
	}
	w := th.proc.space.wxs()
	if w.flight == nil {
		w.flight, w.flightRan = map[uint64]int{}, map[uint64]bool{}
	}
	slices.Sort(pages)
	for _, p := range slices.Compact(pages) {
		w.flight[p]++
		th.kw.pages = append(th.kw.pages, p)
	}
	th.kw.ip = ip
}

// threadKW is a thread's kernel copy in flight: the code pages opened for
// it (each counted once in wxState.flight), and whether its call's exit
// stop is due.
type threadKW struct {
	pages []uint64
	ip    uint64
	exit  bool
}

// kernelWriteSettle ends th's kernel copy in flight at its call's exit
// stop: its pages are no longer in flight, and those a fetch made
// writable and executable meanwhile (and no other copy is writing)
// become batch pages, so that the next fetch records what the copy wrote.
//
// Precondition: on the locked tracer thread; th is at a syscall-exit stop.
func (t *Tracer) kernelWriteSettle(th *thread) {
	pages, ip := th.kw.pages, th.kw.ip
	th.kw = threadKW{}
	sp := th.proc.space
	if sp == nil {
		return
	}
	w := sp.wxs()
	var back []uint64
	for _, p := range pages {
		if w.flight[p]--; w.flight[p] > 0 {
			continue
		}
		delete(w.flight, p)
		if w.flightRan[p] {
			delete(w.flightRan, p)
			if pc, ok := sp.PieceAt(p); ok && isWX(pc.Prot) && !w.batch.has(p) {
				back = append(back, p)
			}
		}
	}
	slices.Sort(back)
	t.batchPages(th, slices.Compact(back), batchPage{tid: th.tid, ip: ip}, "wx-batch: writable after a kernel copy, until executed", nil)
}

// batchPages makes pages (sorted) W^X batch pages: writable, not
// executable, until code runs there (bp the version's thread and IP), in
// runs of adjacent pages, each with one injected mprotect; each(run) is
// called for each run made (nil: none).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) batchPages(th *thread, pages []uint64, bp batchPage, reason string, each func(ival)) {
	w := th.proc.space.wxs()
	rw := func(uint64) int { return unix.PROT_READ | unix.PROT_WRITE }
	for _, run := range protRuns(pages, rw) {
		if err := t.protect(th, run.s, run.e, run.prot, reason); err != nil {
			t.warnOp(err)
			continue
		}
		for p := run.s; p < run.e; p += pageSize {
			w.batch.set(p, bp)
		}
		if each != nil {
			each(ival{run.s, run.e})
		}
	}
}

// kernelWriteGone forgets the copy in flight of a thread that is gone (its
// pages stay as they are).
func (t *Tracer) kernelWriteGone(th *thread) {
	if len(th.kw.pages) == 0 || th.proc.space == nil {
		return
	}
	w := th.proc.space.wxs()
	for _, p := range th.kw.pages {
		if w.flight[p]--; w.flight[p] <= 0 {
			delete(w.flight, p)
			delete(w.flightRan, p)
		}
	}
	th.kw = threadKW{}
}

// maxKernelWritePages bounds the pages one call opens (a read of a
// gigabyte into code opens the first 64 MiB of it: the call copies less
// than asked or fails as before).
const maxKernelWritePages = 16384

// kernelWriteBlockedIn appends to pages those of d the kernel cannot
// write because of W^X (kernelWriteBlocked), and to open the batch pages
// of d that a store or an earlier copy made writable (not fresh memory:
// no code ran there), up to maxKernelWritePages in all. It looks only where such pages can be, the executable pieces and
// the read-only aliases over d: a call's count is the program's, and a
// read of 2^63 bytes names far more pages than there is memory (walking
// them all hung ptjit in the new-user trial of 2026-11-27).
func (sp *space) kernelWriteBlockedIn(d ival, pages, open []uint64) ([]uint64, []uint64) {
	var cands []ival
	for i := sp.first(d.s); i < len(sp.pieces) && sp.pieces[i].Start < d.e; i++ {
		cands = append(cands, ival{max(sp.pieces[i].Start, d.s), min(sp.pieces[i].End, d.e)})
	}
	for _, m := range sp.alias.shared {
		if m.ro && m.start < d.e && d.s < m.end {
			cands = append(cands, ival{max(m.start, d.s), min(m.end, d.e)})
		}
	}
	for _, c := range cands {
		for p := c.s &^ (pageSize - 1); p < c.e && len(pages)+len(open) < maxKernelWritePages; p += pageSize {
			if sp.kernelWriteBlocked(p) {
				pages = append(pages, p)
			} else if bp, ok := sp.wx.batch.pages[p]; ok && !bp.alias {
				open = append(open, p)
			}
		}
	}
	return pages, open
}

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
	t.batchPages(th, code, batchPage{tid: th.tid, ip: ip}, "wx-batch: writable for a kernel copy", func(run ival) {
		// in flight until the restarted call's exit
		var opened []uint64
		for p := run.s; p < run.e; p += pageSize {
			opened = append(opened, p)
		}
		t.kernelWriteFlight(th, opened, ip)
		t.result.Stats.KernelWrites += len(opened)
	})
}
