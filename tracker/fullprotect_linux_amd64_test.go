package tracker_test

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/tracker"
	"golang.org/x/sys/unix"
)

// execflipRun traces execflip n [mode] and returns the run, the page it
// toggles, and the seccomp stops of mprotect on that page with and
// without PROT_EXEC.
func execflipRun(t *testing.T, n int, mode ...string) (tr traced, page uint64, withExec, without int) {
	t.Helper()
	argv := append([]string{cprog(t, "execflip"), strconv.Itoa(n)}, mode...)
	tr = traceWX(t, tracker.WXAuto, argv...)
	lines := strings.Split(strings.TrimSpace(tr.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "page 0x") || lines[1] != "done "+strconv.Itoa(n) {
		t.Fatalf("execflip printed %q (status %d)", tr.stdout, tr.res.Status)
	}
	page, err := strconv.ParseUint(strings.TrimPrefix(lines[0], "page 0x"), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tr.stops {
		if (s.Nr == unix.SYS_MPROTECT || s.Nr == unix.SYS_PKEY_MPROTECT) && s.Args[0] == page {
			if s.Args[2]&unix.PROT_EXEC != 0 {
				withExec++
			} else {
				without++
			}
		}
	}
	return tr, page, withExec, without
}

// pageVersions returns the versions recorded at page, checking that the
// i-th holds i in word 1 + i%500 (the bytes of that RX).
func pageVersions(t *testing.T, tr traced, page uint64, n int) []db.VersionInfo {
	t.Helper()
	vs, err := tr.db.Versions(db.VersionFilter{Addr: page, HasAddr: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != n {
		t.Fatalf("%d versions at %#x, want %d (one per RX)", len(vs), page, n)
	}
	for i, v := range vs {
		data, err := tr.db.VersionData(&v)
		if err != nil {
			t.Fatal(err)
		}
		if w := binary.LittleEndian.Uint64(data[8*(1+i%500):]); w != uint64(i) || data[0] != 0xc3 || v.Cause != "mprotect" {
			t.Fatalf("version %d (RX %d): cause %s, word %d, first byte %#x", v.ID, i, v.Cause, w, data[0])
		}
	}
	return vs
}

// TestExecAddingStopsOnly: a program toggling a page
// RW → RX n times stops at the n calls that add PROT_EXEC and at none of
// the n that take it away; every RX is still a version with the bytes the
// program wrote, and the versions' ends are marked inexact (the program
// took PROT_EXEC away unseen before each).
func TestExecAddingStopsOnly(t *testing.T) {
	const n = 300
	tr, page, withExec, without := execflipRun(t, n)
	if withExec != n || without != 0 {
		t.Errorf("mprotect stops on the page: %d adding PROT_EXEC (want %d), %d not (want 0)", withExec, n, without)
	}
	if tr.res.Stats.FullProtect != 0 {
		t.Errorf("%d processes got the full mprotect filter; execflip without rwx has no managed memory", tr.res.Stats.FullProtect)
	}
	vs := pageVersions(t, tr, page, n)
	for _, v := range vs[:n-1] {
		if !v.HasEnd || !v.EndInexact {
			t.Fatalf("version %d: end %v, inexact %v; want an inexact end", v.ID, v.HasEnd, v.EndInexact)
		}
		if !strings.Contains(v.String(), "at the latest") {
			t.Fatalf("version %d: String() %q does not say the end is inexact", v.ID, v.String())
		}
	}
}

// TestManagedMemoryStopsAll: once ptjit manages memory
// in a process (here an RWX page under W^X), the process gets the filter
// that stops every mprotect: the same toggles then stop at both calls,
// and the versions made from then on end exactly.
func TestManagedMemoryStopsAll(t *testing.T) {
	const n = 100
	tr, page, withExec, without := execflipRun(t, n, "rwx")
	if withExec != n || without != n {
		t.Errorf("mprotect stops on the page: %d adding PROT_EXEC, %d not; want %d each", withExec, without, n)
	}
	if tr.res.Stats.FullProtect != 1 {
		t.Errorf("%d processes got the full mprotect filter, want 1", tr.res.Stats.FullProtect)
	}
	for _, v := range pageVersions(t, tr, page, n) {
		if v.EndInexact {
			t.Fatalf("version %d: inexact end after the full filter", v.ID)
		}
	}
}

// TestManagedRangeStopsThere: when ptjit knows the range it is about to
// manage (an RWX page mapped with MAP_FIXED), the filter it adds stops the
// mprotects of that range only (widened to 16 MiB): the toggles of a page
// mapped elsewhere stop only where they add PROT_EXEC, those of a page
// next to the RWX one stop both ways and end exactly, and so do those of
// the RWX page after mremap moved it out of the range. No process gets the
// filter that stops every mprotect.
func TestManagedRangeStopsThere(t *testing.T) {
	const n = 100
	for _, c := range []struct {
		mode        string
		without     int
		exactEnds   bool
		rangeFilter int
	}{
		{"rwx-fixed", 0, false, 1},
		{"rwx-fixed-near", n, true, 1},
		// moved: the filter for the new place comes at mremap's exit
		{"rwx-fixed-moved", n, true, 2},
	} {
		t.Run(c.mode, func(t *testing.T) {
			tr, page, withExec, without := execflipRun(t, n, c.mode)
			if withExec != n || without != c.without {
				t.Errorf("mprotect stops on the page: %d adding PROT_EXEC, %d not; want %d and %d", withExec, without, n, c.without)
			}
			if s := tr.res.Stats; s.FullProtect != 0 || s.RangeProtect != 1 || s.RangeFilters != c.rangeFilter {
				t.Errorf("filters: full in %d processes, ranges in %d (%d filters); want 0, 1 (%d)",
					s.FullProtect, s.RangeProtect, s.RangeFilters, c.rangeFilter)
			}
			if c.mode == "rwx-fixed-moved" {
				return // the page's versions begin with the moved RWX page's own
			}
			vs := pageVersions(t, tr, page, n)
			for _, v := range vs[:n-1] {
				if v.EndInexact == c.exactEnds {
					t.Fatalf("version %d: inexact end %v, want %v", v.ID, v.EndInexact, !c.exactEnds)
				}
			}
		})
	}
}
