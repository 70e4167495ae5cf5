package main

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/recording"
)

// TestE2EBigRWX: a 64 MiB RWX mapping patched in 3 places (testdata
// bigrwx 64 3) is a handful of versions under W^X, not one per page: the
// mapping, the 3 patched pages, and the untouched runs between them
// (cause split, the mapping's bytes, read from its pages). The versions
// other than splits match the manifest; the splits hold zeros; the
// versions valid at the end tile the mapping; and the decoder's image,
// built from the recording, reads each patch as the program wrote it.
//
// Reserved (bigrwx 64 3 reserve: mapped PROT_NONE, then made RWX with one
// mprotect, as qemu-user does with its translation buffer), the same
// holds, and under batch and auto the untouched memory is fresh: no store
// stops, and each patched page is recorded when it first runs.
func TestE2EBigRWX(t *testing.T) {
	e2eSetup(t)
	const writes = 3
	for _, events := range e2eEventSources(t) {
		for _, reserve := range []bool{false, true} {
			for _, mode := range []string{"precise", "batch", "auto"} {
				name, args, cause := mode, []string{"64", strconv.Itoa(writes)}, "mmap"
				if reserve {
					name, args, cause = "reserve-"+mode, append(args, "reserve"), "mprotect"
				}
				t.Run(events+"/"+name, func(t *testing.T) { bigRWX(t, events, mode, args, cause, writes, reserve) })
			}
		}
	}
}

func bigRWX(t *testing.T, events, mode string, args []string, cause string, writes int, reserve bool) {
	t.Helper()
	tmp := t.TempDir()
	manifest, dir := filepath.Join(tmp, "manifest"), filepath.Join(tmp, "rec")
	r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + manifest}, append([]string{"run", "-q", "--pt=off", "--wx=" + mode, "--events=" + events, "-o", dir, "--",
		e2eProg("bigrwx")}, args...)...)
	if r.code != 0 {
		t.Fatalf("status %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	ms := e2eReadManifest(t, manifest)
	if len(ms) != 1+writes || ms[0].Cause != cause {
		t.Fatalf("manifest: %v, want one %s and %d write lines", ms, cause, writes)
	}
	if reserve {
		bigRWXFresh(t, dir, mode, writes)
	}
	mapping := ms[0]
	var hs, splits []historyLine
	inMapping := 0
	for _, h := range e2eHistory(t, dir) {
		addr, _ := strconv.ParseUint(h.Addr, 0, 64)
		if addr >= mapping.Addr && addr < mapping.Addr+mapping.Size {
			inMapping++
		}
		if h.Cause == "split" {
			splits = append(splits, h)
			continue
		}
		hs = append(hs, h)
	}
	// mmap + per write: the page, the runs left and right of it
	// (the run left of a patch was split off by the one before)
	if max := 1 + 3*writes; inMapping > max {
		t.Errorf("%d versions in the 64 MiB mapping, want at most %d", inMapping, max)
	}
	e2eCompare(t, ms, hs, mode != "precise")
	for _, h := range splits {
		zero := sha256.Sum256(make([]byte, h.Size))
		if h.SHA256 != hex.EncodeToString(zero[:]) {
			t.Errorf("split version %v: not the zeros the program left there", h)
		}
	}
	checkBigRWXImage(t, dir, mapping, ms[1:])
}

// bigRWXFresh checks the W^X counts of a reserved bigrwx run: under batch
// and auto no store stopped and the patched pages were recorded at their
// first execution as fresh memory; under precise every patch was a store
// ptjit carried out.
func bigRWXFresh(t *testing.T, dir, mode string, writes int) {
	t.Helper()
	meta := recordingMeta(t, dir)
	stores, _ := strconv.Atoi(meta["wx_writes"])
	fresh, _ := strconv.Atoi(meta["wx_fresh_executed"])
	want := [2]int{0, writes} // stores, fresh pages run
	if mode == "precise" {
		want = [2]int{writes, 0}
	}
	if got := [2]int{stores, fresh}; got != want {
		t.Errorf("--wx=%s: wx_writes %q, wx_fresh_executed %q; want %d and %d", mode, meta["wx_writes"], meta["wx_fresh_executed"], want[0], want[1])
	}
}

// checkBigRWXImage checks the recording in dir after the last patch: the
// versions valid then tile the mapping m exactly, and the decoder's image
// (recording.BuildImage) holds each patch's page as its manifest line says.
func checkBigRWXImage(t *testing.T, dir string, m manifestLine, patches []manifestLine) {
	t.Helper()
	cdb, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	vs, err := cdb.Versions(db.VersionFilter{PID: m.PID})
	if err != nil {
		t.Fatal(err)
	}
	// the time of the last version in the mapping: the last patch
	in := func(v db.VersionInfo) bool { return v.Addr >= m.Addr && v.Addr < m.Addr+m.Size }
	last := uint64(0)
	for _, v := range vs {
		if in(v) {
			last = max(last, v.Valid.TSC)
		}
	}
	covered := uint64(0)
	for _, v := range vs {
		if in(v) && v.ValidAt(last) {
			covered += v.Size
		}
	}
	if covered != m.Size {
		t.Errorf("versions valid after the last patch cover %d bytes of the %d-byte mapping", covered, m.Size)
	}
	img, err := recording.BuildImage(cdb, m.PID, 0, func(w string) { t.Log(w) })
	if err != nil {
		t.Fatalf("recording.BuildImage: %v", err) // overlapping versions fail here
	}
	for _, p := range patches {
		buf := make([]byte, p.Size)
		if n, s := img.Read(buf, p.Addr, last); n != len(buf) || s == nil {
			t.Errorf("image at %#x, tsc %d: %d bytes", p.Addr, last, n)
			continue
		}
		if sum := sha256.Sum256(buf); hex.EncodeToString(sum[:]) != p.SHA256 {
			t.Errorf("image at %#x after the patches: sha256 %x, the program wrote %s", p.Addr, sum, p.SHA256)
		}
	}
}
