package tracker

// Table tests of small functions of the W^X paths: kwRange (the
// kernel-write filters' ranges), installsFilter (a seccomp filter of the
// program's), insnText (the write log's instruction text).

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// TestKWRange: the kernel-write filters of a process cover the code's
// mapping exactly for the first kwExactFilters, 16 MiB grains after, and
// the last of maxRangeFilters every address; a range the Space does not
// hold (a writable alias's) is taken as it is.
func TestKWRange(t *testing.T) {
	const rwx = unix.PROT_READ | unix.PROT_WRITE | unix.PROT_EXEC
	sp := &space{Space: NewSpace(&logSink{})}
	// an 8 MiB JIT area at 0x7f0000400000, a page at 0x7f0002000000
	sp.Map(0x7f0000400000, 0x7f0000c00000, rwx, nil, why("test"))
	sp.Map(0x7f0002000000, 0x7f0002001000, rwx, nil, why("test"))
	p := &process{space: sp}
	grain := ival{0x7f0000000000, 0x7f0001000000}
	cases := []struct {
		name   string
		kw     int // filters the process has
		lo, hi uint64
		want   ival
	}{
		{"a page of the JIT area: the area", 0, 0x7f0000801000, 0x7f0000802000, ival{0x7f0000400000, 0x7f0000c00000}},
		{"the lone page", 1, 0x7f0002000000, 0x7f0002001000, ival{0x7f0002000000, 0x7f0002001000}},
		{"a write-protected alias, not in the Space", 0, 0x7f0004000010, 0x7f0004200000, ival{0x7f0004000000, 0x7f0004200000}},
		{"past kwExactFilters: the grain", kwExactFilters, 0x7f0000801000, 0x7f0000802000, grain},
		{"the last of the budget: every address", maxRangeFilters - 1, 0x7f0000801000, 0x7f0000802000, everyAddr},
		{"a range across two regions: as it is", 0, 0x7f0000bff000, 0x7f0002001000, ival{0x7f0000bff000, 0x7f0002001000}},
	}
	for _, c := range cases {
		p.full.kw = make([]ival, c.kw)
		if got := kwRange(p, c.lo, c.hi); got != c.want {
			t.Errorf("%s: kwRange(%#x, %#x) = [%#x, %#x), want [%#x, %#x)", c.name, c.lo, c.hi, got.s, got.e, c.want.s, c.want.e)
		}
	}
}

// TestInstallsFilter: the calls the own-filter handling takes for a
// filter's installation, and those it leaves alone.
func TestInstallsFilter(t *testing.T) {
	cases := []struct {
		nr   int
		args [6]uint64
		want bool
	}{
		{unix.SYS_SECCOMP, [6]uint64{unix.SECCOMP_SET_MODE_FILTER}, true},
		{unix.SYS_SECCOMP, [6]uint64{unix.SECCOMP_SET_MODE_STRICT}, false},
		{unix.SYS_SECCOMP, [6]uint64{unix.SECCOMP_GET_NOTIF_SIZES}, false},
		{unix.SYS_PRCTL, [6]uint64{unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER}, true},
		{unix.SYS_PRCTL, [6]uint64{unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_STRICT}, false},
		{unix.SYS_PRCTL, [6]uint64{unix.PR_GET_SECCOMP}, false},
		{unix.SYS_MPROTECT, [6]uint64{unix.SECCOMP_SET_MODE_FILTER}, false},
	}
	for _, c := range cases {
		if got := installsFilter(&pendingOp{nr: c.nr, args: c.args}); got != c.want {
			t.Errorf("installsFilter(%d, %v) = %v, want %v", c.nr, c.args[:2], got, c.want)
		}
	}
}

// TestInsnText: the write log's text of a VEX store, which x86asm does not
// decode, comes from ptjit's own decoder (read from this process's
// memory); x86asm's for the rest.
func TestInsnText(t *testing.T) {
	code := []byte{0xc5, 0xfe, 0x7f, 0x07, 0x48, 0x89, 0x02, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90}
	ip := uint64(uintptr(unsafe.Pointer(&code[0])))
	if got, want := insnText(os.Getpid(), x86asm.Inst{Len: 4}, ip), "vmovdqu %ymm0,(%rdi)"; got != want {
		t.Errorf("VEX store: %q, want %q", got, want)
	}
	in, err := x86asm.Decode(code[4:], 64)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := insnText(os.Getpid(), in, ip+4), "mov %rax,(%rdx)"; got != want {
		t.Errorf("mov: %q, want %q", got, want)
	}
}
