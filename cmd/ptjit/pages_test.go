package main

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
)

// TestCopyChanged records jit-pages (a 4 MiB JIT region of which each
// version rewrites two pages, and some versions hold a page dropped with
// MADV_DONTNEED) with changed-page tracking, and checks every version's
// bytes against the program's manifest, and that tracking ran: versions
// read from their written pages alone, and far fewer pages read than the
// versions hold. With --copy=full the same bytes come from full copies and
// no page is tracked.
func TestCopyChanged(t *testing.T) {
	e2eSetup(t)
	p := e2eProgram{name: "jit-pages", args: []string{"24"}}
	for _, mode := range []string{"changed", "auto", "full"} {
		t.Run(mode, func(t *testing.T) {
			ms, dir := e2eRecord(t, p, "--pt=off", "--copy="+mode)
			if len(ms) != 25+4 {
				t.Fatalf("jit-pages wrote %d manifest lines, want 29", len(ms))
			}
			meta := checkManifestBytes(t, dir, ms)
			read, _ := strconv.Atoi(meta["copy_pages_read"])
			total, _ := strconv.Atoi(meta["copy_pages"])
			versions, _ := strconv.Atoi(meta["copy_changed_versions"])
			t.Logf("copy_mode %s: %d changed versions, %d of %d pages read (fallback %q)", meta["copy_mode"], versions, read, total, meta["copy_fallback"])
			if meta["copy_mode"] != mode {
				t.Errorf("meta copy_mode %q, want %q", meta["copy_mode"], mode)
			}
			if mode == "full" {
				if versions != 0 || total != 0 {
					t.Errorf("--copy=full: %d versions from written pages, %d pages tracked", versions, total)
				}
				return
			}
			// 28 later versions, some of them split by the Space into
			// several ranges (the MADV_DONTNEED); each reads two or three
			// pages of the 1024. auto leaves the ranges under 1 MiB out.
			want := 28
			if mode == "auto" {
				want = 20
			}
			if versions < want {
				t.Errorf("%d versions read from their written pages, want at least %d (fallback: %q)", versions, want, meta["copy_fallback"])
			}
			if read == 0 || read*4 > total {
				t.Errorf("%d of %d pages read: not far below a full copy", read, total)
			}
		})
	}
	// where ptjit must not make a userfaultfd in the program: full
	// copies, the same bytes, and the reason in the meta table
	for _, own := range []struct{ arg, reason string }{
		{"seccomp", "the program has a seccomp filter of its own"},
		{"uffd", "the program uses userfaultfd"},
	} {
		t.Run("own-"+own.arg, func(t *testing.T) {
			p := e2eProgram{name: "jit-pages", args: []string{"6", "4096", own.arg}}
			ms, dir := e2eRecord(t, p, "--pt=off", "--copy=changed")
			meta := checkManifestBytes(t, dir, ms)
			if meta["copy_fallback"] != own.reason || meta["copy_changed_versions"] != "0" {
				t.Errorf("copy_fallback %q, want %q; %s versions from written pages, want 0", meta["copy_fallback"], own.reason, meta["copy_changed_versions"])
			}
		})
	}
	// a tracked region moved over another tracked one (mremap
	// MREMAP_FIXED): the pages there are protected and not written, yet
	// not the bytes the old range's last version had
	t.Run("remap", func(t *testing.T) {
		p := e2eProgram{name: "jit-pages", args: []string{"12", "1024", "remap"}}
		ms, dir := e2eRecord(t, p, "--pt=off", "--copy=changed")
		meta := checkManifestBytes(t, dir, ms)
		if n, _ := strconv.Atoi(meta["copy_changed_versions"]); n < 9 {
			t.Errorf("%d versions read from their written pages, want at least 9 (fallback %q)", n, meta["copy_fallback"])
		}
	})
	// shared anonymous memory (PHP's opcache JIT buffer) is tracked as
	// private memory is, while the process has not forked; once a fork
	// shares it, a child's store makes no fault in the parent, and the
	// versions are read whole (the child's stores must be in them)
	t.Run("shared", func(t *testing.T) {
		p := e2eProgram{name: "jit-pages", args: []string{"12", "4096", "shared"}}
		ms, dir := e2eRecord(t, p, "--pt=off", "--copy=changed")
		meta := checkManifestBytes(t, dir, ms)
		read, _ := strconv.Atoi(meta["copy_pages_read"])
		total, _ := strconv.Atoi(meta["copy_pages"])
		if n, _ := strconv.Atoi(meta["copy_changed_versions"]); n < 12 || read*4 > total {
			t.Errorf("%d versions read from their written pages, want 12; %d of %d pages read (fallback %q)", n, read, total, meta["copy_fallback"])
		}
	})
	t.Run("shared-fork", func(t *testing.T) {
		p := e2eProgram{name: "jit-pages", args: []string{"12", "1024", "shared-fork"}}
		ms, dir := e2eRecord(t, p, "--pt=off", "--copy=changed")
		meta := checkManifestBytes(t, dir, ms)
		// versions 1 and 2 before the first fork
		if n, _ := strconv.Atoi(meta["copy_changed_versions"]); n != 2 {
			t.Errorf("%d versions read from their written pages, want 2 (the versions before the first fork)", n)
		}
	})
	t.Run("summary", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "rec")
		r := e2ePtjit(t, nil, "run", "--pt=off", "--copy=changed", "-o", dir, "--", e2eProg("jit-pages"), "3")
		if r.code != 0 || !strings.Contains(r.stderr, "MB snapshotted, copy: changed pages for ") {
			t.Errorf("status %d, summary without the changed copy mode:\n%s", r.code, r.stderr)
		}
		r = e2ePtjit(t, nil, "run", "--pt=off", "--copy=full", "-o", dir, "--", e2eProg("jit-pages"), "3")
		if r.code != 0 || !strings.Contains(r.stderr, "MB snapshotted, copy: full (--copy=full)") {
			t.Errorf("status %d, summary without the full copy mode:\n%s", r.code, r.stderr)
		}
		r = e2ePtjit(t, nil, "run", "--copy=some", "-o", dir, "--", e2eProg("jit-pages"), "3")
		if r.code != 2 || !strings.Contains(r.stderr, `--copy: "some" is not auto, changed or full`) {
			t.Errorf("--copy=some: status %d\n%s", r.code, r.stderr)
		}
	})
}

// checkManifestBytes checks each manifest line against the versions the
// same stop recorded (the Space may record a range as several adjacent
// versions, one stamp): they must tile the line's range, in order, and
// their bytes, concatenated, hash to the line's SHA-256. It returns the
// recording's meta table.
func checkManifestBytes(t *testing.T, dir string, ms []manifestLine) map[string]string {
	t.Helper()
	cdb, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	vs, err := cdb.Versions(db.VersionFilter{PID: ms[0].PID})
	if err != nil {
		t.Fatal(err)
	}
	var stamps []uint64
	at := map[uint64][]db.VersionInfo{}
	for _, v := range vs {
		if initialCauses[v.Cause] || v.Cause == "madvise" {
			continue // the vdso, and versions ptjit made for a madvise it took for one on code
		}
		if at[v.Valid.TSC] == nil {
			stamps = append(stamps, v.Valid.TSC)
		}
		at[v.Valid.TSC] = append(at[v.Valid.TSC], v)
	}
	if len(stamps) != len(ms) {
		t.Fatalf("versions recorded at %d stops, manifest has %d lines", len(stamps), len(ms))
	}
	for i, m := range ms {
		g := at[stamps[i]]
		sort.Slice(g, func(a, b int) bool { return g[a].Addr < g[b].Addr })
		h := sha256.New()
		next := m.Addr
		for _, v := range g {
			if v.Addr != next {
				t.Fatalf("line %d (%v): a version at %#x, want one at %#x", i, m, v.Addr, next)
			}
			b, err := cdb.VersionData(&v)
			if err != nil {
				t.Fatal(err)
			}
			h.Write(b)
			next += v.Size
		}
		if next != m.Addr+m.Size {
			t.Errorf("line %d (%v): versions end at %#x", i, m, next)
		}
		if sum := hex.EncodeToString(h.Sum(nil)); sum != m.SHA256 {
			t.Errorf("line %d (%v): recorded bytes hash to %.16s", i, m, sum)
		}
	}
	meta, err := cdb.Meta()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}

// TestE2ECopyChangedPrograms runs the e2e programs that make no RWX memory
// with --copy=changed forced: the versions must still be exactly the
// manifest's, and the program must behave as alone. stopbench rewrites
// the same range 40 times: there tracking must have run.
func TestE2ECopyChangedPrograms(t *testing.T) {
	e2eSetup(t)
	for _, p := range e2ePrograms {
		// jit-threads is in: its threads' mmap and mprotect at
		// addresses another thread's munmap (in flight) freed once left
		// an extra version in 4 runs of 30 here (tracker's
		// unmapFirstEffect; 0 of 70 since).
		if p.rwx {
			continue
		}
		t.Run(strings.Join(append([]string{p.name}, p.args...), "_"), func(t *testing.T) {
			ms, dir := e2eRecord(t, p, "--copy=changed")
			e2eCompare(t, ms, e2eHistory(t, dir), false)
			if p.name != "stopbench" {
				return
			}
			meta := recordingMeta(t, dir)
			if n, _ := strconv.Atoi(meta["copy_changed_versions"]); n < 39 {
				t.Errorf("stopbench: %d versions read from their written pages, want 39 (fallback %q)", n, meta["copy_fallback"])
			}
		})
	}
}

// TestCopyChangedProcMem: procmem rewrites its RX code through
// /proc/self/mem (no fault of its own, no protection change). Under
// --copy=changed those versions are read from the pages the scan reports
// written, so the kernel must count such a write (FOLL_FORCE) as one: every
// version must still be the program's own account.
func TestCopyChangedProcMem(t *testing.T) {
	e2eSetup(t)
	ms, dir := e2eRecord(t, e2eProgram{name: "procmem"}, "--pt=off", "--copy=changed")
	e2eCompare(t, ms, e2eHistory(t, dir), false)
	meta := recordingMeta(t, dir)
	if n, _ := strconv.Atoi(meta["copy_changed_versions"]); n < 3 {
		t.Errorf("%d versions read from their written pages, want 3 (fallback %q)", n, meta["copy_fallback"])
	}
}

// recordingMeta returns the meta table of the recording in dir.
func recordingMeta(t *testing.T, dir string) map[string]string {
	t.Helper()
	cdb, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()
	meta, err := cdb.Meta()
	if err != nil {
		t.Fatal(err)
	}
	return meta
}
