package main

import (
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
)

// javaSoftFlags runs HotSpot so that little of it is interpreted: its
// template interpreter is generated code, so under --soft-filter=jit
// every bytecode it interprets is stepped. -Xcomp compiles every method
// at its first call (methods of classes still being initialized stay
// interpreted), with C1 only (TieredStopAtLevel=1) and one compiler
// thread; -XX:-UsePerfData drops the hsperfdata file. G1 stays (the
// default): with SerialGC the CDS archive has no archived module graph
// and java boots its module system in Java, which stepped 2.9 times the
// instructions here. dontinline keeps fooAdd and barMul functions of
// their own; the map is written at exit (DumpPerfMapAtExit).
var javaSoftFlags = []string{"-Xcomp", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1", "-XX:-UsePerfData",
	"-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit",
	"-XX:CompileCommand=quiet", "-XX:CompileCommand=dontinline,Names::*"}

// javaNamesSrc calls fooAdd and barMul javaNamesCalls times each. It
// prints without string concatenation: "a" + b is an invokedynamic whose
// bootstrap generates classes with ASM, which more than doubled the
// instructions stepped.
const (
	javaNamesCalls = 200
	javaNamesSrc   = `public class Names {
    static int fooAdd(int x) { return x + 7; }
    static int barMul(int x) { return x * 3; }
    public static void main(String[] a) {
        int acc = 0;
        for (int i = 0; i < 200; i++) acc = (acc + fooAdd(i) + barMul(i)) % 1000003;
        System.out.print("java result ");
        System.out.println(acc);
    }
}
`
)

// TestJavaSoftFilterNames runs HotSpot under --pt=soft --soft-filter=jit
// (javaSoftFlags) on a class whose main calls fooAdd and barMul 200
// times each, and checks the names against the map java wrote
// (/tmp/perf-PID.map, read here): stdout and exit status are java's
// alone; decode --calls enters each method's code 199 times under the
// map's name, and --summary counts 199 calls of it: main's first call of
// each goes to HotSpot's resolve_static_call stub, which resolves the
// call site and jumps (not calls) to the method, so that entry is
// inside the stub's frame, and the call site, patched, calls the method
// directly the other 199 times. --folded has stacks ending in both
// names, none of them under resolve_static_call (the first call's return
// lands in main's code just patched, a pause of the filter, and must
// still leave the stub's frame); the perfetto export has 199 slices of
// each; the versions --calls names are those history --names gives the
// name to, whose bytes at the map's address show labels with it.
//
// The run steps about 1.6 M JIT instructions (the interpreter and stubs
// of java's startup, mostly) and takes about 2 minutes, hence its own
// time bound.
func TestJavaSoftFilterNames(t *testing.T) {
	e2eSetup(t)
	testenv.Tool(t, "java", "default-jdk-headless")
	javac := testenv.Tool(t, "javac", "default-jdk-headless")
	classes := t.TempDir()
	src := filepath.Join(classes, "Names.java")
	if err := os.WriteFile(src, []byte(javaNamesSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-d", classes, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	argv := append(append([]string{"java"}, javaSoftFlags...), "-cp", classes, "Names")

	// java alone: its output, status and map (removed)
	alone := exec.Command(argv[0], argv[1:]...)
	var aloneOut strings.Builder
	alone.Stdout = &aloneOut
	start := time.Now()
	if err := alone.Start(); err != nil {
		t.Fatal(err)
	}
	alone.Wait()
	aloneTime := time.Since(start)
	os.Remove(fmt.Sprintf("/tmp/perf-%d.map", alone.Process.Pid))
	want := e2eResult{stdout: aloneOut.String(), code: e2eStatus(alone.ProcessState)}
	if want.code != 0 || want.stdout != "java result 81000\n" {
		t.Fatalf("java alone: exit %d, stdout %q", want.code, want.stdout)
	}

	dir := filepath.Join(t.TempDir(), "rec")
	start = time.Now()
	r := e2eRunFor(t, 10*time.Minute, append([]string{e2e.ptjit, "run", "--pt=soft", "--soft-filter=jit", "-o", dir, "--"}, argv...), nil, "", "")
	t.Logf("java alone: %v; under ptjit: %v\n%s", aloneTime.Round(time.Millisecond), time.Since(start).Round(time.Second), r.stderr)
	defer removeNodeMaps(t, dir)
	if r.code != want.code || r.stdout != want.stdout {
		t.Fatalf("under ptjit: exit %d, stdout %q; alone: exit %d, stdout %q\n%s", r.code, r.stdout, want.code, want.stdout, r.stderr)
	}

	// the names java published, from its map
	type named struct {
		historyName
		addr, size uint64 // from the map
	}
	var rows []named
	for _, x := range historyNames(t, dir) {
		rows = append(rows, named{historyName: x})
	}
	m, err := os.ReadFile(fmt.Sprintf("/tmp/perf-%d.map", rows[0].PID))
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]*named{} // fooAdd, barMul → the map's line
	for _, l := range strings.Split(strings.TrimSpace(string(m)), "\n") {
		f := strings.SplitN(l, " ", 3)
		if len(f) != 3 {
			t.Fatalf("java's map line %q", l)
		}
		for _, fn := range []string{"fooAdd", "barMul"} {
			if strings.Contains(f[2], " Names."+fn+"(") {
				if methods[fn] != nil {
					t.Fatalf("java's map names %s twice: %q and %q", fn, methods[fn].Name, f[2])
				}
				a, err1 := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
				s, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
				if err1 != nil || err2 != nil {
					t.Fatalf("java's map line %q", l)
				}
				methods[fn] = &named{historyName: historyName{Name: f[2]}, addr: a, size: s}
			}
		}
	}

	calls := e2ePtjit(t, nil, "decode", "-i", dir, "--calls")
	e2eCheckMessages(t, calls.stderr)
	summary := e2ePtjit(t, nil, "decode", "-i", dir, "--summary")
	e2eCheckMessages(t, summary.stderr)
	folded := e2ePtjit(t, nil, "decode", "-i", dir, "--folded")
	e2eCheckMessages(t, folded.stderr)
	for what, res := range map[string]e2eResult{"--calls": calls, "--summary": summary, "--folded": folded} {
		if res.code != 0 {
			t.Fatalf("decode %s: exit %d\n%s", what, res.code, res.stderr)
		}
	}
	stacks, _, _ := parseFolded(t, folded.stdout)
	trace, _ := exportPerfetto(t, dir)
	// --summary's function rows: instructions, calls, seconds, name
	row := regexp.MustCompile(`^\s+(\d+)\s+(\d+)\s+\d+\.\d+\s+(.+)$`)
	const entered = javaNamesCalls - 1 // the first call goes to resolve_static_call
	for _, fn := range []string{"fooAdd", "barMul"} {
		want := methods[fn]
		if want == nil {
			t.Errorf("java's map has no line for Names.%s", fn)
			continue
		}
		// decode --calls: the entries, and the versions entered
		re := regexp.MustCompile(`(?m)-> ` + regexp.QuoteMeta(want.Name) + ` \[region (\d+) v(\d+)\]$`)
		entries := re.FindAllStringSubmatch(calls.stdout, -1)
		if len(entries) != entered {
			t.Errorf("decode --calls enters %q %d times, want %d", want.Name, len(entries), entered)
		}
		ran := map[string]bool{}
		for _, e := range entries {
			ran[e[1]+"."+e[2]] = true
		}
		// --summary
		n, rowsFound := 0, 0
		for _, l := range strings.Split(summary.stdout, "\n") {
			if s := row.FindStringSubmatch(l); s != nil && s[3] == want.Name {
				c, _ := strconv.Atoi(s[2])
				n += c
				rowsFound++
			}
		}
		if rowsFound == 0 || n != entered {
			t.Errorf("decode --summary: %d rows of %q, %d calls in all; want %d calls", rowsFound, want.Name, n, entered)
		}
		// --folded: stacks whose last frame is the method, called by
		// main: resolve_static_call, left by the first call's return
		// (which lands in main's code just patched: a pause of the
		// filter), is not among its callers
		found := false
		for _, s := range stacks {
			if s[len(s)-1] != want.Name {
				continue
			}
			found = true
			if slices.Contains(s, "resolve_static_call") {
				t.Errorf("decode --folded: %q called under resolve_static_call: %s", want.Name, strings.Join(s, ";"))
			}
		}
		if !found {
			t.Errorf("decode --folded has no stack ending in %q", want.Name)
		}
		// the perfetto export: a slice per entry
		slices := 0
		for _, sl := range trace.slices {
			for _, s := range sl {
				if s.name == want.Name {
					slices++
				}
			}
		}
		if slices != entered {
			t.Errorf("export perfetto: %d slices named %q, want %d", slices, want.Name, entered)
		}
		// per version: history --names gives the name, at the map's
		// address and size, to every version --calls entered it in
		var hist *named
		for i := range rows {
			a, _ := strconv.ParseUint(strings.TrimPrefix(rows[i].Addr, "0x"), 16, 64)
			if rows[i].Name == want.Name && a == want.addr && rows[i].Size == want.size {
				hist = &rows[i]
			}
		}
		if hist == nil {
			t.Errorf("history --names has no %#x %#x %q (java's map line)", want.addr, want.size, want.Name)
			continue
		}
		given := map[string]bool{}
		for _, v := range hist.Versions {
			given[v] = true
		}
		for v := range ran {
			if !given[v] {
				t.Errorf("decode --calls enters %q in version %s; history --names gives it to %v", want.Name, v, hist.Versions)
				continue
			}
			region, vno, _ := strings.Cut(v, ".")
			raw := e2ePtjit(t, nil, "show", "-i", dir, "--raw", "--region", region, "--version", vno,
				"--len", strconv.FormatUint(want.size, 10), fmt.Sprintf("%#x", want.addr))
			var code []byte
			for _, line := range strings.Split(raw.stdout, "\n") {
				if _, hexs, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(line, "0x") {
					b, err := hex.DecodeString(strings.ReplaceAll(hexs, " ", ""))
					if err != nil {
						t.Fatalf("show --raw line %q: %v", line, err)
					}
					code = append(code, b...)
				}
			}
			if raw.code != 0 || uint64(len(code)) != want.size {
				t.Errorf("show --raw %#x+%d in version %s: exit %d, %d bytes\n%s", want.addr, want.size, v, raw.code, len(code), raw.stderr)
			}
			s := e2ePtjit(t, nil, "show", "-i", dir, "--region", region, "--version", vno, "-n", "2", fmt.Sprintf("%#x", want.addr))
			if !strings.Contains(s.stdout, "<"+want.Name+">:") {
				t.Errorf("show %#x in version %s does not label it %q:\n%s%s", want.addr, v, want.Name, s.stdout, s.stderr)
			}
		}
	}
}
