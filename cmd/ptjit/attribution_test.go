package main

import (
	"strconv"
	"testing"
)

// TestAttributionThreads: jit-many's threads each
// mprotect one page RX at the same time while the main thread moves the
// program break. Every page must be one version with the cause and tid of
// the mprotect that made it, as the program's manifest says: no version
// with cause brk and the main thread's tid, no version spanning several
// threads' pages. Its manifest is not in syscall order, so versions are
// matched by address (every page stays mapped: one address, one thread).
// 1000 threads under --wx=off and the default --wx=auto; 200 with -short.
func TestAttributionThreads(t *testing.T) {
	e2eSetup(t)
	threads := 1000
	if testing.Short() {
		threads = 200
	}
	for _, wx := range []string{"off", "auto"} {
		if testing.Short() && wx != "auto" {
			continue
		}
		t.Run("wx="+wx, func(t *testing.T) {
			p := e2eProgram{name: "jit-many", args: []string{strconv.Itoa(threads)}}
			ms, dir := e2eRecord(t, p, "--wx="+wx)
			if len(ms) != threads {
				t.Fatalf("manifest has %d lines, want %d", len(ms), threads)
			}
			attributionCompare(t, ms, e2eHistory(t, dir))
		})
	}
}

// attributionCompare checks that the versions in hs other than the
// initial ones are exactly the manifest lines ms, matched by address:
// size, SHA-256, cause and tid.
func attributionCompare(t *testing.T, ms []manifestLine, hs []historyLine) {
	t.Helper()
	want := map[uint64]manifestLine{}
	for _, m := range ms {
		want[m.Addr] = m
	}
	matched := map[uint64]bool{}
	var wrongCause, wrongTID, multi, other int
	for _, h := range hs {
		if initialCauses[h.Cause] {
			continue
		}
		addr, err := strconv.ParseUint(h.Addr, 0, 64)
		m, ok := want[addr]
		switch {
		case err != nil || !ok:
			other++
			t.Errorf("version at no manifest line's address: %v", h)
			continue
		case matched[addr]:
			t.Errorf("second version of one page: %v (manifest %v)", h, m)
		}
		matched[addr] = true
		if h.Size != m.Size || h.SHA256 != m.SHA256 {
			multi++
		}
		if h.Cause != m.Cause {
			wrongCause++
		}
		if h.TID != m.TID {
			wrongTID++
		}
		if h.Size != m.Size || h.SHA256 != m.SHA256 || h.Cause != m.Cause || h.TID != m.TID {
			if wrongCause+wrongTID+multi <= 20 {
				t.Errorf("recorded %v\n  manifest %v", h, m)
			}
		}
	}
	missing := 0
	for _, m := range ms {
		if !matched[m.Addr] {
			missing++
			if missing <= 10 {
				t.Errorf("no version starts at manifest line %v", m)
			}
		}
	}
	if wrongCause+wrongTID+multi+other+missing > 0 {
		t.Errorf("%d pages: %d versions with the wrong cause, %d with the wrong tid, %d with another size or bytes (several pages), %d elsewhere, %d pages with no version of their own",
			len(ms), wrongCause, wrongTID, multi, other, missing)
	}
}
