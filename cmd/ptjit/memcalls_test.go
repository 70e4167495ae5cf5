package main

import (
	"database/sql"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestE2EHeapCodeBrk: code in the heap and the break moved around it,
// and MAP_FIXED commits into a reservation (testdata/heap-jit). A brk
// stops for its exit only where it can shrink the heap over tracked
// memory (tracker's brkNeedsExit), and a MAP_FIXED mmap without PROT_EXEC
// only where it replaces tracked memory (coreNeedsExit): the 200 brk
// calls that grow and shrink the heap above the code page and the 100
// commits cost one stop each, not two. The brk that shrinks the heap
// under the code, and the mmap over the first code page, must still end
// those versions before the next version begins. Versions match the
// program's manifest, output and status are as alone, under each event
// source and with W^X off.
func TestE2EHeapCodeBrk(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("heap-jit")
	const rounds = 100
	native := e2eRun(t, []string{prog, strconv.Itoa(rounds)}, nil, "", "")
	if native.code != 0 || native.stdout != "heap code 42, after 7\n" {
		t.Fatalf("alone: exit %d\n%s%s", native.code, native.stdout, native.stderr)
	}
	stopsRe := regexp.MustCompile(`, (\d+) stops,`)
	modes := [][]string{{"--wx=off"}}
	for _, ev := range e2eEventSources(t) {
		modes = append(modes, []string{"--events=" + ev})
	}
	for _, mode := range modes {
		t.Run(strings.Join(mode, " "), func(t *testing.T) {
			dir := t.TempDir()
			mf := filepath.Join(dir, "manifest")
			args := append([]string{"run", "--pt=off", "-o", filepath.Join(dir, "rec")}, mode...)
			r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + mf}, append(args, "--", prog, strconv.Itoa(rounds))...)
			if r.code != 0 || r.stdout != native.stdout {
				t.Fatalf("exit %d, stdout %q (alone %q)\n%s", r.code, r.stdout, native.stdout, r.stderr)
			}
			ms := e2eReadManifest(t, mf)
			if len(ms) != 3 {
				t.Fatalf("manifest: %d lines, want 3: %v", len(ms), ms)
			}
			e2eCompare(t, ms, e2eHistory(t, filepath.Join(dir, "rec")), false)
			first, heap, last := ms[0].Addr, ms[1].Addr, ms[2].Addr
			sdb, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "rec", "code.db")+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer sdb.Close()
			var lastStart int64
			if err := sdb.QueryRow(`SELECT valid_ns FROM versions WHERE addr = ? AND cause = 'mprotect'`, int64(last)).Scan(&lastStart); err != nil {
				t.Fatalf("the last page's version at %#x: %v", last, err)
			}
			for _, c := range []struct {
				addr uint64
				what string
			}{{heap, "the brk that unmapped the heap code"}, {first, "the mmap over the first code page"}} {
				var end sql.NullInt64
				if err := sdb.QueryRow(`SELECT end_ns FROM versions WHERE addr = ? AND cause = 'mprotect'`, int64(c.addr)).Scan(&end); err != nil {
					t.Fatalf("the version at %#x: %v", c.addr, err)
				}
				if !end.Valid || end.Int64 > lastStart {
					t.Errorf("the version at %#x ends at %v, after the next version began (%d): %s was not seen", c.addr, end, lastStart, c.what)
				}
			}
			m := stopsRe.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("no stop count in the summary:\n%s", r.stderr)
			}
			// each of the 2·rounds brk calls and the rounds commits stops
			// at its entry; their exits would double that
			if n, _ := strconv.Atoi(m[1]); n >= 4*rounds {
				t.Errorf("%d stops for %d brk calls and %d commits: they stop at their exits too", n, 2*rounds, rounds)
			}
		})
	}
}

// TestE2EFileMapHoles: code in a 2 MiB file with holes, mapped shared and
// executable (testdata/filemap-jit): a memfd, and a removed file on disk.
// ptjit records the mapping's bytes, as no file is left for the decoder;
// it reads only the file's data runs, the holes being zeros (tracker's
// fileDataRuns), and the version's bytes must still be the program's own
// (its manifest's SHA-256 of the whole mapping). Erlang maps its 8 MiB
// memfd JIT area so; reading it whole took 15 ms a process. And 512 KiB of
// fresh anonymous memory mapped executable: its version is zeros, read
// from nowhere (Change.zero; PyPy's 1 MiB JIT area took 1.2 ms to read).
func TestE2EFileMapHoles(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("filemap-jit")
	for _, kind := range []string{"memfd", "deleted", "anon"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			env := []string{"TMPDIR=" + dir}
			native := e2eRun(t, []string{prog, kind}, env, "", "")
			want := "functions 11 22 33\n"
			if kind == "anon" {
				want = "anon zeros\n"
			}
			if native.code != 0 || native.stdout != want {
				t.Fatalf("alone: exit %d\n%s%s", native.code, native.stdout, native.stderr)
			}
			mf := filepath.Join(dir, "manifest")
			rec := filepath.Join(dir, "rec")
			r := e2ePtjit(t, append(env, "PTJIT_MANIFEST="+mf), "run", "-q", "--pt=off", "-o", rec, "--", prog, kind)
			if r.code != 0 || r.stdout != native.stdout {
				t.Fatalf("exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
			}
			e2eCheckMessages(t, r.stderr)
			e2eCompare(t, e2eReadManifest(t, mf), e2eHistory(t, rec), false)
			// memfd and deleted: 3 pages of data; anon: none
			if n, err := strconv.ParseInt(recordingMeta(t, rec)["snapshot_bytes"], 10, 64); err != nil || n >= 256<<10 {
				t.Errorf("%s bytes snapshotted (%v): the mapping was read whole, not only its data", recordingMeta(t, rec)["snapshot_bytes"], err)
			}
		})
	}
}
