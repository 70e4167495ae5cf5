package snapshot

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

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
		// A process still starting (ld.so's RELRO mprotect splits a
		// mapping) or growing its heap changes its mappings between the
		// maps read and the queries: a round counts only where the maps
		// file reads the same before and after it.
		var problems []string
		var names map[string]bool
		stable := false
		for round := 0; round < 50 && !stable; round++ {
			if round > 0 {
				time.Sleep(20 * time.Millisecond)
			}
			maps, err := ReadMaps(pid)
			if err != nil {
				t.Fatal(err)
			}
			problems, names = queryAll(pid, maps)
			after, err := ReadMaps(pid)
			if err != nil {
				t.Fatal(err)
			}
			stable = reflect.DeepEqual(maps, after)
		}
		if !stable {
			t.Fatalf("pid %d: the mappings changed during each of 50 rounds", pid)
		}
		for _, p := range problems {
			t.Error(p)
		}
		if pid == os.Getpid() && (!names["/memfd:ptjit query (deleted)"] || !names[gone+" (deleted)"]) {
			t.Errorf("the memfd and the removed file are not among the mappings' names: %v", names)
		}
	}
}

// queryAll asks the kernel for each mapping of maps by its first, middle
// and last address and for the gap after it, and says where the answer
// differs from the maps line.
func queryAll(pid int, maps []Mapping) (problems []string, names map[string]bool) {
	names = map[string]bool{}
	for i, m := range maps {
		names[m.Path] = true
		if m.Path == "[vsyscall]" {
			continue // the kernel's gate area: in the maps file, no mapping of the process's (ENOENT)
		}
		for _, addr := range []uint64{m.Start, m.End - 1, m.Start + m.Size()/2} {
			got, err := QueryMap(pid, addr)
			if err != nil {
				problems = append(problems, fmt.Sprintf("pid %d %#x: %v", pid, addr, err))
				continue
			}
			if got != m {
				problems = append(problems, fmt.Sprintf("pid %d %#x:\n query %+v\n maps  %+v", pid, addr, got, m))
			}
		}
		if i+1 < len(maps) && maps[i+1].Start > m.End {
			if _, err := QueryMap(pid, m.End); !errors.Is(err, unix.ENOENT) {
				problems = append(problems, fmt.Sprintf("pid %d %#x, between mappings: %v, want ENOENT", pid, m.End, err))
			}
		}
	}
	return problems, names
}

func kernelRelease() string {
	var u unix.Utsname
	unix.Uname(&u)
	return unix.ByteSliceToString(u.Release[:])
}
