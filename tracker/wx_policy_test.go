package tracker

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestStorePolicy: how one faulting store into memory W^X keeps is
// carried out, by mode, the page's recent stores, whether the storing
// instruction runs from the page, whether the emulator can do it and
// whether the page holds only zeros.
func TestStorePolicy(t *testing.T) {
	const now = int64(10 * time.Second)
	recent := pageRate{n: 1, since: now - int64(time.Millisecond)}
	burst := pageRate{n: autoBatchAfter, since: now - int64(time.Millisecond)}
	old := pageRate{n: 50, since: now - 2*int64(autoWindow)}
	cases := []struct {
		name       string
		mode       WXMode
		r          pageRate
		self       bool
		emulatable bool
		zero       bool
		batch      bool
		counted    bool
		n          int
	}{
		{"batch mode", WXBatch, pageRate{}, false, true, false, true, false, 0},
		{"batch mode, store into its own page", WXBatch, pageRate{}, true, true, false, false, false, 0},
		{"precise mode, a burst", WXPrecise, burst, false, false, true, false, false, 2},
		{"off", WXOff, pageRate{}, false, true, false, false, false, 0},
		{"auto, first store", WXAuto, pageRate{}, false, true, false, false, true, 1},
		{"auto, second store", WXAuto, recent, false, true, false, false, true, 2},
		{"auto, third store within the window", WXAuto, burst, false, true, false, true, true, 3},
		{"auto, a burst long ago: a new window", WXAuto, old, false, true, false, false, true, 1},
		{"auto, not emulatable", WXAuto, pageRate{}, false, false, false, true, true, 1},
		{"auto, not emulatable, into its own page", WXAuto, pageRate{}, true, false, false, false, true, 1},
		{"auto, a burst into its own page", WXAuto, burst, true, true, false, false, true, 3},
		{"auto, first store into a zero page", WXAuto, pageRate{}, false, true, true, true, true, 1},
		{"auto, second store into a zero page (not asked)", WXAuto, recent, false, true, true, false, true, 2},
		{"auto, zero page, into its own page", WXAuto, pageRate{}, true, true, true, false, true, 1},
	}
	for _, c := range cases {
		batch, next, counted := storePolicy(c.mode, c.r, now, c.self,
			func() bool { return c.emulatable }, func() bool { return c.zero })
		if batch != c.batch || counted != c.counted || counted && next.n != c.n {
			t.Errorf("%s: batch %v counted %v n %d; want %v %v %d", c.name, batch, counted, next.n, c.batch, c.counted, c.n)
		}
	}
}

// TestWXPolicy: what wxFault does with a W^X fault, by the kind of fault
// (fetch or store), what the page allows now (a stale fault), whether the
// thread's last stale fault was this one, the retries of a fetch so far,
// batch pages, and the store's mode and page rate (storePolicy). The
// emulator and the page's bytes are asked only where the decision needs
// them (ask).
func TestWXPolicy(t *testing.T) {
	const (
		now = int64(10 * time.Second)
		rx  = unix.PROT_READ | unix.PROT_EXEC
		rw  = unix.PROT_READ | unix.PROT_WRITE
	)
	burst := pageRate{n: autoBatchAfter, since: now - int64(time.Millisecond)}
	cases := []struct {
		name string
		in   wxFaultIn
		// storesAt, emulatable, zero: the lazily asked answers
		storesAt, emulatable, zero bool
		act                        wxAct
		counted                    bool
		n                          int
		ask                        bool // may ask storesAt, emulatable or zero
	}{
		{"store into a page made writable meanwhile", wxFaultIn{mode: WXAuto, prot: rw}, false, true, false, wxRetryStale, false, 0, false},
		{"fetch from a page made executable meanwhile", wxFaultIn{mode: WXAuto, fetch: true, prot: rx}, false, true, false, wxRetryStale, false, 0, false},
		{"the same store fault again: real", wxFaultIn{mode: WXBatch, prot: rw, again: true}, false, true, false, wxStoreBatch, false, 0, true},
		{"the same fetch fault again, no store there: retried", wxFaultIn{mode: WXAuto, fetch: true, prot: rx, again: true, staleFetches: 3}, false, true, false, wxRetryFetch, false, 0, true},
		{"the same fetch fault again, a store into itself", wxFaultIn{mode: WXPrecise, fetch: true, prot: rx, again: true}, true, true, false, wxStorePrecise, false, 0, true},
		{"the same fetch fault, retries spent", wxFaultIn{mode: WXPrecise, fetch: true, prot: rx, again: true, staleFetches: maxStaleFetches}, false, true, false, wxStorePrecise, false, 0, true},
		{"fetch from a batch page", wxFaultIn{mode: WXAuto, fetch: true, prot: rw, inBatch: true}, false, true, false, wxExecBatch, false, 0, false},
		{"store, batch mode", wxFaultIn{mode: WXBatch, prot: rx}, false, true, false, wxStoreBatch, false, 0, true},
		{"store into its own page, batch mode", wxFaultIn{mode: WXBatch, prot: rx, self: true}, false, true, false, wxStorePrecise, false, 0, true},
		{"store, precise mode", wxFaultIn{mode: WXPrecise, prot: rx, rate: burst}, false, false, true, wxStorePrecise, false, 0, true},
		{"store, auto, first", wxFaultIn{mode: WXAuto, prot: rx, now: now}, false, true, false, wxStorePrecise, true, 1, true},
		{"store, auto, a burst", wxFaultIn{mode: WXAuto, prot: rx, rate: burst, now: now}, false, true, false, wxStoreBatch, true, autoBatchAfter + 1, true},
		{"store, auto, not emulatable", wxFaultIn{mode: WXAuto, prot: rx, now: now}, false, false, false, wxStoreBatch, true, 1, true},
		{"store, auto, into zeros", wxFaultIn{mode: WXAuto, prot: rx, now: now}, false, true, true, wxStoreBatch, true, 1, true},
	}
	for _, c := range cases {
		asked := false
		answer := func(v bool) func() bool { return func() bool { asked = true; return v } }
		in := c.in
		in.storesAt, in.emulatable, in.zero = answer(c.storesAt), answer(c.emulatable), answer(c.zero)
		act, rate, counted := wxPolicy(in)
		if act != c.act || counted != c.counted || counted && rate.n != c.n {
			t.Errorf("%s: act %d counted %v n %d; want %d %v %d", c.name, act, counted, rate.n, c.act, c.counted, c.n)
		}
		if asked && !c.ask {
			t.Errorf("%s: asked the emulator or the page, which the decision does not need", c.name)
		}
	}
}

// TestProtRuns: sorted pages grouped into runs of adjacent pages with one
// protection.
func TestProtRuns(t *testing.T) {
	const p = pageSize
	prot := func(a uint64) int {
		if a >= 10*p {
			return 1
		}
		return 5
	}
	got := protRuns([]uint64{1 * p, 2 * p, 3 * p, 5 * p, 9 * p, 10 * p, 11 * p}, prot)
	want := []protRun{{1 * p, 4 * p, 5}, {5 * p, 6 * p, 5}, {9 * p, 10 * p, 5}, {10 * p, 12 * p, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("protRuns: %v, want %v", got, want)
	}
	if got := protRuns(nil, prot); len(got) != 0 {
		t.Errorf("protRuns(nil): %v", got)
	}
}

// TestZeroRun reads this process's own memory: pages of zeros from an
// address on.
func TestZeroRun(t *testing.T) {
	const p = pageSize
	buf, err := unix.Mmap(-1, 0, 8*p, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	base := uint64(uintptr(unsafe.Pointer(&buf[0])))
	buf[100] = 1     // page 0 written at 100
	buf[5*p+7] = 1   // page 5 written at 7
	buf[7*p+p-1] = 1 // page 7's last byte
	tid := os.Getpid()
	for _, c := range []struct {
		from, end uint64
		want      uint64
	}{
		{base, base + 8*p, 0},           // page 0 is not zero from its start
		{base + 101, base + 8*p, 5},     // zeros after the byte written, then pages 1-4
		{base + 100, base + 8*p, 0},     // the written byte itself
		{base + p, base + 8*p, 4},       // pages 1-4, page 5 written
		{base + 5*p + 8, base + 8*p, 2}, // page 5's tail, page 6; page 7 written
		{base + 6*p, base + 7*p, 1},     // one page
		{base + p, base + 3*p, 2},       // bounded by end
	} {
		if got := zeroRun(tid, c.from, c.end); got != c.want {
			t.Errorf("zeroRun(+%#x, +%#x) = %d, want %d", c.from-base, c.end-base, got, c.want)
		}
	}
	// zeros up to memory that cannot be read, unmapped (the reads
	// double past it)
	none, err := unix.Mmap(-1, 0, 80*p, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(none) // (unmaps the first 70 pages; the rest are gone)
	if err := unix.MunmapPtr(unsafe.Pointer(&none[70*p]), 10*p); err != nil {
		t.Fatal(err)
	}
	nb := uint64(uintptr(unsafe.Pointer(&none[0])))
	for _, c := range []struct{ from, end, want uint64 }{
		{nb + 9, nb + 80*p, 70},
		{nb + 69*p, nb + 80*p, 1},
		{nb + 70*p, nb + 80*p, 0},
		{nb, nb + 64*p, 64},
	} {
		if got := zeroRun(tid, c.from, c.end); got != c.want {
			t.Errorf("zeroRun(+%#x, +%#x) up to the unmapped +%#x = %d, want %d", c.from-nb, c.end-nb, 70*p, got, c.want)
		}
	}
}

// TestZeroRunFile: zeroRun over a shared mapping of a memfd with holes
// (pages never written), pages written with zeros and pages with data,
// split in two mappings by an mprotect. The runs of zeros are those of
// the bytes, and the holes are still holes afterwards: zeroRun asked the
// file for them and read none (a read through the mapping would have
// given the file a page).
func TestZeroRunFile(t *testing.T) {
	const p = pageSize
	fd, err := unix.MemfdCreate("zerorun", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, 16*p); err != nil {
		t.Fatal(err)
	}
	buf, err := unix.Mmap(fd, 0, 16*p, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	base := uint64(uintptr(unsafe.Pointer(&buf[0])))
	buf[100] = 1                                                         // page 0: data at 100
	buf[3*p] = 0                                                         // page 3: a page of the file, all zeros
	buf[6*p+p-1] = 1                                                     // page 6: data in its last byte
	buf[12*p] = 0                                                        // page 12: zeros, after the split
	buf[14*p+9] = 1                                                      // page 14: data
	if err := unix.Mprotect(buf[8*p:16*p], unix.PROT_READ); err != nil { // two mappings
		t.Fatal(err)
	}
	holes := func() []int {
		var h []int
		for pg := 0; pg < 16; pg++ {
			if d, err := unix.Seek(fd, int64(pg*p), unix.SEEK_DATA); err != nil || d != int64(pg*p) {
				h = append(h, pg)
			}
		}
		return h
	}
	before := holes()
	tid := os.Getpid()
	for _, c := range []struct{ from, end, want uint64 }{
		{base, base + 16*p, 0},          // page 0 is not zero from its start
		{base + 101, base + 16*p, 6},    // page 0's tail, pages 1-5; page 6 has data
		{base + p, base + 6*p, 5},       // holes and a page of zeros, bounded by end
		{base + 7*p, base + 16*p, 7},    // page 7, then the second mapping up to page 14
		{base + 6*p + p, base + 8*p, 1}, // page 7 alone
		{base + 14*p + 10, base + 16*p, 2},
	} {
		if got := zeroRun(tid, c.from, c.end); got != c.want {
			t.Errorf("zeroRun(+%#x, +%#x) = %d, want %d", c.from-base, c.end-base, got, c.want)
		}
	}
	if after := holes(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the memfd's holes were pages %v, after zeroRun %v", before, after)
	}
}

// TestPopulated reads this process's own page table: the runs of a
// private anonymous mapping that were written (present) are found, the
// untouched ones left out, and reading through the runs gives the
// mapping's bytes.
func TestPopulated(t *testing.T) {
	const p = pageSize
	buf, err := unix.Mmap(-1, 0, 512*p, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	base := uint64(uintptr(unsafe.Pointer(&buf[0])))
	for _, pg := range []int{0, 1, 2, 100, 300, 511} {
		buf[pg*p+5] = byte(pg) + 1
	}
	if err := unix.Madvise(buf[p:2*p], unix.MADV_DONTNEED); err != nil { // page 1: zeros again
		t.Fatal(err)
	}
	runs, ok := populated(os.Getpid(), base, base+512*p)
	if !ok {
		t.Fatal("populated: not answered for private anonymous memory")
	}
	want := populatedRuns{{base, base + p}, {base + 2*p, base + 3*p}, {base + 100*p, base + 101*p}, {base + 300*p, base + 301*p}, {base + 511*p, base + 512*p}}
	if fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
	got := make([]byte, 512*p)
	for off := 0; off < len(got); off += 64 * p {
		if err := runs.read(os.Getpid())(base+uint64(off), got[off:off+64*p]); err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != string(buf) {
		t.Errorf("read through the runs differs from the mapping")
	}
	if _, ok := populated(os.Getpid(), base, base+p); ok {
		t.Errorf("populated answered for a range under sparseMin")
	}
}

// TestVersionRuns: a version of a shared mapping of a file reads the
// file's data runs only (fileDataRuns): a memfd mapped from page 100 of
// its 700, and a file on disk with holes, each written at a few pages;
// reading through the runs gives the mapping's bytes. Private anonymous
// memory is populated's.
func TestVersionRuns(t *testing.T) {
	const p = pageSize
	memfd, err := unix.MemfdCreate("ptjit runs", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(memfd)
	disk, err := os.Create(filepath.Join(t.TempDir(), "holes"))
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	for _, fd := range []int{memfd, int(disk.Fd())} {
		if err := unix.Ftruncate(fd, 700*p); err != nil {
			t.Fatal(err)
		}
		// the file past the mapping's end holds data too: not a run
		if _, err := unix.Pwrite(fd, []byte{9}, 650*p); err != nil {
			t.Fatal(err)
		}
		buf, err := unix.Mmap(fd, 100*p, 512*p, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			t.Fatal(err)
		}
		base := uint64(uintptr(unsafe.Pointer(&buf[0])))
		for _, pg := range []int{0, 3, 4, 200, 511} {
			buf[pg*p+7] = byte(pg) + 1
		}
		runs, ok := versionRuns(os.Getpid(), base, base+512*p)
		if !ok {
			unix.Munmap(buf)
			t.Fatalf("fd %d: versionRuns not answered for a shared file mapping (root: map_files)", fd)
		}
		if _, ok := populated(os.Getpid(), base, base+512*p); ok {
			t.Errorf("fd %d: populated answered for a shared mapping", fd)
		}
		// a disk file system allocates in blocks, maybe larger than a
		// page: every written page is in a run, and the runs are few
		covered := func(a uint64) bool {
			for _, r := range runs {
				if r.s <= a && a < r.e {
					return true
				}
			}
			return false
		}
		for _, pg := range []int{0, 3, 4, 200, 511} {
			if !covered(base + uint64(pg*p)) {
				t.Errorf("fd %d: written page %d in no run of %v", fd, pg, runs)
			}
		}
		if fd == memfd {
			want := populatedRuns{{base, base + p}, {base + 3*p, base + 5*p}, {base + 200*p, base + 201*p}, {base + 511*p, base + 512*p}}
			if fmt.Sprint(runs) != fmt.Sprint(want) {
				t.Errorf("memfd runs %v, want %v", runs, want)
			}
			// a shared file mapping is read sparsely from fileSparseMin
			// on (a runtime's settled JIT pages), not from sparseMin
			small, ok := versionRuns(os.Getpid(), base, base+fileSparseMin)
			if want := (populatedRuns{{base, base + p}, {base + 3*p, base + 5*p}}); !ok || fmt.Sprint(small) != fmt.Sprint(want) {
				t.Errorf("memfd, %d pages: runs %v (answered %v), want %v", fileSparseMin/p, small, ok, want)
			}
			if _, ok := versionRuns(os.Getpid(), base, base+fileSparseMin-p); ok {
				t.Errorf("memfd, %d pages: answered below fileSparseMin", fileSparseMin/p-1)
			}
		} else if runs.bytes() > 256*p {
			t.Errorf("file on disk: runs %v cover %d pages of 512", runs, runs.bytes()/p)
		}
		got := make([]byte, 512*p)
		if err := runs.read(os.Getpid())(base, got); err != nil {
			t.Fatal(err)
		}
		if string(got) != string(buf) {
			t.Errorf("fd %d: read through the runs differs from the mapping", fd)
		}
		unix.Munmap(buf)
	}
}
