package snapshot

import (
	"bytes"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"golang.org/x/sys/unix"
)

func TestParseMaps(t *testing.T) {
	text := `00400000-00452000 r-xp 00000000 fd:01 1234                               /usr/bin/a b
7f0000000000-7f0000001000 rw-s 00001000 00:05 99 /memfd:jit (deleted)
7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0                          [vdso]
7ffd00000000-7ffd00001000 ---p 00000000 00:00 0
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]
`
	ms, err := ParseMaps("maps", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []Mapping{
		{0x400000, 0x452000, unix.PROT_READ | unix.PROT_EXEC, false, 0, unix.Mkdev(0xfd, 1), 1234, "/usr/bin/a b"},
		{0x7f0000000000, 0x7f0000001000, unix.PROT_READ | unix.PROT_WRITE, true, 0x1000, unix.Mkdev(0, 5), 99, "/memfd:jit (deleted)"},
		{0x7ffc00000000, 0x7ffc00002000, unix.PROT_READ | unix.PROT_EXEC, false, 0, 0, 0, "[vdso]"},
		{0x7ffd00000000, 0x7ffd00001000, 0, false, 0, 0, 0, ""},
		{0xffffffffff600000, 0xffffffffff601000, unix.PROT_EXEC, false, 0, 0, 0, "[vsyscall]"},
	}
	if len(ms) != len(want) {
		t.Fatalf("%d mappings, want %d", len(ms), len(want))
	}
	for i := range want {
		if ms[i] != want[i] {
			t.Errorf("line %d:\n got %+v\nwant %+v", i+1, ms[i], want[i])
		}
	}
	if !ms[0].IsFile() || ms[1].IsFile() || ms[2].IsFile() {
		t.Errorf("IsFile: %v %v %v, want true false false", ms[0].IsFile(), ms[1].IsFile(), ms[2].IsFile())
	}
	for _, bad := range []string{"zz-10 r-xp 0 00:00 0", "10-20 r-xp 0 00:00", "20-10 r-xp 0 00:00 0", "10-20 r-xp 0 0000 0"} {
		if _, err := ParseMaps("maps", []byte("00400000-00401000 r--p 0 00:00 0\n"+bad+"\n")); err == nil {
			t.Errorf("%q: no error", bad)
		} else if me, ok := err.(*MapsError); !ok || me.Line != 2 {
			t.Errorf("%q: error %v, want a MapsError on line 2", bad, err)
		}
	}
	// Our own maps parse, and hold our text.
	self, err := ReadMaps(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	found := false
	for _, m := range self {
		if m.Path == exe && m.Prot&unix.PROT_EXEC != 0 {
			found = true
		}
	}
	if !found {
		t.Errorf("no executable mapping of %s in our own maps", exe)
	}
}

// TestReadMem reads a child's memory, including an execute-only page that
// process_vm_readv refuses (the /proc/PID/mem fallback).
func TestReadMem(t *testing.T) {
	// Our own process stands in for a tracee: both paths work on any
	// process we may ptrace-read.
	b, err := unix.Mmap(-1, 0, 8192, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	for i := range b {
		b[i] = byte(i * 7)
	}
	addr := addrOf(b)
	want := append([]byte(nil), b...)
	got := make([]byte, len(b))
	if err := ReadMem(os.Getpid(), addr, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("readable pages: err %v, equal %v", err, bytes.Equal(got, want))
	}
	if err := unix.Mprotect(b, unix.PROT_EXEC); err != nil {
		t.Fatal(err)
	}
	got = make([]byte, len(b))
	if err := ReadMem(os.Getpid(), addr, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("execute-only pages: err %v, equal %v", err, bytes.Equal(got, want))
	}
	unix.Mprotect(b, unix.PROT_READ|unix.PROT_WRITE)
	// Unmapped memory is an error naming pid and address.
	if err := ReadMem(os.Getpid(), 0x1000, got[:16]); err == nil {
		t.Fatal("reading page 1: no error")
	} else if re, ok := err.(*ReadError); !ok || re.Addr != 0x1000 {
		t.Fatalf("reading page 1: %v", err)
	}
}

// TestBuildID compares with readelf -n, the independent truth.
func TestBuildID(t *testing.T) {
	path, err := exec.LookPath("readelf")
	if err != nil {
		t.Fatal("readelf not installed (binutils; .ci/run installs it)")
	}
	checked := 0
	for _, bin := range []string{"/bin/true", testenv.SystemLibc(t)} {
		t.Run(filepath.Base(bin), func(t *testing.T) {
			out, err := exec.Command(path, "-n", bin).Output()
			if err != nil {
				t.Fatalf("readelf -n %s: %v", bin, err)
			}
			var st unix.Stat_t
			if err := unix.Stat(bin, &st); err != nil {
				t.Fatal(err)
			}
			got := hex.EncodeToString(BuildID(bin, st.Dev, st.Ino))
			m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
			if m == nil {
				// This file has no build ID: then BuildID must say none.
				if got != "" {
					t.Errorf("%s: build ID %s, readelf shows none", bin, got)
				}
				return
			}
			checked++
			if got != string(m[1]) {
				t.Errorf("%s: build ID %s, readelf says %s", bin, got, m[1])
			}
		})
	}
	if checked == 0 {
		t.Error("neither /bin/true nor libc has a build ID: nothing was compared")
	}
	if id := BuildID("/etc/passwd", 1, 1); id != nil {
		t.Errorf("/etc/passwd: build ID %x", id)
	}
}
