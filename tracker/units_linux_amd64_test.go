package tracker

// Table tests of small functions of the W^X paths: kwRange (the
// kernel-write filters' ranges), installsFilter (a seccomp filter of the
// program's), insnText (the write log's instruction text).

import (
	"os"
	"path/filepath"
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

// TestFileReadable: an executable mapping is read from its file when the
// file is still at its name with the mapped inode: also a live file whose
// own name ends in " (deleted)", the kernel's mark of a removed file, which
// the mapping of a removed file carries and then fails.
func TestFileReadable(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name           string
		remove, readOK bool
	}{
		{"code", false, true},
		{"code (deleted)", false, true},
		{"gone", true, false},
		{"gone (deleted)", true, false},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, make([]byte, 4096), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		b, err := unix.Mmap(int(f.Fd()), 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if tc.remove {
			os.Remove(path)
		}
		m, ok := mapAt(os.Getpid(), uint64(uintptr(unsafe.Pointer(&b[0]))))
		if !ok {
			t.Fatalf("%s: mapping not found", tc.name)
		}
		if got := fileReadable(m); got != tc.readOK {
			t.Errorf("%q mapped as %q: readable %v, want %v", tc.name, m.Path, got, tc.readOK)
		}
		unix.Munmap(b)
	}
}
