package tracker

import (
	"math/rand"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestFilterEval checks the compiled filter instruction by instruction
// against the rules, on the values that matter.
func TestFilterEval(t *testing.T) {
	prog, err := Compile(Rules)
	if err != nil {
		t.Fatal(err)
	}
	const x86 = 0xc000003e
	cases := []struct {
		name string
		arch uint32
		nr   int
		args [6]uint64
		stop bool
	}{
		{"getpid", x86, unix.SYS_GETPID, [6]uint64{}, false},
		{"write", x86, unix.SYS_WRITE, [6]uint64{1, 0, 10}, false},
		{"mmap RW", x86, unix.SYS_MMAP, [6]uint64{0, 4096, unix.PROT_READ | unix.PROT_WRITE, unix.MAP_PRIVATE | unix.MAP_ANONYMOUS}, false},
		{"mmap RX", x86, unix.SYS_MMAP, [6]uint64{0, 4096, unix.PROT_READ | unix.PROT_EXEC, unix.MAP_PRIVATE}, true},
		{"mmap X only", x86, unix.SYS_MMAP, [6]uint64{0, 4096, unix.PROT_EXEC, unix.MAP_PRIVATE}, true},
		{"mmap RW FIXED", x86, unix.SYS_MMAP, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_WRITE, unix.MAP_PRIVATE | unix.MAP_FIXED}, true},
		{"mmap RW SHARED (an alias?)", x86, unix.SYS_MMAP, [6]uint64{0, 4096, unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED}, true},
		{"mmap FIXED_NOREPLACE", x86, unix.SYS_MMAP, [6]uint64{0x10000, 4096, unix.PROT_READ, unix.MAP_PRIVATE | 0x100000}, false},
		{"mmap high arg bits ignored", x86, unix.SYS_MMAP, [6]uint64{0, 4096, 1 << 40, unix.MAP_PRIVATE}, false},
		{"mprotect R (takes exec away at most)", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ}, false},
		{"mprotect RW", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_WRITE}, false},
		{"mprotect RX", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_EXEC}, true},
		{"mprotect X|GROWSDOWN", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_EXEC | 0x01000000}, true},
		{"mprotect high arg bits ignored", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, 1 << 40}, false},
		{"pkey_mprotect R", x86, unix.SYS_PKEY_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ, 1}, false},
		{"pkey_mprotect RWX", x86, unix.SYS_PKEY_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC, 1}, true},
		{"munmap", x86, unix.SYS_MUNMAP, [6]uint64{0x10000, 4096}, true},
		{"mremap", x86, unix.SYS_MREMAP, [6]uint64{0x10000, 4096, 8192, 1}, true},
		{"brk", x86, unix.SYS_BRK, [6]uint64{0}, true},
		{"madvise WILLNEED", x86, unix.SYS_MADVISE, [6]uint64{0x10000, 4096, unix.MADV_WILLNEED}, false},
		{"madvise HUGEPAGE", x86, unix.SYS_MADVISE, [6]uint64{0x10000, 4096, unix.MADV_HUGEPAGE}, false},
		{"madvise DONTNEED", x86, unix.SYS_MADVISE, [6]uint64{0x10000, 4096, unix.MADV_DONTNEED}, true},
		{"madvise FREE", x86, unix.SYS_MADVISE, [6]uint64{0x10000, 4096, unix.MADV_FREE}, true},
		{"madvise REMOVE", x86, unix.SYS_MADVISE, [6]uint64{0x10000, 4096, unix.MADV_REMOVE}, true},
		{"madvise unknown", x86, unix.SYS_MADVISE, [6]uint64{0x10000, 4096, 77}, true},
		{"shmat plain", x86, unix.SYS_SHMAT, [6]uint64{1, 0, 0}, false},
		{"shmat SHM_EXEC", x86, unix.SYS_SHMAT, [6]uint64{1, 0, 0o100000}, true},
		{"shmat SHM_REMAP", x86, unix.SYS_SHMAT, [6]uint64{1, 0x10000, 0o40000}, true},
		{"shmdt", x86, unix.SYS_SHMDT, [6]uint64{0x10000}, true},
		{"process_vm_writev", x86, unix.SYS_PROCESS_VM_WRITEV, [6]uint64{}, true},
		{"process_vm_readv", x86, unix.SYS_PROCESS_VM_READV, [6]uint64{}, false},
		{"execve (PTRACE_EVENT_EXEC instead)", x86, unix.SYS_EXECVE, [6]uint64{}, false},
		{"openat read-only", x86, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_RDONLY | unix.O_CLOEXEC}, false},
		{"openat O_RDWR (may be /proc/PID/mem)", x86, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_RDWR}, true},
		{"openat O_WRONLY", x86, unix.SYS_OPENAT, [6]uint64{0, 0, unix.O_WRONLY | unix.O_CREAT}, true},
		{"open read-only", x86, unix.SYS_OPEN, [6]uint64{0, unix.O_RDONLY}, false},
		{"open O_RDWR", x86, unix.SYS_OPEN, [6]uint64{0, unix.O_RDWR}, true},
		{"openat2 (flags in a struct)", x86, unix.SYS_OPENAT2, [6]uint64{}, true},
		{"write (no mem filter here)", x86, unix.SYS_WRITE, [6]uint64{1}, false},
		{"ptrace TRACEME (a debugger's child)", x86, unix.SYS_PTRACE, [6]uint64{unix.PTRACE_TRACEME}, true},
		{"ptrace ATTACH", x86, unix.SYS_PTRACE, [6]uint64{unix.PTRACE_ATTACH, 1234}, true},
		{"ptrace SEIZE", x86, unix.SYS_PTRACE, [6]uint64{unix.PTRACE_SEIZE, 1234}, true},
		{"ptrace PEEKDATA (the program's own tracee)", x86, unix.SYS_PTRACE, [6]uint64{unix.PTRACE_PEEKDATA, 1234}, false},
		{"ptrace CONT", x86, unix.SYS_PTRACE, [6]uint64{unix.PTRACE_CONT, 1234}, false},
		{"ptrace GETREGS", x86, unix.SYS_PTRACE, [6]uint64{unix.PTRACE_GETREGS, 1234}, false},
		{"seccomp SET_MODE_FILTER (the program's own filter)", x86, unix.SYS_SECCOMP, [6]uint64{unix.SECCOMP_SET_MODE_FILTER}, true},
		{"seccomp GET_ACTION_AVAIL", x86, unix.SYS_SECCOMP, [6]uint64{unix.SECCOMP_GET_ACTION_AVAIL}, false},
		{"prctl PR_SET_SECCOMP", x86, unix.SYS_PRCTL, [6]uint64{unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER}, true},
		{"prctl PR_SET_NAME", x86, unix.SYS_PRCTL, [6]uint64{unix.PR_SET_NAME}, false},
		{"i386 int 0x80", 0x40000003, 1, [6]uint64{}, true},
		{"x32 mmap", x86, 0x40000000 | 9, [6]uint64{}, true},
		{"mprotect RX injected by ptjit (InjectCookie in r9)", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_EXEC, 0, 0, InjectCookie}, false},
		{"mprotect RX, r9 with the cookie's low half only", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_EXEC, 0, 0, uint64(uint32(InjectCookie))}, true},
		{"mprotect RX, r9 with the cookie's high half only", x86, unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_READ | unix.PROT_EXEC, 0, 0, InjectCookie &^ 0xffffffff}, true},
		{"i386 call with the cookie", 0x40000003, 125, [6]uint64{0, 0, 0, 0, 0, InjectCookie}, true},
	}
	for _, c := range cases {
		ret, err := evalFilter(prog, c.arch, c.nr, c.args)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := ret == unix.SECCOMP_RET_TRACE|TraceData; got != c.stop || (!got && ret != unix.SECCOMP_RET_ALLOW) {
			t.Errorf("%s: filter returns %#x, want stop=%v (RET_TRACE|%#x)", c.name, ret, c.stop, TraceData)
		}
	}
}

// The filter ptjit injects for a /proc/PID/mem descriptor stops the write
// family on that descriptor only.
func TestMemFilter(t *testing.T) {
	prog, err := Compile(MemFilterRules(7))
	if err != nil {
		t.Fatal(err)
	}
	const x86 = 0xc000003e
	for _, c := range []struct {
		nr   int
		fd   uint64
		stop bool
	}{
		{unix.SYS_WRITE, 7, true}, {unix.SYS_PWRITE64, 7, true}, {unix.SYS_WRITEV, 7, true},
		{unix.SYS_PWRITEV, 7, true}, {unix.SYS_PWRITEV2, 7, true},
		{unix.SYS_WRITE, 1, false}, {unix.SYS_PWRITE64, 8, false}, {unix.SYS_READ, 7, false},
		{unix.SYS_WRITE, 7 | 1<<32, true}, // only the low 32 bits are the fd
	} {
		ret, err := evalFilter(prog, x86, c.nr, [6]uint64{c.fd})
		if err != nil {
			t.Fatal(err)
		}
		if (ret == unix.SECCOMP_RET_TRACE|TraceData) != c.stop || !c.stop && ret != unix.SECCOMP_RET_ALLOW {
			t.Errorf("nr %d fd %d: ret %#x, stop %v", c.nr, c.fd, ret, c.stop)
		}
	}
}

// The filter ptjit adds where it manages memory stops every mprotect and
// pkey_mprotect, whatever the protection, and nothing else.
func TestFullProtectFilter(t *testing.T) {
	prog, err := Compile(FullProtectRules)
	if err != nil {
		t.Fatal(err)
	}
	const x86 = 0xc000003e
	for _, c := range []struct {
		nr   int
		prot uint64
		stop bool
	}{
		{unix.SYS_MPROTECT, unix.PROT_READ | unix.PROT_WRITE, true}, {unix.SYS_MPROTECT, unix.PROT_NONE, true},
		{unix.SYS_MPROTECT, unix.PROT_READ | unix.PROT_EXEC, true}, {unix.SYS_PKEY_MPROTECT, unix.PROT_READ, true},
		{unix.SYS_MMAP, unix.PROT_READ | unix.PROT_EXEC, false}, {unix.SYS_MUNMAP, 0, false}, {unix.SYS_GETPID, 0, false},
	} {
		ret, err := evalFilter(prog, x86, c.nr, [6]uint64{0x10000, 4096, c.prot})
		if err != nil {
			t.Fatal(err)
		}
		if (ret == unix.SECCOMP_RET_TRACE|TraceData) != c.stop || !c.stop && ret != unix.SECCOMP_RET_ALLOW {
			t.Errorf("nr %d prot %#x: ret %#x, stop %v", c.nr, c.prot, ret, c.stop)
		}
	}
}

// TestFilterTraceData: every RET_TRACE ptjit's filters can return carries
// TraceData in SECCOMP_RET_DATA (the event message classifySeccomp reads),
// and nothing else is returned but RET_ALLOW.
func TestFilterTraceData(t *testing.T) {
	if TraceData&^unix.SECCOMP_RET_DATA != 0 || TraceData == 0 {
		t.Fatalf("TraceData %#x: must be a non-zero SECCOMP_RET_DATA value (0 is what programs use)", TraceData)
	}
	for name, rules := range map[string][]Rule{"Rules": Rules, "MemFilterRules": MemFilterRules(3), "FullProtectRules": FullProtectRules,
		"RangeProtectRules": RangeProtectRules([]AddrRange{{0x10000, 0x20000}, {1 << 40, 1<<40 + 1<<24}})} {
		prog, err := Compile(rules)
		if err != nil {
			t.Fatal(err)
		}
		for pc, in := range prog {
			if in.Code == retK && in.K != unix.SECCOMP_RET_ALLOW && in.K != unix.SECCOMP_RET_TRACE|TraceData {
				t.Errorf("%s: pc %d returns %#x", name, pc, in.K)
			}
		}
	}
}

// TestRangeProtectEval: the filter for ranges ptjit manages stops an
// mprotect or pkey_mprotect exactly when its range overlaps one of them
// (or address + length overflows), checked against a plain Go statement
// on edge cases and random calls; other syscalls and injected calls pass.
func TestRangeProtectEval(t *testing.T) {
	const x86 = 0xc000003e
	ranges := []AddrRange{
		{0x7f0000001000, 0x7f0000003000},
		{0x7fde01400000, 0x7fde01670000},
		{0xffff0000, 0x100010000}, // across a 32-bit boundary
		{0x100000000, 0x100001000},
		{0x7fffffffe000, 0x800000000000},
	}
	prog, err := Compile(RangeProtectRules(ranges))
	if err != nil {
		t.Fatal(err)
	}
	overlaps := func(addr, n uint64) bool {
		end := addr + n
		if end < addr {
			return true
		}
		for _, r := range ranges {
			if addr < r.Hi && end > r.Lo {
				return true
			}
		}
		return false
	}
	check := func(nr int, addr, n uint64) {
		t.Helper()
		got, err := evalFilter(prog, x86, nr, [6]uint64{addr, n, unix.PROT_READ})
		if err != nil {
			t.Fatal(err)
		}
		if stop, want := got == retTrace, overlaps(addr, n); stop != want {
			t.Errorf("syscall %d (%#x, %#x): stops %v, want %v", nr, addr, n, stop, want)
		}
	}
	var edges []uint64
	for _, r := range ranges {
		for _, v := range []uint64{r.Lo, r.Hi} {
			edges = append(edges, v-0x1000, v-1, v, v+1, v+0x1000)
		}
	}
	edges = append(edges, 0, 1, 0xffffffff, 1<<32, 1<<63, ^uint64(0)-0xfff, ^uint64(0))
	for _, a := range edges {
		for _, e := range edges {
			for _, nr := range []int{unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT} {
				check(nr, a, e-a)
				check(nr, a, e)
			}
		}
	}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200000; i++ {
		var a, n uint64
		switch i % 3 {
		case 0: // near a range
			r := ranges[rng.Intn(len(ranges))]
			a = r.Lo - 0x4000 + uint64(rng.Int63n(int64(r.Hi-r.Lo)+0x8000))
			n = uint64(rng.Int63n(0x10000))
		case 1: // anywhere in user space
			a = uint64(rng.Int63n(1 << 47))
			n = uint64(rng.Int63n(1 << 40))
		default: // any 64 bits
			a, n = rng.Uint64(), rng.Uint64()
		}
		check(unix.SYS_MPROTECT, a, n)
	}
	for _, c := range []struct {
		name string
		nr   int
		args [6]uint64
	}{
		{"mmap RW", unix.SYS_MMAP, [6]uint64{0x7f0000001000, 4096, unix.PROT_READ | unix.PROT_WRITE}},
		{"munmap (the launch filter's)", unix.SYS_MUNMAP, [6]uint64{0x7f0000001000, 4096}},
		{"injected mprotect", unix.SYS_MPROTECT, [6]uint64{0x7f0000001000, 4096, unix.PROT_READ, 0, 0, InjectCookie}},
	} {
		if got, err := evalFilter(prog, x86, c.nr, c.args); err != nil || got != retAllow {
			t.Errorf("%s: %#x, %v; want ALLOW", c.name, got, err)
		}
	}
	if _, err := Compile(RangeProtectRules(make([]AddrRange, maxOverlaps+1))); err == nil {
		t.Errorf("%d ranges compiled; want an error", maxOverlaps+1)
	}
}

// TestKernelWriteRulesEval checks the kernel-write filter on every
// destination of every call it names: a destination that overlaps the
// range stops, one that ends before it or starts after it does not, and a
// call whose destinations are all elsewhere runs. The destinations are
// placed by the table's own description of each call (kernelWriteCalls),
// and the sizes it gives are checked against the kernel's structs where
// x/sys has them.
func TestKernelWriteRulesEval(t *testing.T) {
	const x86 = 0xc000003e
	r := AddrRange{0x7f0000010000, 0x7f0000012000}
	prog, err := Compile(KernelWriteRules([]AddrRange{r}))
	if err != nil {
		t.Fatal(err)
	}
	if len(prog) > 4096 {
		t.Fatalf("%d instructions: more than BPF_MAXINSNS", len(prog))
	}
	far := uint64(0x500000)
	for _, c := range kernelWriteCalls {
		base := [6]uint64{}
		for _, d := range c.dests {
			base[d.arg] = far
			if d.lenArg >= 0 {
				base[d.lenArg] = 64
			}
		}
		if got, err := evalFilter(prog, x86, c.nr, base); err != nil || got != retAllow {
			t.Errorf("%s, every destination elsewhere: %#x, %v; want ALLOW", c.name, got, err)
		}
		for i, d := range c.dests {
			// the filter's length: the argument after the address
			// (a count of elements of mul bytes where mul is set), else
			// the most the kernel writes (kwDest)
			n := d.size
			if d.lenArg == d.arg+1 {
				n = 64 * max(uint64(d.mul), 1)
			}
			for _, tc := range []struct {
				addr uint64
				stop bool
			}{
				{r.Lo, true}, {r.Hi - 1, true}, {r.Lo - n + 1, true}, // overlapping
				{r.Lo - n, false}, {r.Hi, false}, // just before, just after
			} {
				args := base
				args[d.arg] = tc.addr
				got, err := evalFilter(prog, x86, c.nr, args)
				if err != nil {
					t.Fatal(err)
				}
				if stop := got == retTrace; stop != tc.stop {
					t.Errorf("%s, destination %d (%d bytes) at %#x: stops %v, want %v", c.name, i, n, tc.addr, stop, tc.stop)
				}
			}
		}
	}
	// random addresses (and counts) near two ranges, one across a 32-bit
	// boundary, and anywhere, against the overlap computed here; a sum
	// past 2^64 stops (Cond.Overlaps)
	ranges := []AddrRange{{0x7f0000010000, 0x7f0000012000}, {0xfffff000, 0x100001000}}
	prog2, err := Compile(KernelWriteRules(ranges))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	for _, c := range kernelWriteCalls {
		for i, d := range c.dests {
			for k := 0; k < 150; k++ {
				var args [6]uint64
				for j := range args {
					args[j] = far
				}
				var a uint64
				switch k % 3 {
				case 0:
					r := ranges[rng.Intn(len(ranges))]
					a = r.Lo - 0x4000 + uint64(rng.Int63n(int64(r.Hi-r.Lo)+0x8000))
				case 1:
					a = ^uint64(0) - uint64(rng.Int63n(0x10000))
				default:
					a = rng.Uint64()
				}
				args[d.arg] = a
				n := d.size
				if d.lenArg == d.arg+1 {
					cnt := uint64(rng.Int63n(0x3000))
					args[d.lenArg] = cnt
					n = cnt * max(uint64(d.mul), 1)
				} else if d.lenArg >= 0 {
					args[d.lenArg] = 1
				}
				want := overlapsAny(a, n, ranges)
				// the other destinations stay far away, except where
				// this one's count is theirs
				got, err := evalFilter(prog2, x86, c.nr, args)
				if err != nil {
					t.Fatal(err)
				}
				if stop := got == retTrace; stop != want && !otherDestHit(c, i, args, ranges) {
					t.Errorf("%s, destination %d at %#x, %d bytes: stops %v, want %v", c.name, i, a, n, stop, want)
				}
			}
		}
	}
	for _, c := range []struct {
		name string
		got  uint64
		want uintptr
	}{
		{"stat", sizeStat, unsafe.Sizeof(unix.Stat_t{})},
		{"statx", sizeStatx, unsafe.Sizeof(unix.Statx_t{})},
		{"statfs", sizeStatfs, unsafe.Sizeof(unix.Statfs_t{})},
		{"rusage", sizeRusage, unsafe.Sizeof(unix.Rusage{})},
		{"siginfo", sizeSiginfo, unsafe.Sizeof(unix.Siginfo{})},
		{"timespec", sizeTimespec, unsafe.Sizeof(unix.Timespec{})},
		{"itimerval", sizeItimer, unsafe.Sizeof(unix.Itimerval{})},
		{"itimerspec", sizeItimer, unsafe.Sizeof(unix.ItimerSpec{})},
		{"timex", sizeTimex, unsafe.Sizeof(unix.Timex{})},
		{"utsname", sizeUtsname, unsafe.Sizeof(unix.Utsname{})},
		{"sysinfo", sizeSysinfo, unsafe.Sizeof(unix.Sysinfo_t{})},
		{"rlimit", sizeRlimit, unsafe.Sizeof(unix.Rlimit{})},
		{"cap data ×2", sizeCapData, 2 * unsafe.Sizeof(unix.CapUserData{})},
		{"tms", 32, unsafe.Sizeof(unix.Tms{})},
	} {
		if c.got != uint64(c.want) {
			t.Errorf("size of %s: %d in the table, %d in x/sys", c.name, c.got, c.want)
		}
	}
}

// otherDestHit reports whether a destination of c other than the i-th
// overlaps ranges with args (one whose address argument is the i-th's
// length argument, say).
func otherDestHit(c kernelWriteCall, i int, args [6]uint64, ranges []AddrRange) bool {
	for j, d := range c.dests {
		if j == i {
			continue
		}
		a, n := args[d.arg], d.size
		if d.lenArg == d.arg+1 {
			n = args[d.lenArg] * max(uint64(d.mul), 1)
		}
		if overlapsAny(a, n, ranges) {
			return true
		}
	}
	return false
}

// overlapsAny reports whether the filter stops [a, a+n): it overlaps one
// of ranges, or the sum passes 2^64 (Cond.Overlaps).
func overlapsAny(a, n uint64, ranges []AddrRange) bool {
	if a+n < a {
		return true
	}
	for _, r := range ranges {
		if n > 0 && a < r.Hi && a+n > r.Lo {
			return true
		}
	}
	return false
}

// TestCompileShared: rules whose conditions are alike share one block, and
// rules ending in a Cond.Overlaps share its range tests, so the kernel
// checks and JITs fewer instructions when ptjit adds a filter (compiler);
// the calls still stop exactly where each rule says.
func TestCompileShared(t *testing.T) {
	const x86 = 0xc000003e
	ranges := []AddrRange{{0x7f0000010000, 0x7f0000012000}, {0x7f0000100000, 0x7f0000101000}}
	when := []Cond{{Arg: 1, Overlaps: ranges}}
	one, err := Compile([]Rule{{"read", unix.SYS_READ, when, ""}})
	if err != nil {
		t.Fatal(err)
	}
	two, err := Compile([]Rule{{"read", unix.SYS_READ, when, ""}, {"pread64", unix.SYS_PREAD64, when, ""}})
	if err != nil {
		t.Fatal(err)
	}
	// the second rule adds its dispatch (a JEQ and a JA) and nothing else
	if len(two) != len(one)+2 {
		t.Errorf("two alike rules: %d instructions, one: %d; want one's + 2", len(two), len(one))
	}
	// a different argument: a block of its own, the same range tests
	three, err := Compile([]Rule{{"read", unix.SYS_READ, when, ""}, {"pread64", unix.SYS_PREAD64, when, ""},
		{"getcwd", unix.SYS_GETCWD, []Cond{{Arg: 0, Overlaps: ranges}}, ""}})
	if err != nil {
		t.Fatal(err)
	}
	if grown := len(three) - len(two); grown >= 10*len(ranges)+20 {
		t.Errorf("a third rule with the same ranges adds %d instructions: its range tests are not shared", grown)
	}
	for _, tc := range []struct {
		nr   int
		args [6]uint64
		stop bool
	}{
		{unix.SYS_READ, [6]uint64{3, 0x7f0000011000, 16}, true},
		{unix.SYS_PREAD64, [6]uint64{3, 0x7f0000100ff8, 16}, true},
		{unix.SYS_PREAD64, [6]uint64{3, 0x7f0000101000, 16}, false},
		{unix.SYS_READ, [6]uint64{3, 0x7f000000fff0, 16}, false},
		{unix.SYS_READ, [6]uint64{3, 0x7f000000fff0, 17}, true},
		{unix.SYS_GETCWD, [6]uint64{0x7f0000011000, 16}, true},
		{unix.SYS_GETCWD, [6]uint64{0x7f0000012000, 16}, false},
		{unix.SYS_GETCWD, [6]uint64{0x7f0000100000, 0x7f0000100000}, true},
		{unix.SYS_WRITE, [6]uint64{3, 0x7f0000011000, 16}, false},
	} {
		got, err := evalFilter(three, x86, tc.nr, tc.args)
		if err != nil {
			t.Fatal(err)
		}
		if stop := got == retTrace; stop != tc.stop {
			t.Errorf("syscall %d %#x: stops %v, want %v", tc.nr, tc.args[:3], stop, tc.stop)
		}
	}
	// the kernel-write filter: 85 calls, 45 kinds of destination
	kw, err := Compile(KernelWriteRules(ranges[:1]))
	if err != nil {
		t.Fatal(err)
	}
	if len(kw) > 2000 {
		t.Errorf("kernel-write filter: %d instructions (3,626 before its blocks and range tests were shared)", len(kw))
	}
}
