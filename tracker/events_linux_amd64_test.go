package tracker

import (
	"reflect"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLaunchRulesBPF checks the launch filter with BPF events: the calls
// the ring buffer reports run without a stop, the ones an entry rewrite
// or a stopped thread needs still stop, and the seccomp mode's filter is
// Rules unchanged.
func TestLaunchRulesBPF(t *testing.T) {
	if !reflect.DeepEqual(LaunchRules(EventsSeccomp), Rules) {
		t.Fatal("LaunchRules(seccomp) is not Rules")
	}
	prog, err := Compile(LaunchRules(EventsBPF))
	if err != nil {
		t.Fatal(err)
	}
	const (
		rw  = unix.PROT_READ | unix.PROT_WRITE
		rx  = unix.PROT_READ | unix.PROT_EXEC
		rwx = rw | unix.PROT_EXEC
	)
	priv := uint64(unix.MAP_PRIVATE | unix.MAP_ANONYMOUS)
	checkStops(t, prog, []stopCase{
		{"mprotect RX", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, rx}, false},
		{"mprotect X", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_EXEC}, false},
		{"mprotect RW", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, rw}, false},
		{"mprotect WX", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, unix.PROT_WRITE | unix.PROT_EXEC}, true},
		{"mprotect RWX", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, rwx}, true},
		{"mprotect RX|GROWSDOWN", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, rx | protGrowsdown}, true},
		{"mprotect RWX high bits", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, rwx | 1<<40}, true},
		{"pkey_mprotect RX", unix.SYS_PKEY_MPROTECT, [6]uint64{0x10000, 4096, rx, 1}, false},
		{"pkey_mprotect RWX", unix.SYS_PKEY_MPROTECT, [6]uint64{0x10000, 4096, rwx, 1}, true},
		{"mmap RX private", unix.SYS_MMAP, [6]uint64{0, 4096, rx, priv}, false},
		{"mmap RX FIXED", unix.SYS_MMAP, [6]uint64{0x10000, 4096, rx, priv | unix.MAP_FIXED}, false},
		{"mmap RWX private", unix.SYS_MMAP, [6]uint64{0, 4096, rwx, priv}, true},
		{"mmap RW shared", unix.SYS_MMAP, [6]uint64{0, 4096, rw, unix.MAP_SHARED}, true},
		{"munmap", unix.SYS_MUNMAP, [6]uint64{0x10000, 4096}, false},
		{"mremap", unix.SYS_MREMAP, [6]uint64{0x10000, 4096, 8192}, true},
		{"brk", unix.SYS_BRK, [6]uint64{0}, true},
		{"madvise DONTNEED", unix.SYS_MADVISE, [6]uint64{0x10000, 4096, unix.MADV_DONTNEED}, true},
		{"injected mprotect RWX", unix.SYS_MPROTECT, [6]uint64{0x10000, 4096, rwx, 0, 0, InjectCookie}, false},
	})
	if _, err := Compile(AliasRules); err != nil {
		t.Fatal(err)
	}
}

// TestAliasRangeRules: a process with a shared file mapping stops the
// calls that can change that mapping (and so an alias or its executable
// twin), and no call elsewhere: with BPF events, java's ~250 mprotects of
// its heap and stacks beside its one shared file (hsperfdata) run without
// a stop.
func TestAliasRangeRules(t *testing.T) {
	const lo, hi = 0x7f0000010000, 0x7f0000018000
	prog, err := Compile(AliasRangeRules([]AddrRange{{lo, hi}}))
	if err != nil {
		t.Fatal(err)
	}
	const (
		rw = unix.PROT_READ | unix.PROT_WRITE
		rx = unix.PROT_READ | unix.PROT_EXEC
	)
	fixed := uint64(unix.MAP_PRIVATE | unix.MAP_ANONYMOUS | unix.MAP_FIXED)
	checkStops(t, prog, []stopCase{
		{"mprotect RX of the view", unix.SYS_MPROTECT, [6]uint64{lo, 4096, rx}, true},
		{"mprotect RW of the view's last page", unix.SYS_MPROTECT, [6]uint64{hi - 4096, 4096, rw}, true},
		{"mprotect over the view", unix.SYS_MPROTECT, [6]uint64{lo - 0x100000, 0x200000, unix.PROT_READ}, true},
		{"mprotect RW elsewhere", unix.SYS_MPROTECT, [6]uint64{0x7f0000100000, 0x10000, rw}, false},
		{"mprotect RX elsewhere", unix.SYS_MPROTECT, [6]uint64{0x7f0000100000, 0x10000, rx}, false},
		{"mprotect just below", unix.SYS_MPROTECT, [6]uint64{lo - 4096, 4096, rw}, false},
		{"mprotect just above", unix.SYS_MPROTECT, [6]uint64{hi, 4096, rw}, false},
		{"pkey_mprotect of the view", unix.SYS_PKEY_MPROTECT, [6]uint64{lo, 4096, rx, 1}, true},
		{"munmap of the view", unix.SYS_MUNMAP, [6]uint64{lo, hi - lo}, true},
		{"munmap elsewhere", unix.SYS_MUNMAP, [6]uint64{0x7f0000100000, 4096}, false},
		{"MAP_FIXED mmap over the view", unix.SYS_MMAP, [6]uint64{lo + 4096, 4096, rx, fixed}, true},
		{"mmap, address the kernel picks", unix.SYS_MMAP, [6]uint64{0, 1 << 20, rw, fixed &^ unix.MAP_FIXED}, false},
		{"brk", unix.SYS_BRK, [6]uint64{0x1000000}, false},
	})
}

// stopCase is a call and whether a filter should stop it.
type stopCase struct {
	name string
	nr   int
	args [6]uint64
	stop bool
}

// checkStops runs each case through the x86-64 filter prog.
func checkStops(t *testing.T, prog []unix.SockFilter, cases []stopCase) {
	t.Helper()
	const x86 = 0xc000003e
	for _, c := range cases {
		ret, err := evalFilter(prog, x86, c.nr, c.args)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if stop := ret == retTrace; stop != c.stop {
			t.Errorf("%s: stops %v, want %v", c.name, stop, c.stop)
		}
	}
}

// TestImage: versions are taken from an event's bytes only inside them.
func TestImage(t *testing.T) {
	m := &image{addr: 0x1000, b: []byte{1, 2, 3, 4, 5, 6, 7, 8}}
	if !m.covers(0x1000, 0x1008) || !m.covers(0x1002, 0x1004) || m.covers(0xfff, 0x1004) || m.covers(0x1004, 0x1009) {
		t.Error("covers")
	}
	var nilImage *image
	if nilImage.covers(0, 0) {
		t.Error("a nil image covers nothing")
	}
	b := make([]byte, 3)
	if err := m.read(0x1002, b); err != nil || !reflect.DeepEqual(b, []byte{3, 4, 5}) {
		t.Errorf("read: %v %v", b, err)
	}
	if err := m.read(0x1007, b); err == nil {
		t.Error("read past the end")
	}
}
