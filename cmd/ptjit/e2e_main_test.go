package main

// End-to-end test harness: the e2e tests run bin/ptjit as a subprocess on the
// C programs of testdata/ and compare what ptjit recorded with each program's
// own manifest (see testdata/README.md for the manifest format).
//
// The ptjit binary is built once per test binary into a temporary directory
// (or taken from $PTJIT_BIN), and testdata is built with make -C testdata,
// lazily on the first e2e test so the package's other tests do not pay for
// it. TestMain removes the temporary directory and checks that no test left a
// child process behind.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/internal/testmain"
)

var e2e struct {
	once    sync.Once
	tmp     string // removed by TestMain
	ptjit   string // the ptjit binary under test
	bin     string // testdata/bin
	initErr error
}

func TestMain(m *testing.M) {
	testmain.Run(m, func() {
		if e2e.tmp != "" {
			os.RemoveAll(e2e.tmp)
		}
	})
}

// e2eSetup builds ptjit and the test programs once and returns the paths.
func e2eSetup(t *testing.T) {
	t.Helper()
	e2e.once.Do(func() {
		var err error
		if e2e.bin, err = testenv.BuildTestPrograms(); err != nil {
			e2e.initErr = err
			return
		}
		if p := os.Getenv("PTJIT_BIN"); p != "" {
			e2e.ptjit, err = filepath.Abs(p)
			if err != nil {
				e2e.initErr = err
				return
			}
		} else {
			e2e.tmp, err = os.MkdirTemp("", "ptjit-e2e-")
			if err != nil {
				e2e.initErr = err
				return
			}
			e2e.ptjit = filepath.Join(e2e.tmp, "ptjit")
			cmd := exec.Command("go", "build", "-o", e2e.ptjit, ".")
			if out, err := cmd.CombinedOutput(); err != nil {
				e2e.initErr = fmt.Errorf("go build: %v\n%s", err, out)
				return
			}
		}
	})
	if e2e.initErr != nil {
		t.Fatal(e2e.initErr)
	}
}

// e2eProg returns the path of a testdata program.
func e2eProg(name string) string { return filepath.Join(e2e.bin, name) }

// e2eTimeout bounds every command an e2e test runs, so that a hang fails
// the test instead of the whole test binary. It leaves room for slow
// hours: this VM's single step cost 145–160 µs at 15:17 on 2026-11-26
// (testdata/stepbench, load 0.8; 12–17 µs on other days), and a soft-PT
// run of 138,000 steps that takes 22 s then ran past 2 minutes in a test
// run beside other packages' tests.
const e2eTimeout = 5 * time.Minute

// e2eResult is what one process run produced.
type e2eResult struct {
	stdout, stderr string
	code           int // exit status, 128+N when killed by signal N
}

// e2eRun runs argv with extra environment variables, stdin and working
// directory (both optional) and returns its output and shell-style status.
func e2eRun(t *testing.T, argv []string, env []string, stdin string, dir string) e2eResult {
	t.Helper()
	return e2eRunFor(t, e2eTimeout, argv, env, stdin, dir)
}

// e2eRunFor is e2eRun with a bound of its own, for the few runs known to
// take longer than e2eTimeout (java stepped under the soft filter).
func e2eRunFor(t *testing.T, limit time.Duration, argv []string, env []string, stdin string, dir string) e2eResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = dir
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s: still running after %v, killed\nstderr:\n%s", strings.Join(argv, " "), limit, errb.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("%s: %v", strings.Join(argv, " "), err)
	}
	return e2eResult{out.String(), errb.String(), e2eStatus(cmd.ProcessState)}
}

// e2eStatus converts a wait status the way a shell does.
func e2eStatus(ps *os.ProcessState) int {
	ws := ps.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// e2ePtjit runs bin/ptjit with args.
func e2ePtjit(t *testing.T, env []string, args ...string) e2eResult {
	t.Helper()
	return e2eRun(t, append([]string{e2e.ptjit}, args...), env, "", "")
}

// e2eCheckMessages fails when stderr (of a ptjit run whose program writes
// nothing there) has a panic or a line without the "ptjit: " prefix.
func e2eCheckMessages(t *testing.T, stderr string) {
	t.Helper()
	if strings.Contains(stderr, "panic:") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("ptjit panicked:\n%s", stderr)
	}
	for _, l := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "ptjit: ") {
			t.Errorf("stderr line without the ptjit: prefix: %q", l)
		}
	}
}

// manifestLine is one line of a test program's manifest.
type manifestLine struct {
	Addr   uint64
	Size   uint64
	SHA256 string
	Cause  string
	PID    int
	TID    int
}

func (m manifestLine) String() string {
	return fmt.Sprintf("%#x+%d %s %.16s pid %d tid %d", m.Addr, m.Size, m.Cause, m.SHA256, m.PID, m.TID)
}

func e2eReadManifest(t *testing.T, path string) []manifestLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ms []manifestLine
	for i, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if l == "" {
			continue
		}
		f := strings.Fields(l)
		if len(f) != 6 {
			t.Fatalf("%s:%d: want 6 fields, got %q", path, i+1, l)
		}
		var m manifestLine
		var errs [4]error
		m.Addr, errs[0] = strconv.ParseUint(f[0], 0, 64)
		m.Size, errs[1] = strconv.ParseUint(f[1], 10, 64)
		m.SHA256, m.Cause = f[2], f[3]
		m.PID, errs[2] = strconv.Atoi(f[4])
		m.TID, errs[3] = strconv.Atoi(f[5])
		if err := errors.Join(errs[:]...); err != nil || len(m.SHA256) != 64 {
			t.Fatalf("%s:%d: bad line %q: %v", path, i+1, l, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// historyLine is the part of one `ptjit history --json` object the tests use.
type historyLine struct {
	PID    int    `json:"pid"`
	TID    int    `json:"tid"`
	Addr   string `json:"addr"`
	IP     string `json:"ip"`
	Size   uint64 `json:"size"`
	TSC    uint64 `json:"tsc"`
	Cause  string `json:"cause"`
	SHA256 string `json:"sha256"`
}

func (h historyLine) String() string {
	return fmt.Sprintf("%s+%d %s %.16s pid %d tid %d", h.Addr, h.Size, h.Cause, h.SHA256, h.PID, h.TID)
}

// e2eHistory runs ptjit history --json on dir and parses every line.
func e2eHistory(t *testing.T, dir string) []historyLine {
	t.Helper()
	r := e2ePtjit(t, nil, "history", "-i", dir, "--json")
	if r.code != 0 {
		t.Fatalf("ptjit history -i %s --json: status %d\n%s", dir, r.code, r.stderr)
	}
	var hs []historyLine
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for n := 1; sc.Scan(); n++ {
		var h historyLine
		if err := json.Unmarshal(sc.Bytes(), &h); err != nil {
			t.Fatalf("history line %d: %v: %s", n, err, sc.Text())
		}
		if !strings.HasPrefix(h.Addr, "0x") || !strings.HasPrefix(h.IP, "0x") {
			t.Fatalf("history line %d: addr/ip not 0x strings: %s", n, sc.Text())
		}
		hs = append(hs, h)
	}
	return hs
}

// initialCauses are versions no program call made: the vdso and other
// executable anonymous memory found at exec, and what a child inherits.
var initialCauses = map[string]bool{"exec": true, "fork": true, "vfork": true, "clone": true}

// e2eCompare checks that the versions in hs are exactly the manifest lines
// ms, process by process, in order: address, size, SHA-256, thread and
// cause. A manifest cause "write" (a store into an RWX page) matches any
// cause ptjit uses for versions made by writes; a wx-fresh or wx-tcb
// version's thread is the one that first ran it, not the writer. With collapse, a recorded version identical
// (address, size, bytes) to the one just before it in the same process is
// dropped first: in W^X batch mode a thread executing the page can make
// ptjit snapshot it between another thread's write fault and its store,
// which gives a second, identical version.
func e2eCompare(t *testing.T, ms []manifestLine, hs []historyLine, collapse bool) {
	t.Helper()
	want := map[int][]manifestLine{}
	var pids []int
	for _, m := range ms {
		if want[m.PID] == nil {
			pids = append(pids, m.PID)
		}
		want[m.PID] = append(want[m.PID], m)
	}
	got := map[int][]historyLine{}
	for i, h := range hs {
		if h.Cause == "fork" || h.Cause == "clone" {
			// what a child inherits must be what another process had
			if !e2eSeenBefore(hs[:i], h) {
				t.Errorf("inherited version %v matches no earlier version of another process", h)
			}
		}
		if initialCauses[h.Cause] {
			continue
		}
		if want[h.PID] == nil {
			t.Errorf("version in a process that reported none: %v", h)
			continue
		}
		if g := got[h.PID]; collapse && len(g) > 0 {
			if p := g[len(g)-1]; p.Addr == h.Addr && p.Size == h.Size && p.SHA256 == h.SHA256 {
				t.Logf("pid %d: identical consecutive version dropped: %v", h.PID, h)
				continue
			}
		}
		got[h.PID] = append(got[h.PID], h)
	}
	for _, pid := range pids {
		w, g := want[pid], got[pid]
		if len(g) != len(w) {
			t.Errorf("pid %d: %d versions recorded, manifest has %d", pid, len(g), len(w))
		}
		bad := len(g) != len(w)
		for i := 0; i < len(w) && i < len(g); i++ {
			m, h := w[i], g[i]
			addr, err := strconv.ParseUint(h.Addr, 0, 64)
			// A wx-fresh or wx-tcb version is recorded when its page
			// first runs, by the thread that runs it: no store into
			// fresh memory or a thread's control block stops, so the
			// writer is not known (tracker/doc.go).
			ok := err == nil && addr == m.Addr && h.Size == m.Size && h.SHA256 == m.SHA256 && (h.TID == m.TID || h.Cause == "wx-fresh" || h.Cause == "wx-tcb") &&
				(h.Cause == m.Cause || m.Cause == "write" && !initialCauses[h.Cause] && h.Cause != "mmap" && h.Cause != "mprotect")
			if !ok {
				t.Errorf("pid %d version %d:\n  recorded %v\n  manifest %v", pid, i, h, m)
				bad = true
			}
		}
		if bad {
			t.Logf("manifest of pid %d:", pid)
			for _, m := range w {
				t.Logf("  %v", m)
			}
			t.Logf("recorded for pid %d:", pid)
			for _, h := range g {
				t.Logf("  %v", h)
			}
		}
	}
}

// e2eSeenBefore reports whether a process other than h's recorded a version
// with h's address, size and bytes among earlier.
func e2eSeenBefore(earlier []historyLine, h historyLine) bool {
	for _, e := range earlier {
		if e.PID != h.PID && e.Addr == h.Addr && e.Size == h.Size && e.SHA256 == h.SHA256 {
			return true
		}
	}
	return false
}

// withoutWrites drops the "write" lines: what a recorder that does not
// enforce W^X can see.
func withoutWrites(ms []manifestLine) []manifestLine {
	var out []manifestLine
	for _, m := range ms {
		if m.Cause != "write" {
			out = append(out, m)
		}
	}
	return out
}

// e2eWaitGone waits (bounded) until pid no longer exists or is a zombie.
func e2eWaitGone(pid int) bool {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && len(b) > i+2 && b[i+2] == 'Z' {
			return true
		}
	}
	return false
}

// e2eWaitQuit is e2eWaitTimeout for a command that should have ended:
// past d it calls look (to see the state ptjit is stuck in), then sends
// SIGQUIT, so that the Go runtime writes every goroutine's stack to the
// command's stderr (ptjit does not catch SIGQUIT), and kills it 3 s later.
func e2eWaitQuit(cmd *exec.Cmd, d time.Duration, look func()) bool {
	return e2eWait(cmd, d, func(done <-chan struct{}) {
		look()
		cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-done:
		case <-time.After(3 * time.Second):
			cmd.Process.Kill()
		}
	})
}

// e2eWaitTimeout waits for cmd; after d it kills it (and so, through
// PTRACE_O_EXITKILL, its tracees), waits and returns false.
func e2eWaitTimeout(cmd *exec.Cmd, d time.Duration) bool {
	return e2eWait(cmd, d, func(<-chan struct{}) { cmd.Process.Kill() })
}

// e2eWait waits for cmd; after d it calls stop (which must make cmd end)
// with the channel closed when cmd.Wait returns, waits, and returns false.
func e2eWait(cmd *exec.Cmd, d time.Duration, stop func(done <-chan struct{})) bool {
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		stop(done)
		<-done
		return false
	}
}
