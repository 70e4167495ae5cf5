package tracker_test

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/tracker"
	"golang.org/x/sys/unix"
)

// TestFilterStops runs sysprobe (testdata/sysprobe.c) under the tracker:
// exactly the calls the filter must stop stop, and the RWX buffer it
// writes into with process_vm_writev gets a new version.
func TestFilterStops(t *testing.T) {
	tr := trace(t, tracker.PinOff, cprog(t, "sysprobe"))
	if tr.res.Status != 0 || !strings.HasPrefix(tr.stdout, "ok ") {
		t.Fatalf("sysprobe: status %d, stdout %q", tr.res.Status, tr.stdout)
	}
	f := strings.Fields(tr.stdout)
	rwxAddr, _ := strconv.ParseUint(f[3], 0, 64)
	pid := 0
	procs, err := tr.db.Processes()
	if err != nil || len(procs) != 1 {
		t.Fatalf("processes: %v %v", procs, err)
	}
	pid = procs[0].PID
	seen := map[string]bool{}
	for _, s := range tr.stops {
		if s.PID != pid {
			continue
		}
		r, _ := tracker.RuleByNr(s.Nr)
		seen[fmt.Sprintf("%s %#x", r.Name, s.Args[1])] = true
		if s.Nr == unix.SYS_PROCESS_VM_WRITEV {
			seen["process_vm_writev"] = true
		}
	}
	for _, c := range []struct {
		call string
		stop bool
	}{
		{"mmap 0x11000", false},
		{"mmap 0x30000", false},
		{"mmap 0x12000", true},
		{"mmap 0x13000", true},
		{"mmap 0x14000", false},
		{"mprotect 0x15000", false},
		{"mprotect 0x7000", true},
		{"madvise 0x16000", false},
		{"madvise 0x17000", true},
		{"munmap 0x18000", true},
		{"madvise 0x19000", true},
		{"mmap 0x1a000", true},
		{"process_vm_writev", true},
	} {
		if seen[c.call] != c.stop {
			t.Errorf("%s: stopped %v, want %v", c.call, seen[c.call], c.stop)
		}
	}
	// The RWX buffer: one version at mmap (zeros), one after the write.
	vs, err := tr.db.Versions(db.VersionFilter{PID: pid, Addr: rwxAddr + 0x1000, HasAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	var causes []string
	for _, v := range vs {
		causes = append(causes, v.Cause)
	}
	if strings.Join(causes, ",") != "mmap,process_vm_writev" {
		t.Fatalf("versions at %#x: %v", rwxAddr+0x1000, causes)
	}
	zero := sha256.Sum256(make([]byte, 0x1a000))
	if string(vs[0].SHA256) != string(zero[:]) || vs[0].Size != 0x1a000 {
		t.Errorf("first version: size %#x sha %x, want zeros", vs[0].Size, vs[0].SHA256)
	}
	data, err := tr.db.VersionData(&vs[1])
	if err != nil {
		t.Fatal(err)
	}
	if off := rwxAddr + 0x1000 - vs[1].Addr; data[off] != 0xc3 {
		t.Errorf("byte written by process_vm_writev: %#x in the recorded version, want 0xc3", data[off])
	}
	_ = clock.Now
}
