package main

import (
	"database/sql"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestAliasJIT runs alias-jit (testdata/alias-jit.c: JIT memory mapped
// twice, an RW view written and an RX view run, as asmjit and Erlang's
// BeamAsm do) under every W^X mode with soft PT. Stores of every width
// straddle pages of the RW view (1 to 32 bytes, VEX included; 64 where
// the CPU has AVX-512) and two views; a bulk fill goes through the RW
// view. The program behaves as alone, every thread's decode equals the
// instructions it executed (ground truth from stepping), and under auto
// and batch the bulk fill costs no more versions than the same fill into
// one RWX mapping (the reference, in the same test) times two. Before
// alias stores were stepped with every page they write opened, the
// 32-byte store killed the program with SIGSEGV; before alias pages went
// batch, the fill made a version per store (16,384 here).
func TestAliasJIT(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("alias-jit")
	const pages = 32
	native := e2eRun(t, []string{prog, strconv.Itoa(pages)}, nil, "", "")
	if native.code != 0 || !strings.HasSuffix(native.stdout, "\nok\n") {
		t.Fatalf("alone: exit %d\n%s", native.code, native.stdout)
	}
	// bulk returns the number of versions recorded in the bulk fill's
	// executable view.
	bulk := func(t *testing.T, dir, stdout string) int {
		var lo uint64
		var n int
		for _, l := range strings.Split(stdout, "\n") {
			if a, ok := strings.CutPrefix(l, "BULK "); ok {
				if _, err := fmt.Sscanf(a, "%v %d", &lo, &n); err != nil {
					t.Fatalf("%q: %v", l, err)
				}
			}
		}
		if lo == 0 {
			t.Fatalf("no BULK line in\n%s", stdout)
		}
		hi := lo + uint64(n)*4096
		vs := 0
		for _, h := range e2eHistory(t, dir) {
			if a, err := strconv.ParseUint(h.Addr, 0, 64); err == nil && a >= lo && a < hi {
				vs++
			}
		}
		return vs
	}
	same := func(a, b string) bool { return withoutAddrLines(a) == withoutAddrLines(b) }
	// Every instruction stepped (--soft-filter=off) once, with a smaller
	// fill: the fill loop is most of the program's instructions.
	for _, tc := range []struct {
		mode, filter string
		pages        int
	}{
		{"precise", "jit", pages}, {"batch", "jit", pages}, {"auto", "jit", pages}, {"auto", "off", 4},
	} {
		t.Run(tc.mode+"/filter="+tc.filter, func(t *testing.T) {
			run := func(args ...string) (string, string) {
				dir, gt := filepath.Join(t.TempDir(), "rec"), filepath.Join(t.TempDir(), "truth")
				r := e2ePtjit(t, nil, append([]string{"run", "-q", "--pt=soft", "--soft-filter=" + tc.filter, "--wx=" + tc.mode,
					"--ground-truth", gt, "-o", dir, "--", prog, strconv.Itoa(tc.pages)}, args...)...)
				if r.code != 0 || !strings.HasSuffix(r.stdout, "\nok\n") {
					t.Fatalf("under --wx=%s: exit %d\n%s\n%s", tc.mode, r.code, r.stdout, r.stderr)
				}
				tids, total := checkFlows(t, dir, groundTruth(t, gt))
				if total == 0 {
					t.Fatalf("no instruction traced")
				}
				t.Logf("%v: %d threads, %d instructions, decoded exactly", args, len(tids), total)
				return dir, r.stdout
			}
			dir, stdout := run()
			if tc.pages == pages && !same(stdout, native.stdout) {
				t.Fatalf("stdout differs from alone:\n%s\nalone:\n%s", stdout, native.stdout)
			}
			if tc.mode == "precise" {
				return // a version per store, by design
			}
			got := bulk(t, dir, stdout)
			rdir, rout := run("rwx")
			ref := bulk(t, rdir, rout)
			t.Logf("bulk fill of %d pages: %d versions through the alias, %d into RWX memory", tc.pages, got, ref)
			if got > 2*ref {
				t.Errorf("bulk fill through the alias: %d versions, more than twice the RWX case's %d", got, ref)
			}
		})
	}
}

// TestE2EAliasMprotect: a process with shared file mappings stops the
// calls that can change one of them (AliasRangeRules), and with BPF events
// no other mprotect: alias-jit's section 0 makes its twins by mprotect
// (both views mapped read-only, one made writable, the other executable,
// each changed again), then stores through the writable one after code
// ran at the executable one. Under --wx=precise every such store is a
// write at the executable address, with its bytes: the program's own
// values (mov $5151..5153, ret) must all be there, under each event
// source, with output and status as alone. Before the filter, the seccomp
// path stopped only mprotects adding PROT_EXEC and saw none of the three
// stores.
func TestE2EAliasMprotect(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("alias-jit")
	native := e2eRun(t, []string{prog, "4"}, nil, "", "")
	if native.code != 0 || !strings.HasSuffix(native.stdout, "\nok\n") {
		t.Fatalf("alone: exit %d\n%s", native.code, native.stdout)
	}
	for _, events := range e2eEventSources(t) {
		t.Run(events, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, "run", "-q", "--pt=off", "--wx=precise", "--events="+events, "-o", dir, "--", prog, "4")
			if r.code != 0 || withoutAddrLines(r.stdout) != withoutAddrLines(native.stdout) {
				t.Fatalf("exit %d, stdout\n%s\nalone:\n%s\n%s", r.code, r.stdout, native.stdout, r.stderr)
			}
			var twin uint64
			for _, l := range strings.Split(r.stdout, "\n") {
				if a, ok := strings.CutPrefix(l, "TWIN "); ok {
					if _, err := fmt.Sscanf(a, "%v", &twin); err != nil {
						t.Fatalf("%q: %v", l, err)
					}
				}
			}
			if twin == 0 {
				t.Fatalf("no TWIN line in\n%s", r.stdout)
			}
			sdb, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "code.db")+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer sdb.Close()
			rows, err := sdb.Query(`SELECT new FROM writes WHERE addr >= ? AND addr < ? ORDER BY id`, int64(twin), int64(twin+4096))
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			got := map[int32]bool{}
			for rows.Next() {
				var b []byte
				if err := rows.Scan(&b); err != nil {
					t.Fatal(err)
				}
				if len(b) >= 5 && b[0] == 0xb8 {
					got[int32(binary.LittleEndian.Uint32(b[1:5]))] = true
				}
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			for _, imm := range []int32{5151, 5152, 5153} {
				if !got[imm] {
					t.Errorf("no write of mov $%d at the executable twin %#x: the store through its alias was not seen (writes there: %v)", imm, twin, got)
				}
			}
		})
	}
}

// withoutAddrLines is alias-jit's output without its BULK and TWIN lines,
// whose addresses differ from run to run.
func withoutAddrLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "BULK ") && !strings.HasPrefix(l, "TWIN ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSharedRWXPrecise: alias-jit's bulk fill into one RWX MAP_SHARED
// mapping of a memfd, under --wx=precise, where every store into code is
// emulated. The kernel does not force a write through /proc/PID/mem into
// a shared mapping W^X keeps executable-only (EIO), so the bytes go
// through the mapped file (map_files). Output as alone, no warning, every
// store of the fill emulated. Found by the new-user trial: a warning per
// store (10,240 lines), each store stepped with its page opened by an
// mprotect, which a seccomp filter of the program's could refuse.
func TestSharedRWXPrecise(t *testing.T) {
	e2eSetup(t)
	const pages = 8
	argv := []string{e2eProg("alias-jit"), strconv.Itoa(pages), "shared-rwx"}
	native := e2eRun(t, argv, nil, "", "")
	if native.code != 0 || !strings.HasSuffix(native.stdout, "\nok\n") {
		t.Fatalf("alone: exit %d\n%s", native.code, native.stdout)
	}
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, append([]string{"run", "--wx=precise", "-o", dir, "--"}, argv...)...)
	if r.code != 0 || withoutAddrLines(r.stdout) != withoutAddrLines(native.stdout) {
		t.Fatalf("under ptjit: exit %d\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	e2eCheckMessages(t, r.stderr)
	meta := recordingMeta(t, dir)
	if n, _ := strconv.Atoi(meta["wx_emulated"]); n < pages*512 {
		t.Errorf("%s stores emulated, want the fill's %d at least (stepped: %s)", meta["wx_emulated"], pages*512, meta["wx_stepped"])
	}
}

// TestAliasAppend: alias-append writes 200 functions of two pages each
// through a memfd's writable view, each on fresh pages, and runs each at
// the executable view right after writing it (Erlang's BeamAsm loading
// modules). Every function's bytes are a recorded version at the address
// it ran from (the manifest), the output is as alone, and the pages a
// burst opened but left unwritten stay open for the next one: fewer than
// 1.25 stops a function (two each before: a write fault at every
// function's first page, then its run).
func TestAliasAppend(t *testing.T) {
	e2eSetup(t)
	for _, mode := range []string{"", "mprotect"} {
		t.Run("mode="+mode, func(t *testing.T) { testAliasAppend(t, mode) })
	}
}

// testAliasAppend is TestAliasAppend in one mode: with mprotect the
// program makes its executable view PROT_READ|PROT_EXEC again before each
// call, while the pages it just wrote are open (before, their stores went
// unseen: found by the new-user trial).
func testAliasAppend(t *testing.T, mode string) {
	prog := e2eProg("alias-append")
	const n = 200
	args := []string{prog, strconv.Itoa(n), "2"}
	if mode != "" {
		args = append(args, mode)
	}
	native := e2eRun(t, args, nil, "", "")
	if native.code != 0 || native.stdout != "sum 19900\n" {
		t.Fatalf("alone: exit %d\n%s%s", native.code, native.stdout, native.stderr)
	}
	dir := t.TempDir()
	mf := filepath.Join(dir, "manifest")
	r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + mf}, append([]string{"run", "--pt=off", "-o", filepath.Join(dir, "rec"), "--"}, args...)...)
	if r.code != 0 || r.stdout != native.stdout {
		t.Fatalf("exit %d, stdout %q (alone %q)\n%s", r.code, r.stdout, native.stdout, r.stderr)
	}
	ms := e2eReadManifest(t, mf)
	if len(ms) != n {
		t.Fatalf("manifest: %d lines, want %d", len(ms), n)
	}
	have := map[string]bool{}
	for _, h := range e2eHistory(t, filepath.Join(dir, "rec")) {
		have[h.Addr+" "+h.SHA256] = true
	}
	for k, m := range ms {
		if !have[fmt.Sprintf("%#x %s", m.Addr, m.SHA256)] {
			t.Errorf("function %d (%#x, %s) is no recorded version", k, m.Addr, m.SHA256[:16])
		}
	}
	m := regexp.MustCompile(`, (\d+) stops,`).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("no stop count in the summary:\n%s", r.stderr)
	}
	if stops, _ := strconv.Atoi(m[1]); mode == "" && stops >= n*5/4 {
		t.Errorf("%d stops for %d functions, want fewer than %d", stops, n, n*5/4)
	}
}

// TestAliasThreads: alias-threads packs functions back to back through a
// memfd's writable view while a second thread keeps calling those
// published so far, so the writer's batch cycles toggle the pages the
// caller runs, and the caller faults again and again at the same
// instruction with each fault stale by the time ptjit sees it. Each of 5
// runs prints what the program prints alone and exits 0 (before, 4 runs
// in 6 died of SIGSEGV: the same fault seen twice was taken for the
// program's; found by the new-user trial).
func TestAliasThreads(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("alias-threads")
	native := e2eRun(t, []string{prog, "300"}, nil, "", "")
	if native.code != 0 || native.stdout != "sum 89700\n" {
		t.Fatalf("alone: exit %d\n%s%s", native.code, native.stdout, native.stderr)
	}
	for i := 0; i < 5; i++ {
		r := e2ePtjit(t, nil, "run", "-q", "--pt=off", "-o", filepath.Join(t.TempDir(), "rec"), "--", prog, "300")
		if r.code != 0 || r.stdout != native.stdout {
			t.Fatalf("run %d: exit %d, stdout %q (alone %q)\n%s", i, r.code, r.stdout, native.stdout, r.stderr)
		}
	}
}
