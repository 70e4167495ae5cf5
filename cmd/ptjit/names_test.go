package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestPerfMapNames runs testdata/perfmap-jit, a JIT that names its code
// in /tmp/perf-PID.map and reuses an address for another function (in
// place, then after munmap), and removes its map before it exits. Every
// JIT function decode --calls enters must carry the name that was valid
// when it ran: the sequence of entered names equals the program's own
// call log, in both PT layouts' default and with --soft-filter=jit; the
// JSON format carries the same names, and the recording holds the
// program's manifest's versions.
func TestPerfMapNames(t *testing.T) {
	e2eSetup(t)
	for _, filter := range []string{"off", "jit"} {
		t.Run("filter="+filter, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			manifest := filepath.Join(t.TempDir(), "manifest")
			r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + manifest}, "run", "-q", "--pt=soft", "--soft-filter="+filter, "-o", dir, "--", e2eProg("perfmap-jit"))
			if r.code != 0 {
				t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
			}
			e2eCompare(t, e2eReadManifest(t, manifest), e2eHistory(t, dir), false)
			// the program's own log: "call NAME 0xADDR RESULT"
			var want []string
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				f := strings.Fields(l)
				if len(f) != 4 || f[0] != "call" {
					t.Fatalf("program output line %q", l)
				}
				want = append(want, f[1])
			}
			calls := e2ePtjit(t, nil, "decode", "-i", dir, "--calls")
			if calls.code != 0 {
				t.Fatalf("decode --calls: exit %d\n%s", calls.code, calls.stderr)
			}
			entry := regexp.MustCompile(`-> (\S+) \[region \d+ v\d+\]$`)
			var got []string
			for _, l := range strings.Split(calls.stdout, "\n") {
				if m := entry.FindStringSubmatch(l); m != nil {
					got = append(got, m[1])
				}
			}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("JIT functions entered, by decode --calls: %v\nthe program called: %v\n%s", got, want, calls.stdout)
			}
			// the JSON flow: the first instruction of each entry is named
			js := e2ePtjit(t, nil, "decode", "-i", dir, "--json")
			named := map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(js.stdout), "\n") {
				var in struct {
					Kind, Where string
				}
				if err := json.Unmarshal([]byte(l), &in); err != nil {
					t.Fatalf("json line %q: %v", l, err)
				}
				if name, _, ok := strings.Cut(in.Where, " [region"); ok {
					named[strings.SplitN(name, "+", 2)[0]] = true
				}
			}
			for _, n := range want {
				if !named[n] {
					t.Errorf("decode --json names no instruction %s (named: %v)", n, named)
				}
			}
		})
	}
}

// TestNodePerfMapNames runs testdata/names.js under node
// --perf-basic-prof (the map V8 writes as it compiles) with
// --always-sparkplug (baseline code for every function at its first call)
// under --pt=soft --soft-filter=jit, and counts the entries decode
// --calls shows into each function's named baseline code: the program
// calls fooAdd and barMul 200 times each, so each name must be entered
// exactly 200 times. node's own map is removed afterwards.
func TestNodePerfMapNames(t *testing.T) {
	e2eSetup(t)
	testenv.Tool(t, "node", "nodejs")
	root, _ := filepath.Abs("../..")
	script := filepath.Join(root, "testdata", "names.js")
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", dir, "--", "node", "--perf-basic-prof", "--always-sparkplug",
		// --perf-basic-prof also writes a V8 log, by default into the cwd
		"--no-logfile-per-isolate", "--logfile="+filepath.Join(t.TempDir(), "v8.log"), script)
	removeNodeMaps(t, dir)
	if r.code != 0 || r.stdout != "node result 81000\n" {
		t.Fatalf("run: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	calls := e2ePtjit(t, nil, "decode", "-i", dir, "--calls")
	if calls.code != 0 {
		t.Fatalf("decode --calls: exit %d\n%s", calls.code, calls.stderr)
	}
	for _, fn := range []string{"fooAdd", "barMul"} {
		re := regexp.MustCompile(`(?m)-> JS:\^` + fn + ` \S+names\.js:\d+:\d+ \[region \d+ v\d+\]$`)
		if n := len(re.FindAllString(calls.stdout, -1)); n != 200 {
			t.Errorf("decode --calls enters %s's baseline code %d times; names.js calls it 200 times", fn, n)
		}
	}
}

// removeNodeMaps removes the perf maps of the recording's processes
// (node leaves /tmp/perf-PID.map behind).
func removeNodeMaps(t *testing.T, dir string) {
	t.Helper()
	h := e2ePtjit(t, nil, "history", "-i", dir, "--json")
	for _, l := range strings.Split(strings.TrimSpace(h.stdout), "\n") {
		var v struct{ PID int }
		if json.Unmarshal([]byte(l), &v) == nil && v.PID > 0 {
			os.Remove(fmt.Sprintf("/tmp/perf-%d.map", v.PID))
		}
	}
}

// TestQueryEdges checks the query commands' time base and small edges on
// a recording of testdata/perfmap-jit (--pt=off): ptjit --version;
// history's header names every column and its NAMES column and --names
// give each version the names the program published for it; show --at
// TIME, without --region, shows the region live at ADDR at TIME (the
// address is reused by a second region); show -n 0 and --version 0 are
// refused; history --pid with no match says so.
func TestQueryEdges(t *testing.T) {
	e2eSetup(t)
	v := e2ePtjit(t, nil, "--version")
	if v.code != 0 || !strings.HasPrefix(v.stdout, "ptjit ") || !strings.Contains(v.stdout, "code.db schema") {
		t.Fatalf("--version: exit %d, %q", v.code, v.stdout)
	}
	dir := filepath.Join(t.TempDir(), "rec")
	if r := e2ePtjit(t, nil, "run", "-q", "--pt=off", "-o", dir, "--", e2eProg("perfmap-jit")); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	h := e2ePtjit(t, nil, "history", "-i", dir)
	lines := strings.Split(strings.TrimSpace(h.stdout), "\n")
	hdr := strings.Fields(lines[0])
	if strings.Join(hdr, " ") != "TIME(s) PID TID REGION.V RANGE SIZE CAUSE IP SHA256 UNTIL NAMES" {
		t.Fatalf("history header %q", lines[0])
	}
	want := map[string]string{"2.1": "jit_add7, jit_mul3", "2.2": "jit_sub5, jit_mul3", "3.1": "jit_neg"}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < len(hdr)-1 {
			t.Fatalf("history row %q: fewer fields than columns", l)
		}
		if w, ok := want[f[3]]; ok {
			if got := strings.Join(f[10:], " "); got != w {
				t.Errorf("version %s: NAMES %q, want %q", f[3], got, w)
			}
			delete(want, f[3])
		}
	}
	if len(want) != 0 {
		t.Errorf("history has no versions %v\n%s", want, h.stdout)
	}
	names := e2ePtjit(t, nil, "history", "-i", dir, "--names")
	if !regexp.MustCompile(`(?m)\s2\.1\.\.2\.2 \(2\)\s+jit_mul3$`).MatchString(names.stdout) {
		t.Errorf("history --names: jit_mul3 is not in versions 2.1..2.2\n%s", names.stdout)
	}
	// show --at: the region live at the address then
	type version struct {
		Region, Version int
		Addr            string
		TSC             uint64
		EndTSC          uint64 `json:"end_tsc"`
	}
	var vs []version
	for _, l := range strings.Split(strings.TrimSpace(e2ePtjit(t, nil, "history", "-i", dir, "--json").stdout), "\n") {
		var x version
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatal(err)
		}
		vs = append(vs, x)
	}
	for _, x := range vs {
		if x.Region < 2 {
			continue
		}
		at := fmt.Sprintf("tsc:%d", (x.TSC+x.EndTSC)/2)
		s := e2ePtjit(t, nil, "show", "-i", dir, x.Addr, "--at", at, "-n", "1")
		first := strings.SplitN(s.stdout, "\n", 2)[0]
		if s.code != 0 || !strings.HasPrefix(first, fmt.Sprintf("region %d version %d ", x.Region, x.Version)) {
			t.Errorf("show %s --at %s: exit %d, %q; want region %d version %d\n%s", x.Addr, at, s.code, first, x.Region, x.Version, s.stderr)
		}
	}
	for _, args := range [][]string{{"-n", "0"}, {"--version", "0"}} {
		s := e2ePtjit(t, nil, append([]string{"show", "-i", dir, vs[len(vs)-1].Addr}, args...)...)
		if s.code == 0 || !strings.Contains(s.stderr, args[0]) {
			t.Errorf("show %v: exit %d, stderr %q: want a refusal naming %s", args, s.code, s.stderr, args[0])
		}
	}
	none := e2ePtjit(t, nil, "history", "-i", dir, "--pid", "999999")
	if !strings.Contains(none.stdout, "no code versions recorded for pid 999999") {
		t.Errorf("history --pid 999999: %q", none.stdout)
	}
}

// TestJavaPerfMapNames runs HotSpot with -XX:+DumpPerfMapAtExit (the map
// is written at exit, when nothing changes any more) on a class of its
// own: every line of the map java wrote (the independent account) must be
// in history --names with its address, size and name, every one given to
// at least one code version, and show at Names.fooAdd's address labels it.
// (Decoding java under --pt=soft --soft-filter=jit is not tested here: on
// this tree java dies of SIGTRAP under the soft filter, with or without
// names.)
func TestJavaPerfMapNames(t *testing.T) {
	e2eSetup(t)
	javac := testenv.Tool(t, "javac", "default-jdk-headless")
	classes := t.TempDir()
	src := filepath.Join(classes, "Names.java")
	os.WriteFile(src, []byte(`public class Names {
    static int fooAdd(int x) { return x + 7; }
    static int barMul(int x) { return x * 3; }
    public static void main(String[] a) {
        int acc = 0;
        for (int i = 0; i < 3000; i++) acc = (acc + fooAdd(i) + barMul(i)) % 1000003;
        System.out.println("java result " + acc);
    }
}
`), 0o644)
	if out, err := exec.Command(javac, "-d", classes, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=off", "-o", dir, "--", "java", "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit", "-cp", classes, "Names")
	defer removeNodeMaps(t, dir)
	if r.code != 0 || r.stdout != "java result 14946\n" {
		t.Fatalf("run: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	rows := historyNames(t, dir)
	m, err := os.ReadFile(fmt.Sprintf("/tmp/perf-%d.map", rows[0].PID))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	fooAt, fooIn := "", ""
	for _, x := range rows {
		a, _ := strconv.ParseUint(strings.TrimPrefix(x.Addr, "0x"), 16, 64)
		got[fmt.Sprintf("%#x %#x %s", a, x.Size, x.Name)] = true
		if len(x.Versions) == 0 {
			t.Errorf("name %q at %s given to no version", x.Name, x.Addr)
		}
		if x.Name == "int Names.fooAdd(int)" && len(x.Versions) > 0 {
			fooAt, fooIn = x.Addr, x.Versions[0]
		}
	}
	lines := strings.Split(strings.TrimSpace(string(m)), "\n")
	for _, l := range lines {
		f := strings.SplitN(l, " ", 3)
		a, _ := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
		s, _ := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
		if !got[fmt.Sprintf("%#x %#x %s", a, s, f[2])] {
			t.Errorf("java's map line %q is not in history --names", l)
		}
	}
	if len(rows) != len(lines) {
		t.Errorf("history --names has %d names, java's map %d lines", len(rows), len(lines))
	}
	if fooAt == "" {
		t.Fatal("no code version holds int Names.fooAdd(int)")
	}
	region, vno, _ := strings.Cut(fooIn, ".")
	s := e2ePtjit(t, nil, "show", "-i", dir, fooAt, "--region", region, "--version", vno, "-n", "2")
	if !strings.Contains(s.stdout, "<int Names.fooAdd(int)>:") {
		t.Errorf("show %s in version %s does not label it:\n%s%s", fooAt, fooIn, s.stdout, s.stderr)
	}
}

// historyName is a line of `ptjit history --names --json`.
type historyName struct {
	PID      int
	Addr     string
	Size     uint64
	Name     string
	Versions []string
}

// historyNames returns the names `ptjit history --names --json` lists for
// the recording in dir; none is a failure.
func historyNames(t *testing.T, dir string) []historyName {
	t.Helper()
	var rows []historyName
	for _, l := range strings.Split(strings.TrimSpace(e2ePtjit(t, nil, "history", "-i", dir, "--names", "--json").stdout), "\n") {
		var x historyName
		if err := json.Unmarshal([]byte(l), &x); err != nil {
			t.Fatalf("history --names --json line %q: %v", l, err)
		}
		rows = append(rows, x)
	}
	if len(rows) == 0 {
		t.Fatal("no names recorded")
	}
	return rows
}

// TestPerfMapNamesAtExit runs testdata/perfmap-exit, a JIT whose perf map
// reaches the file only when exit flushes it, after the JIT unmapped its
// code (as mono --jitmap's), so ptjit reads every line at the process's
// end, after the code's last version ended. Each name must still reach
// the code it names: decode --summary counts, per function, the calls and
// instructions (4 per call) the program itself counted, under each name,
// and no JIT instruction is left as "[region ...]". The recording holds
// the program's manifest's versions (one per function added).
func TestPerfMapNamesAtExit(t *testing.T) {
	e2eSetup(t)
	dir := filepath.Join(t.TempDir(), "rec")
	manifest := filepath.Join(t.TempDir(), "manifest")
	r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + manifest}, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", dir, "--", e2eProg("perfmap-exit"))
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	e2eCompare(t, e2eReadManifest(t, manifest), e2eHistory(t, dir), false)
	// the program's own count: "calls NAME N"
	want := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(l)
		n, err := strconv.Atoi(f[len(f)-1])
		if len(f) != 3 || f[0] != "calls" || err != nil {
			t.Fatalf("program output line %q", l)
		}
		want[f[1]] = n
	}
	if len(want) != 4 {
		t.Fatalf("program output: %q", r.stdout)
	}
	s := e2ePtjit(t, nil, "decode", "-i", dir, "--summary")
	if s.code != 0 {
		t.Fatalf("decode --summary: exit %d\n%s", s.code, s.stderr)
	}
	row := regexp.MustCompile(`^\s+(\d+)\s+(\d+)\s+[\d.]+\s+(.+)$`)
	got := map[string]int{}
	for _, l := range strings.Split(s.stdout, "\n") {
		m := row.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		insns, _ := strconv.Atoi(m[1])
		calls, _ := strconv.Atoi(m[2])
		if strings.HasPrefix(m[3], "[region") {
			t.Errorf("unnamed JIT code in the summary: %q", l)
			continue
		}
		if insns != 4*calls {
			t.Errorf("%s: %d instructions in %d calls, want 4 a call", m[3], insns, calls)
		}
		got[m[3]] = calls
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls per function by decode --summary: %v\nthe program counted: %v\n%s", got, want, s.stdout)
	}
}
