package tracker_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/tracker"
)

// TestFamily: threads, fork, vfork+exec and exec are all followed; every
// code buffer the program reports (testdata/family.c) is recorded once,
// under the right process and thread, with the right bytes; a forked
// child's inherited code is recorded with cause "fork".
func TestFamily(t *testing.T) {
	for _, pin := range []tracker.PinMode{tracker.PinOff, tracker.PinOn} {
		t.Run(string(pin), func(t *testing.T) { testFamily(t, pin) })
	}
}

func testFamily(t *testing.T, pin tracker.PinMode) {
	prog := cprog(t, "family")
	tr := trace(t, pin, prog)
	if tr.res.Status != 0 {
		t.Fatalf("status %d", tr.res.Status)
	}
	lines := strings.Split(strings.TrimSpace(tr.stdout), "\n")
	if len(lines) != 7 {
		t.Fatalf("family printed %d lines, want 7:\n%s", len(lines), tr.stdout)
	}
	all, err := tr.db.Versions(db.VersionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	for _, l := range lines {
		f := strings.Fields(l)
		tag, _ := strconv.Atoi(f[0])
		addr, _ := strconv.ParseUint(f[1], 0, 64)
		pid, _ := strconv.Atoi(f[2])
		tid, _ := strconv.Atoi(f[3])
		pids[pid] = true
		var found []db.VersionInfo
		for _, v := range all {
			if v.PID == pid && v.Addr == addr && v.Cause == "mprotect" {
				found = append(found, v)
			}
		}
		if len(found) != 1 {
			t.Errorf("tag %#x at %#x pid %d: %d mprotect versions recorded, want 1", tag, addr, pid, len(found))
			continue
		}
		v := found[0]
		if v.TID != tid || v.Size != 4096 {
			t.Errorf("tag %#x: tid %d size %d, want tid %d size 4096", tag, v.TID, v.Size, tid)
		}
		data, err := tr.db.VersionData(&v)
		if err != nil {
			t.Fatal(err)
		}
		if data[0] != 0xc3 || data[1] != byte(tag) || data[4095] != byte(tag) {
			t.Errorf("tag %#x: recorded bytes %x...%x", tag, data[:2], data[4095])
		}
	}
	// The fork child inherited the parent's four buffers: cause "fork".
	var forkPID int
	var parentBufs []uint64
	for _, l := range lines {
		f := strings.Fields(l)
		addr, _ := strconv.ParseUint(f[1], 0, 64)
		switch f[0] {
		case "48":
			forkPID, _ = strconv.Atoi(f[2])
		case "16", "32", "33", "34":
			parentBufs = append(parentBufs, addr)
		}
	}
	for _, a := range parentBufs {
		n := 0
		for _, v := range all {
			if v.PID == forkPID && v.Cause == "fork" && v.Contains(a) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("fork child %d: %d versions with cause fork hold the parent's buffer at %#x, want 1", forkPID, n, a)
		}
	}
	procs, err := tr.db.Processes()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range procs {
		name := "(fork, no exec)"
		if p.ExecPath != "" {
			name = p.ExecPath[strings.LastIndex(p.ExecPath, "/")+1:]
			if len(p.Argv) > 1 {
				name += " " + strings.Join(p.Argv[1:], " ")
			}
		}
		got = append(got, fmt.Sprintf("%s exit=%d", name, p.ExitStatus))
		if !p.HasEnd {
			t.Errorf("pid %d: no end recorded", p.PID)
		}
	}
	sort.Strings(got)
	// The first image of the program ends at its exec (no exit status);
	// so does the vfork child's image in its parent's memory (vm_owner,
	// db.Recorder.SharesVM) — the second "(fork, no exec)".
	want := []string{"(fork, no exec) exit=0", "(fork, no exec) exit=0", "family child exit=0", "family exec exit=0", "family exit=0"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("process images:\n got %s\nwant %s", strings.Join(got, "; "), strings.Join(want, "; "))
	}
	owners := 0
	for _, p := range procs {
		if p.VMOwner != 0 {
			owners++
		}
	}
	if owners != 1 {
		t.Errorf("%d process images share another's memory, want 1 (the vfork child before its exec)", owners)
	}
	threads, err := tr.db.Threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(threads) != 4+1+1 {
		t.Errorf("%d threads recorded, want 6 (main + 3, fork child, vfork child)", len(threads))
	}
}
