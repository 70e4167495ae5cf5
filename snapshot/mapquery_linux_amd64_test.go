package snapshot

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestQueryMap: every mapping of a process, asked of the kernel by its
// first and last address, is the mapping its /proc/PID/maps line gives;
// an address in no mapping fails with ENOENT. The process maps a memfd
// and a file it then removes, whose names (" (deleted)") a maps line and
// the query must agree on.
func TestQueryMap(t *testing.T) {
	if _, err := QueryMap(os.Getpid(), 0); errors.Is(err, ErrNoQuery) {
		t.Skipf("kernel %s: %v (Linux 6.11+)", kernelRelease(), err)
	}
	fd, err := unix.MemfdCreate("ptjit query", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 2*4096); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(fd, 0, 2*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	gone := filepath.Join(t.TempDir(), "gone file")
	if err := os.WriteFile(gone, make([]byte, 3*4096), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(gone)
	if err != nil {
		t.Fatal(err)
	}
	fm, err := unix.Mmap(int(f.Fd()), 4096, 2*4096, unix.PROT_READ, unix.MAP_PRIVATE)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(fm)
	os.Remove(gone)

	child := exec.Command("sleep", "30")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()

	for _, pid := range []int{os.Getpid(), child.Process.Pid} {
		maps, err := ReadMaps(pid)
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for i, m := range maps {
			names[m.Path] = true
			if m.Path == "[vsyscall]" {
				continue // the kernel's gate area: in the maps file, no mapping of the process's (ENOENT)
			}
			for _, addr := range []uint64{m.Start, m.End - 1, m.Start + m.Size()/2} {
				got, err := QueryMap(pid, addr)
				if err != nil {
					t.Fatalf("pid %d %#x: %v", pid, addr, err)
				}
				if got != m {
					t.Errorf("pid %d %#x:\n query %+v\n maps  %+v", pid, addr, got, m)
				}
			}
			if i+1 < len(maps) && maps[i+1].Start > m.End {
				if _, err := QueryMap(pid, m.End); !errors.Is(err, unix.ENOENT) {
					t.Errorf("pid %d %#x, between mappings: %v, want ENOENT", pid, m.End, err)
				}
			}
		}
		if pid == os.Getpid() && (!names["/memfd:ptjit query (deleted)"] || !names[gone+" (deleted)"]) {
			t.Errorf("the memfd and the removed file are not among the mappings' names: %v", names)
		}
	}
}

func kernelRelease() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}
