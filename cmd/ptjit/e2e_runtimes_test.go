package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
)

// A runtime of TestRuntimes: a real JIT (or a compiler that runs its
// output in memory) on a small program of testdata/runtimes. Every
// program computes acc = (acc*31 + i) mod 1000003 from acc = 7 for
// i < n, n its last argument, and prints "NAME result ACC".
type runtimeCase struct {
	name  string
	pkg   string   // the Debian package that installs tools (.ci/run installs it)
	tools []string // commands it needs, found through $PATH
	n     int      // the loop count: enough for the JIT to compile the loop, few enough to step in seconds
	// argv returns the command line for loop count n, after any
	// preparation (compiling the program) into tmp; src is
	// testdata/runtimes.
	argv func(t *testing.T, src, tmp, n string) []string
	env  []string
	out  string // its stdout alone, before the result
	// softLimit bounds the soft-PT run where e2eTimeout is too short.
	softLimit time.Duration
}

// runtimeCases: runtimes nobody on the project wrote, each on a program
// of its own in testdata/runtimes.
var runtimeCases = []runtimeCase{
	{name: "erlang", pkg: "erlang-base", tools: []string{"erl", "erlc"}, n: 1500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			runtimeBuild(t, "erlc", "-o", tmp, filepath.Join(src, "hot.erl"))
			return []string{"erl", "-noshell", "-pa", tmp, "-eval", `hot:main(["` + n + `"]), halt().`}
		}, out: "erlang",
		// Erlang's start-up is JIT code, stepped whatever the program:
		// about 2.4 M instructions: 3.6 min at load 5 here, and at the
		// 150 µs a step this VM took on a slow hour, about 7.
		softLimit: 20 * time.Minute},
	// PyPy traces a loop after about 1000 iterations.
	{name: "pypy", pkg: "pypy3", tools: []string{"pypy3"}, n: 1500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			return []string{"pypy3", filepath.Join(src, "hot.py"), n}
		}, out: "pypy"},
	// The tracing JIT compiles a loop after 64 iterations
	// (opcache.jit_hot_loop); -n: no php.ini, the JIT's settings alone.
	{name: "php", pkg: "php-cli", tools: []string{"php"}, n: 500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			return []string{"php", "-n", "-d", "zend_extension=opcache", "-d", "opcache.enable_cli=1",
				"-d", "opcache.jit=tracing", "-d", "opcache.jit_buffer_size=16M", filepath.Join(src, "hot.php"), n}
		}, out: "php"},
	// hot.scm is compiled first, then loaded: interpreted, its loop
	// made the evaluator's own procedures hot, and stepping them took
	// 5.3 M instructions (7 min). GUILE_JIT_THRESHOLD 50000 (1000 by
	// default): a few procedures of Guile's start-up are compiled, and
	// the loop after about 1600 iterations.
	{name: "guile", pkg: "guile-3.0", tools: []string{"guile"}, n: 2500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			compiled := filepath.Join(tmp, "hot.go")
			runtimeBuild(t, "guile", "--no-auto-compile", "-c",
				`(use-modules (system base compile)) (compile-file "`+filepath.Join(src, "hot.scm")+`" #:output-file "`+compiled+`")`)
			return []string{"guile", "--no-auto-compile", "-c", `(load-compiled "` + compiled + `")`, n}
		}, env: []string{"GUILE_JIT_THRESHOLD=50000", "GUILE_AUTO_COMPILE=0"}, out: "guile"},
	// SBCL compiles every top-level form to native code before it runs,
	// into its 1 GiB dynamic space (its default size): the decode reads
	// each version of that range lazily, so its size costs nothing.
	{name: "sbcl", pkg: "sbcl", tools: []string{"sbcl"}, n: 100,
		argv: func(t *testing.T, src, tmp, n string) []string {
			return []string{"sbcl", "--script", filepath.Join(src, "hot.lisp"), n}
		}, out: "sbcl"},
	{name: "tcc", pkg: "tcc", tools: []string{"tcc"}, n: 1500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			return []string{"tcc", "-run", filepath.Join(src, "hot.c"), n}
		}, out: "tcc"},
	{name: "qemu-user", pkg: "qemu-user", tools: []string{"qemu-x86_64", "gcc"}, n: 1500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			guest := filepath.Join(tmp, "guest")
			runtimeBuild(t, "gcc", "-O2", "-static", "-nostdlib", "-fno-builtin", "-o", guest, filepath.Join(src, "guest.c"))
			return []string{"qemu-x86_64", guest, n}
		}, out: "qemu guest"},
	{name: "lli", pkg: "llvm-runtime", tools: []string{"lli"}, n: 1500,
		argv: func(t *testing.T, src, tmp, n string) []string {
			return []string{"lli", filepath.Join(src, "hot.ll"), n}
		}, out: "lli"},
}

// runtimeResult is what every program of testdata/runtimes computes.
func runtimeResult(n int) int {
	acc := 7
	for i := 0; i < n; i++ {
		acc = (acc*31 + i) % 1000003
	}
	return acc
}

// runtimeBuild runs a compiler step of a runtime case.
func runtimeBuild(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
}

// TestRuntimes is the standing trial of real runtimes:
// Erlang (BeamAsm), PyPy, PHP's tracing JIT, Guile 3, SBCL, tcc -run,
// qemu-user (TCG) and LLVM's lli, each on a small program of
// testdata/runtimes. Under the default mode (ptjit run -- PROGRAM) the
// program's stdout, stderr (less ptjit's own lines) and exit status must
// be what they are alone, and ptjit must have recorded its JIT code.
// Under --pt=soft --soft-filter=jit --ground-truth the same holds, every
// instruction stepped must lie in a recorded JIT version (not the vdso),
// and ptjit decode must reproduce every thread's stepped instructions
// exactly, with no decode error.
//
// A runtime that is not installed skips its subtest, naming the package;
// under CI (which installs them all, .ci/run) it fails it.
func TestRuntimes(t *testing.T) {
	e2eSetup(t)
	src, err := filepath.Abs("../../testdata/runtimes")
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range runtimeCases {
		t.Run(rc.name, func(t *testing.T) {
			for _, tool := range rc.tools {
				testenv.Tool(t, tool, rc.pkg)
			}
			start := time.Now()
			argv := rc.argv(t, src, t.TempDir(), strconv.Itoa(rc.n))
			alone := e2eRun(t, argv, rc.env, "", "")
			if want := fmt.Sprintf("%s result %d\n", rc.out, runtimeResult(rc.n)); alone.code != 0 || alone.stdout != want {
				t.Fatalf("%s alone: exit %d, stdout %q (want %q)\nstderr:\n%s", rc.name, alone.code, alone.stdout, want, alone.stderr)
			}

			// The default mode.
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2eRun(t, append([]string{e2e.ptjit, "run", "-o", dir, "--"}, argv...), rc.env, "", "")
			runtimeSameAsAlone(t, "ptjit run", r, alone)
			nv := 0
			for _, h := range e2eHistory(t, dir) {
				if !initialCauses[h.Cause] {
					nv++
				}
			}
			if nv == 0 {
				t.Errorf("ptjit run: no JIT code version recorded")
			}
			t.Logf("default mode: as alone, %d JIT versions; %s", nv, runtimeSummary(r.stderr))

			// Soft PT, JIT code only, against the ground truth.
			dir = filepath.Join(t.TempDir(), "soft")
			gt := filepath.Join(t.TempDir(), "truth")
			r = e2eRunFor(t, max(rc.softLimit, e2eTimeout), append([]string{e2e.ptjit, "run", "--pt=soft", "--soft-filter=jit", "--ground-truth", gt, "-o", dir, "--"}, argv...), rc.env, "", "")
			runtimeSameAsAlone(t, "ptjit run --pt=soft --soft-filter=jit", r, alone)
			truth := groundTruth(t, gt)
			if len(truth) == 0 {
				t.Fatalf("--soft-filter=jit: no JIT instruction stepped\n%s", r.stderr)
			}
			hs := e2eHistory(t, dir)
			nv = 0
			for _, h := range hs {
				if !initialCauses[h.Cause] {
					nv++
				}
			}
			runtimeInJIT(t, hs, truth)
			checkAllFlows(t, dir, truth, "--format=ptxed", "--no-inst")
			ran := runtimeVersionsRun(t, dir)
			if ran == 0 {
				t.Errorf("decode --summary: no code version ran")
			}
			t.Logf("soft PT: %d threads, %d JIT versions recorded, %d of them ran; %s; %v in all",
				len(truth), nv, ran, runtimeSummary(r.stderr), time.Since(start).Round(time.Millisecond))
		})
	}
}

// runtimeSameAsAlone fails unless a run under ptjit printed what the
// program printed alone (stdout, and stderr less ptjit's own lines) and
// ended with its status, and ptjit did not panic.
func runtimeSameAsAlone(t *testing.T, what string, r, alone e2eResult) {
	t.Helper()
	if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("%s: ptjit panicked:\n%s", what, r.stderr)
	}
	var progErr []string
	for _, l := range strings.SplitAfter(r.stderr, "\n") {
		if !strings.HasPrefix(l, "ptjit: ") {
			progErr = append(progErr, l)
		}
	}
	if stderr := strings.Join(progErr, ""); r.code != alone.code || r.stdout != alone.stdout || stderr != alone.stderr {
		t.Fatalf("%s: exit %d, stdout %q, stderr:\n%s\nalone: exit %d, stdout %q, stderr:\n%s", what, r.code, r.stdout, r.stderr, alone.code, alone.stdout, alone.stderr)
	}
}

// runtimeInJIT fails unless every instruction of the ground truth lies in
// a recorded JIT version: the filter traces JIT code alone, and the
// runtime's code must have been recorded (the vdso, cause exec, is not
// JIT code). It is jitOffsets for many instructions and versions: each
// distinct address is looked up once in the versions' merged ranges.
func runtimeInJIT(t *testing.T, hs []historyLine, truth map[int][]uint64) {
	t.Helper()
	type span struct{ lo, hi uint64 }
	var spans []span
	for _, h := range hs {
		if h.Cause == "exec" {
			continue
		}
		a, err := strconv.ParseUint(h.Addr, 0, 64)
		if err != nil {
			t.Fatalf("history: bad addr %q", h.Addr)
		}
		spans = append(spans, span{a, a + h.Size})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	var merged []span
	for _, s := range spans {
		if n := len(merged); n > 0 && s.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, s.hi)
			continue
		}
		merged = append(merged, s)
	}
	seen := map[uint64]bool{}
	for tid, ips := range truth {
		for i, ip := range ips {
			if seen[ip] {
				continue
			}
			seen[ip] = true
			k := sort.Search(len(merged), func(k int) bool { return merged[k].hi > ip })
			if k == len(merged) || ip < merged[k].lo {
				t.Fatalf("tid %d: instruction #%d at %#x is in no recorded JIT version", tid, i, ip)
			}
		}
	}
}

var reVersionRow = regexp.MustCompile(`^\s+\d+\s+region \d+ v\d+$`)

// runtimeVersionsRun returns how many code versions ran in the recording
// in dir, from the "code version" table of ptjit decode --summary.
func runtimeVersionsRun(t *testing.T, dir string) int {
	t.Helper()
	r := e2ePtjit(t, nil, "decode", "-i", dir, "--summary")
	if r.code != 0 {
		t.Fatalf("decode --summary: exit %d: %s", r.code, r.stderr)
	}
	n := 0
	for _, l := range strings.Split(r.stdout, "\n") {
		if reVersionRow.MatchString(l) {
			n++
		}
	}
	return n
}

// runtimeSummary returns ptjit's closing summary lines, for the log.
func runtimeSummary(stderr string) string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if s, ok := strings.CutPrefix(l, "ptjit: "); ok && (strings.Contains(s, " versions, ") || strings.HasPrefix(s, "soft PT: ")) {
			out = append(out, s)
		}
	}
	return strings.Join(out, "; ")
}
