package tracker

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

// The seccomp filter, declared as data: which syscalls stop the tracee
// (SECCOMP_RET_TRACE → PTRACE_EVENT_SECCOMP) and on which arguments. Every
// other syscall runs at native speed. The filter is installed by the
// launcher right before execve (see ptrun) and is inherited by every thread
// and child; it cannot be changed later, so each rule must be safe for the
// whole life of the program: it may only let a call through when that call
// can never change executable memory, whatever the address map is, or when
// ptjit made it (InjectCookie).
//
// Not in the filter, on purpose:
//   - execve/execveat: PTRACE_O_TRACEEXEC stops after the new image is
//     mapped, which is the moment the tracker needs; a seccomp stop at
//     entry would add a stop and show nothing.
//   - clone/clone3/fork/vfork: PTRACE_O_TRACECLONE/FORK/VFORK.
// Blind spots (documented in doc.go): write(2)/pwrite(2)/ftruncate(2) to a
// file that is mapped executable and shared, writes to /proc/PID/mem through
// a duplicated descriptor (procmem_linux_amd64.go), UFFDIO_COPY into
// executable memory, the READ_IMPLIES_EXEC personality.

// Cond is one argument test of a rule; the rule stops the tracee when any
// of its conditions holds.
type Cond struct {
	Arg int // 0..5
	// AnyBit: stop when the argument's low 32 bits have any bit of AnyBit.
	AnyBit uint32
	// AllBits: stop when the argument's low 32 bits have every bit of
	// AllBits.
	AllBits uint32
	// Except: stop unless the argument's low 32 bits equal one of these.
	Except []uint32
	// Equal: stop when the argument's low 32 bits equal one of these.
	Equal []uint32
	// Overlaps: stop when the range [args[Arg], args[Arg]+args[Arg+1])
	// (an address and a length, all 64 bits) overlaps one of these, or
	// when the sum overflows (the kernel fails such a call; stopping it
	// costs nothing). At most maxOverlaps ranges.
	Overlaps []AddrRange
	// Size: with Overlaps, the range is [args[Arg], args[Arg]+Size), a
	// struct of that size the call writes, instead of a length in
	// args[Arg+1].
	Size uint64
	// Mul: with Overlaps, the length is args[Arg+1]'s low 32 bits (a
	// count of elements) times Mul, the size of one. The product must
	// fit in 32 bits for the counts the kernel accepts: a larger count
	// fails the call (EINVAL) before it writes anything.
	Mul uint32
}

// AddrRange is the address range [Lo, Hi).
type AddrRange struct{ Lo, Hi uint64 }

// maxOverlaps bounds Cond.Overlaps: every jump of its code must stay
// within a conditional jump's 8-bit offset.
const maxOverlaps = 16

// Rule is one syscall of the filter.
type Rule struct {
	Name string
	Nr   int
	When []Cond // empty: always stop
	Why  string
}

// Madvise advice values that never change the contents or mapping of
// memory the program can execute. Anything else (MADV_DONTNEED zeroes
// private anonymous pages, MADV_FREE may, MADV_REMOVE punches holes,
// MADV_DONTFORK/WIPEONFORK change what a child sees, and any value a future
// kernel adds) stops.
var harmlessAdvice = []uint32{
	unix.MADV_NORMAL, unix.MADV_RANDOM, unix.MADV_SEQUENTIAL, unix.MADV_WILLNEED,
	unix.MADV_MERGEABLE, unix.MADV_UNMERGEABLE, unix.MADV_HUGEPAGE, unix.MADV_NOHUGEPAGE,
	unix.MADV_DONTDUMP, unix.MADV_DODUMP, unix.MADV_KEEPONFORK, unix.MADV_COLD,
	unix.MADV_PAGEOUT, 22 /* MADV_POPULATE_READ */, 23, /* MADV_POPULATE_WRITE */
	25, /* MADV_COLLAPSE */
}

const (
	shmExec  = 0o100000 // SHM_EXEC
	shmRemap = 0o40000  // SHM_REMAP
)

// Rules is the filter. Order does not matter for correctness.
var Rules = []Rule{
	{"mmap", unix.SYS_MMAP, []Cond{{Arg: 2, AnyBit: unix.PROT_EXEC}, {Arg: 3, AnyBit: unix.MAP_FIXED | unix.MAP_SHARED}},
		"PROT_EXEC maps code; MAP_FIXED may replace code; MAP_SHARED may be a writable alias of code " +
			"(W^X write-protects it; without W^X the entry stop is all it costs). Otherwise the kernel " +
			"picks free address space, which cannot hold tracked code. (MAP_FIXED_NOREPLACE fails rather than replace.)"},
	{"mprotect", unix.SYS_MPROTECT, []Cond{{Arg: 2, AnyBit: unix.PROT_EXEC}},
		"PROT_EXEC adds code. A call without it can only take execute permission away (or leave memory " +
			"non-executable), and no instruction runs from memory that is not executable, so the next call " +
			"that adds PROT_EXEC records a complete version; the end of the previous one is inexact. Memory " +
			"ptjit manages (W^X, aliases, the soft filter) needs every call: FullProtectRules"},
	{"pkey_mprotect", unix.SYS_PKEY_MPROTECT, []Cond{{Arg: 2, AnyBit: unix.PROT_EXEC}}, "as mprotect"},
	{"munmap", unix.SYS_MUNMAP, nil, "always: may unmap code"},
	{"mremap", unix.SYS_MREMAP, nil, "always: may move, grow, shrink or replace code"},
	{"madvise", unix.SYS_MADVISE, []Cond{{Arg: 2, Except: harmlessAdvice}},
		"advice that can zero, drop or hide pages"},
	{"brk", unix.SYS_BRK, nil,
		"always: shrinking the heap unmaps pages a program may have made executable"},
	{"shmat", unix.SYS_SHMAT, []Cond{{Arg: 2, AnyBit: shmExec | shmRemap}},
		"SHM_EXEC maps code; SHM_REMAP may replace code; otherwise fresh non-executable memory"},
	{"shmdt", unix.SYS_SHMDT, nil, "always: may unmap code"},
	{"remap_file_pages", unix.SYS_REMAP_FILE_PAGES, nil, "always: rearranges a shared file mapping"},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, nil,
		"always: writes another process's memory (possibly code) without a protection change"},
	{"open", unix.SYS_OPEN, []Cond{{Arg: 1, AnyBit: unix.O_WRONLY | unix.O_RDWR}},
		"opened for writing, it may be a /proc/PID/mem, whose writes change code without a protection change " +
			"(see procmem_linux_amd64.go); a read-only open cannot write"},
	{"openat", unix.SYS_OPENAT, []Cond{{Arg: 2, AnyBit: unix.O_WRONLY | unix.O_RDWR}}, "as open"},
	{"openat2", unix.SYS_OPENAT2, nil, "always: its flags are in a struct the filter cannot read"},
	{"ptrace", unix.SYS_PTRACE, []Cond{{Arg: 0, Equal: []uint32{unix.PTRACE_TRACEME, unix.PTRACE_ATTACH, unix.PTRACE_SEIZE}}},
		"not for memory: a program becoming a tracer fails (a process has one tracer, and ptjit is it); " +
			"ptjit says why once (ptraceEntry). Other requests need a tracee of the program's, so they cannot concern ptjit's"},
	{"seccomp", unix.SYS_SECCOMP, []Cond{{Arg: 0, Equal: []uint32{unix.SECCOMP_SET_MODE_FILTER}}},
		"not for memory: a filter of the program's own may refuse the calls ptjit injects from then on, so W^X's " +
			"protection changes go to the proxy or stores are emulated (ownfilter_linux_amd64.go). A program installs a handful"},
	{"prctl", unix.SYS_PRCTL, []Cond{{Arg: 0, Equal: []uint32{unix.PR_SET_SECCOMP}}}, "as seccomp (the older interface)"},
}

// FullProtectRules is the filter ptjit adds to a process (all its threads,
// SECCOMP_FILTER_FLAG_TSYNC) before it first manages memory there: before
// it sets a kernel protection other than the program's (W^X and aliases
// take PROT_WRITE away, the soft filter PROT_EXEC). From then on every
// mprotect stops, as ptjit's state for that memory must follow every
// change the program makes to it (fullprotect_linux_amd64.go).
var FullProtectRules = []Rule{
	{"mprotect", unix.SYS_MPROTECT, nil, "memory ptjit manages: every protection change"},
	{"pkey_mprotect", unix.SYS_PKEY_MPROTECT, nil, "as mprotect"},
}

// RangeProtectRules is FullProtectRules for memory ptjit manages in the
// given ranges only: mprotect and pkey_mprotect stop when their range
// overlaps one of them (fullprotect_linux_amd64.go).
func RangeProtectRules(ranges []AddrRange) []Rule {
	when := []Cond{{Arg: 0, Overlaps: ranges}}
	return []Rule{
		{"mprotect", unix.SYS_MPROTECT, when, "memory ptjit manages: every protection change there"},
		{"pkey_mprotect", unix.SYS_PKEY_MPROTECT, when, "as mprotect"},
	}
}

// TraceData is the SECCOMP_RET_DATA of every RET_TRACE in ptjit's filters;
// the kernel hands it to the tracer as the PTRACE_EVENT_SECCOMP event
// message. A seccomp stop with any other message came from a filter the
// program installed itself, which, alone, would have failed the call with
// ENOSYS (no tracer): the tracker does exactly that (classifySeccomp,
// programTrace). When several filters return the same action the most
// recently installed one's data wins (seccomp(2)): a program's filter is
// always newer than ptjit's (installed before the program's execve), so a
// call both trace reports the program's data and fails as alone. The
// value spells "PT" and is one of 65536: a program whose own filter
// returns RET_TRACE|0x5054 is taken for ptjit's and its call runs.
const TraceData = 0x5054

// InjectCookie marks the syscalls ptjit injects into a tracee: their
// sixth argument (r9; the calls ptjit injects take at most five) holds it,
// and every filter ptjit compiles lets such a call run without a seccomp
// stop, so an injected call is one PTRACE_SINGLESTEP over the syscall
// instruction instead of three stops (entry, seccomp, exit). It is random
// per ptjit run: a program cannot read its own seccomp filters (that takes
// ptrace, and ptjit is its tracer), so it cannot make its own calls pass
// unseen, and an r9 left equal by chance is one in 2^64. A zero cookie
// could be any call's leftover r9, so it is never zero.
var InjectCookie = newInjectCookie()

func newInjectCookie() uint64 {
	var b [8]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			panic("tracker: no random bytes for the inject cookie: " + err.Error())
		}
		if c := binary.LittleEndian.Uint64(b[:]); c != 0 && uint32(c) != 0 {
			return c
		}
	}
}

// retTrace is what ptjit's filters return to stop the tracee.
const retTrace = unix.SECCOMP_RET_TRACE | TraceData

// RuleByNr returns the rule for syscall nr.
func RuleByNr(nr int) (Rule, bool) {
	for _, r := range Rules {
		if r.Nr == nr {
			return r, true
		}
	}
	return Rule{}, false
}

// seccomp_data layout (must match struct seccomp_data): nr at 0, arch at
// 4, instruction_pointer at 8, args[6] (u64) at 16. Little-endian, so the
// low half of args[i] is at 16+8*i.
const (
	offNr   = 0
	offArch = 4
	offIP   = 8
	offArgs = 16

	auditArchX8664 = 0xc000003e
	x32SyscallBit  = 0x40000000
)

func stmt(code uint16, k uint32) unix.SockFilter {
	return unix.SockFilter{Code: code, K: k}
}

func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

const (
	retAllow = unix.SECCOMP_RET_ALLOW
	ldW      = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	jeqK     = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	jgeK     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
	jgtK     = unix.BPF_JMP | unix.BPF_JGT | unix.BPF_K
	jgeX     = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_X
	jsetK    = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	retK     = unix.BPF_RET | unix.BPF_K
	jaK      = unix.BPF_JMP | unix.BPF_JA
	ldImm    = unix.BPF_LD | unix.BPF_IMM
	ldMem    = unix.BPF_LD | unix.BPF_MEM
	stMem    = unix.BPF_ST
	tax      = unix.BPF_MISC | unix.BPF_TAX
	addX     = unix.BPF_ALU | unix.BPF_ADD | unix.BPF_X
	andK     = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
	mulK     = unix.BPF_ALU | unix.BPF_MUL | unix.BPF_K
	addK     = unix.BPF_ALU | unix.BPF_ADD | unix.BPF_K
)

// overlapsCode is the code of a Cond.Overlaps on argument arg: it falls
// through when the call's range overlaps none of ranges, and ends in the
// RET TRACE it jumps to otherwise. Scratch words: M0 address low, M1 end
// low, M2 carry, M3 address high, M4 end high.
func overlapsCode(arg int, ranges []AddrRange, size uint64, mul uint32) []unix.SockFilter {
	b := overlapsPrologue(nil, arg, size, mul)
	b = rangeTests(b, ranges)
	b = append(b, stmt(jaK, 1), stmt(retK, retTrace))
	return patchToTrace(b, 0)
}

// toTrace marks, in overlapsPrologue's and rangeTests' code, a jump to
// the RET TRACE their caller puts after them (patchToTrace).
const toTrace = 0xff

// overlapsPrologue appends the first part of a Cond.Overlaps on argument
// arg to b: it leaves the range's address and end in M0 (low), M3 (high), M1 (low)
// and M4 (high), and jumps to toTrace when the end overflows.
func overlapsPrologue(b []unix.SockFilter, arg int, size uint64, mul uint32) []unix.SockFilter {
	lo, hi := uint32(offArgs+8*arg), uint32(offArgs+8*arg+4)
	// end = address + length, 64 bits from 32-bit halves; an overflow
	// stops. The length is args[Arg+1], the constant size, or a count in
	// args[Arg+1] times mul; the last two have no high half (sizes of 4
	// GiB or more take the general path), which saves the filter
	// instructions (it has at most BPF_MAXINSNS).
	b = append(b, stmt(ldW, lo), stmt(stMem, 0))
	noHigh := mul != 0 || size != 0 && size>>32 == 0
	switch {
	case size != 0 && noHigh:
		// end low = address low + size; a carry when it is below size
		b = append(b, stmt(addK, uint32(size)), stmt(stMem, 1), jump(jgeK, uint32(size), 2, 0))
	default:
		b = append(b, stmt(tax, 0), stmt(ldW, uint32(offArgs+8*(arg+1))))
		if size != 0 {
			b[len(b)-1] = stmt(ldImm, uint32(size))
		}
		if mul != 0 {
			b = append(b, stmt(mulK, mul))
		}
		b = append(b, stmt(addX, 0), stmt(stMem, 1), jump(jgeX, 0, 2, 0)) // end low >= address low: no carry
	}
	b = append(b,
		stmt(ldImm, 1), stmt(jaK, 1),
		stmt(ldImm, 0),
		stmt(stMem, 2),
		stmt(ldW, hi), stmt(stMem, 3), stmt(tax, 0))
	if !noHigh {
		hiLen := stmt(ldW, uint32(offArgs+8*(arg+1)+4))
		if size != 0 {
			hiLen = stmt(ldImm, uint32(size>>32))
		}
		b = append(b, hiLen, stmt(addX, 0),
			jump(jgeX, 0, 0, toTrace), // the high halves overflow
			stmt(tax, 0))
	}
	return append(b, stmt(ldMem, 2), stmt(addX, 0),
		jump(jgeX, 0, 0, toTrace), // the carry overflows
		stmt(stMem, 4),
	)
}

// rangeTests appends to b the tests of the range overlapsPrologue left in
// M0, M1, M3 and M4 against each of ranges: they jump to toTrace on an
// overlap and fall through after the last.
func rangeTests(b []unix.SockFilter, ranges []AddrRange) []unix.SockFilter {
	for _, r := range ranges {
		// next: the first instruction of the next range's test
		// address < r.Hi, then end > r.Lo
		b = append(b,
			stmt(ldMem, 3),
			jump(jgtK, uint32(r.Hi>>32), 8, 0), // address high > Hi high: next
			jump(jeqK, uint32(r.Hi>>32), 0, 2), // address high < Hi high: on to end > Lo
			stmt(ldMem, 0),
			jump(jgeK, uint32(r.Hi), 5, 0), // address >= Hi: next
			stmt(ldMem, 4),
			jump(jgtK, uint32(r.Lo>>32), toTrace, 0),
			jump(jeqK, uint32(r.Lo>>32), 0, 2), // end high < Lo high: next
			stmt(ldMem, 1),
			jump(jgtK, uint32(r.Lo), toTrace, 0),
		)
	}
	return b
}

// patchToTrace points the toTrace jumps of b[from:] at b's last
// instruction, a RET TRACE.
func patchToTrace(b []unix.SockFilter, from int) []unix.SockFilter {
	end := len(b) - 1
	for i := from; i < len(b); i++ {
		if b[i].Code&0x07 == unix.BPF_JMP && b[i].Code != jaK {
			if b[i].Jt == toTrace {
				b[i].Jt = uint8(end - i - 1)
			}
			if b[i].Jf == toTrace {
				b[i].Jf = uint8(end - i - 1)
			}
		}
	}
	return b
}

// compiler builds the rule blocks of a filter (Compile). Two things keep
// the filter short, which matters because the kernel checks and JITs
// every instruction when a filter is added (about 0.3 µs each here: the
// kernel-write filter, 85 rules, was 3,626 instructions and took 1.2–1.4
// ms to inject into a stopped thread): the range tests of a rule's last
// Cond.Overlaps are emitted once per distinct list of ranges and shared
// by every rule that ends in one, and identical rule blocks (calls whose
// arguments are tested alike) are emitted once.
type compiler struct {
	blocks [][]unix.SockFilter
	refs   [][]sharedRef // per block: its jumps to a shared range test
	tests  [][]AddrRange // the distinct range lists of the shared tests
	start  []int         // per rule: its block's index in the program
}

// sharedRef is a JA at index at of a block whose target is the shared
// range test tests[test] (its offset is set once the tests are placed).
type sharedRef struct{ at, test int }

// rule appends r's block.
func (c *compiler) rule(r Rule) error {
	b := make([]unix.SockFilter, 0, 32)
	var refs []sharedRef
	for i, cd := range r.When {
		if cd.Arg < 0 || cd.Arg > 5 {
			return fmt.Errorf("seccomp rule %s: argument %d out of range", r.Name, cd.Arg)
		}
		if len(cd.Overlaps) > 0 {
			if cd.Arg > 4 && cd.Size == 0 || len(cd.Overlaps) > maxOverlaps {
				return fmt.Errorf("seccomp rule %s: %d ranges on argument %d", r.Name, len(cd.Overlaps), cd.Arg)
			}
			if i < len(r.When)-1 {
				b = append(b, overlapsCode(cd.Arg, cd.Overlaps, cd.Size, cd.Mul)...)
				continue
			}
			// the last condition: its prologue, then a JA to the shared
			// tests, which end the rule (ALLOW or TRACE)
			from := len(b)
			b = overlapsPrologue(b, cd.Arg, cd.Size, cd.Mul)
			test := c.test(cd.Overlaps)
			b = patchToTrace(append(b, stmt(jaK, uint32(test)), stmt(retK, retTrace)), from)
			refs = append(refs, sharedRef{len(b) - 2, test})
			c.blocks = append(c.blocks, b)
			c.refs = append(c.refs, refs)
			return nil
		}
		b = append(b, stmt(ldW, uint32(offArgs+8*cd.Arg)))
		switch {
		case cd.AnyBit != 0:
			b = append(b, jump(jsetK, cd.AnyBit, 0, 1), stmt(retK, retTrace))
		case cd.AllBits != 0:
			b = append(b, stmt(andK, cd.AllBits), jump(jeqK, cd.AllBits, 0, 1), stmt(retK, retTrace))
		case len(cd.Equal) > 0:
			// jeq v → the RET TRACE after the jeqs; none → jump over it
			n := len(cd.Equal)
			for i, v := range cd.Equal {
				b = append(b, jump(jeqK, v, uint8(n-i), 0))
			}
			b = append(b, stmt(jaK, 1), stmt(retK, retTrace))
		case len(cd.Except) > 0:
			// jeq v → skip to the "not this condition" exit
			n := len(cd.Except)
			for i, v := range cd.Except {
				b = append(b, jump(jeqK, v, uint8(n-i), 0))
			}
			b = append(b, stmt(retK, retTrace))
		default:
			return fmt.Errorf("seccomp rule %s: empty condition", r.Name)
		}
	}
	ret := uint32(retAllow)
	if len(r.When) == 0 {
		ret = retTrace
	}
	c.blocks = append(c.blocks, append(b, stmt(retK, ret)))
	c.refs = append(c.refs, refs)
	return nil
}

// test is the index of the shared range test of ranges.
func (c *compiler) test(ranges []AddrRange) int {
	for i, t := range c.tests {
		if slices.Equal(t, ranges) {
			return i
		}
	}
	c.tests = append(c.tests, ranges)
	return len(c.tests) - 1
}

// place appends the blocks to prog, each distinct one once, then the
// shared range tests, and points the blocks' jumps at those; c.start is
// each rule's block's index.
func (c *compiler) place(prog []unix.SockFilter) []unix.SockFilter {
	c.start = make([]int, len(c.blocks))
	placed := make(map[string]int, len(c.blocks))
	var jumps []sharedRef // at: an index in prog
	var buf []byte
	for i, b := range c.blocks {
		buf = appendFilterBytes(buf[:0], b)
		key := string(buf)
		if at, ok := placed[key]; ok {
			c.start[i] = at
			continue
		}
		c.start[i], placed[key] = len(prog), len(prog)
		for _, r := range c.refs[i] {
			jumps = append(jumps, sharedRef{len(prog) + r.at, r.test})
		}
		prog = append(prog, b...)
	}
	testAt := make([]int, len(c.tests))
	for i, ranges := range c.tests {
		testAt[i] = len(prog)
		from := len(prog)
		prog = patchToTrace(append(rangeTests(prog, ranges), stmt(retK, retAllow), stmt(retK, retTrace)), from)
	}
	for _, j := range jumps {
		prog[j.at].K = uint32(testAt[j.test] - j.at - 1)
	}
	return prog
}

// Compile turns rules into a classic BPF seccomp program:
//
//	arch != x86_64           → TRACE (an i386 int 0x80 call: be safe)
//	nr has the x32 bit       → TRACE
//	nr == rule.Nr            → rule block
//	otherwise                → ALLOW
//
// and a rule block's TRACE becomes ALLOW when args[5] == InjectCookie (a
// call ptjit injects).
//
// A rule block tests its conditions in order and ends in its own RET, so
// every jump is short and forward.
func Compile(rules []Rule) ([]unix.SockFilter, error) {
	var c compiler
	for _, r := range rules {
		if err := c.rule(r); err != nil {
			return nil, err
		}
	}
	prog := []unix.SockFilter{
		stmt(ldW, offArch),
		jump(jeqK, auditArchX8664, 1, 0),
		stmt(retK, retTrace),
		stmt(ldW, offNr),
		jump(jgeK, x32SyscallBit, 0, 1),
		stmt(retK, retTrace),
	}
	dispatch := len(prog) // the header's TRACEs stay (no cookie for i386 or x32)
	// Dispatch: a binary search on the syscall number (dispatchTree), so
	// that a call no rule names costs a few comparisons however many
	// rules there are (a process may carry several filters, each run on
	// every call); each leaf jumps to its rule's block with a JA, whose
	// offset has 32 bits.
	order := make([]int, len(rules))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return rules[a].Nr - rules[b].Nr })
	for i := 1; i < len(order); i++ {
		if rules[order[i]].Nr == rules[order[i-1]].Nr {
			return nil, fmt.Errorf("seccomp rules %s and %s: the same syscall %d", rules[order[i-1]].Name, rules[order[i]].Name, rules[order[i]].Nr)
		}
	}
	tree, toBlock := dispatchTree(rules, order)
	prog = append(prog, tree...)
	prog = c.place(prog)
	for at, rule := range toBlock {
		prog[dispatch+at].K = uint32(c.start[rule] - (dispatch + at) - 1)
	}
	// Every rule's RET TRACE jumps to one tail that lets a call ptjit
	// injected (InjectCookie in its sixth argument) run instead: the
	// calls no rule stops never load the argument.
	tail := uint32(len(prog))
	for i := dispatch; i < len(prog); i++ {
		if prog[i] == stmt(retK, retTrace) {
			prog[i] = stmt(jaK, tail-uint32(i)-1)
		}
	}
	prog = append(prog,
		stmt(ldW, offArgs+8*5),
		jump(jeqK, uint32(InjectCookie), 0, 2),
		stmt(ldW, offArgs+8*5+4),
		jump(jeqK, uint32(InjectCookie>>32), 1, 0),
		stmt(retK, retTrace),
		stmt(retK, retAllow),
	)
	return prog, nil
}

// dispatchLeaf: at most this many rules are tested one by one.
const dispatchLeaf = 4

// dispatchTree is the dispatch code for rules in order (their indices,
// by syscall number): for a subtree of more than dispatchLeaf rules, a
// JGE on the middle rule's number that jumps to its upper half's code (a
// JA, so any distance), else its lower half; a leaf compares each
// number in turn and jumps to the rule's block, or returns ALLOW. toBlock
// maps each leaf's JA (its index in the code) to its rule, for the
// caller to set its offset once the blocks are placed.
func dispatchTree(rules []Rule, order []int) ([]unix.SockFilter, map[int]int) {
	var code []unix.SockFilter
	toBlock := map[int]int{}
	var emit func(o []int)
	emit = func(o []int) {
		if len(o) <= dispatchLeaf {
			for _, r := range o {
				code = append(code, jump(jeqK, uint32(rules[r].Nr), 0, 1))
				toBlock[len(code)] = r
				code = append(code, stmt(jaK, 0))
			}
			code = append(code, stmt(retK, retAllow))
			return
		}
		mid := len(o) / 2
		code = append(code, jump(jgeK, uint32(rules[o[mid]].Nr), 0, 1))
		ja := len(code)
		code = append(code, stmt(jaK, 0))
		emit(o[:mid])
		code[ja].K = uint32(len(code) - ja - 1)
		emit(o[mid:])
	}
	emit(order)
	return code, toBlock
}

// FilterBytes is prog as the kernel reads a struct sock_filter array
// (u16 code, u8 jt, u8 jf, u32 k, little-endian): what ptjit hands the
// launcher helper and writes into a tracee for an injected filter.
func FilterBytes(prog []unix.SockFilter) []byte {
	return appendFilterBytes(make([]byte, 0, 8*len(prog)), prog)
}

func appendFilterBytes(b []byte, prog []unix.SockFilter) []byte {
	for _, in := range prog {
		b = binary.LittleEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.LittleEndian.AppendUint32(b, in.K)
	}
	return b
}
