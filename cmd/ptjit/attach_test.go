package main

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/db"
)

// Tests of ptjit run -p PID: attach to a running program, record for a
// while, detach; the program must end as if never traced.

// e2eNeedBPF skips a test where BPF events cannot run (attach needs
// them); under CI, which runs as root on a kernel with BTF, it fails.
func e2eNeedBPF(t *testing.T) {
	t.Helper()
	if err := bpfev.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but BPF events cannot run here: %v", err)
		}
		t.Skipf("attach needs BPF events: %v", err)
	}
}

// attachTarget is a testdata program started alone, for ptjit to attach
// to.
type attachTarget struct {
	cmd      *exec.Cmd
	manifest string
	times    string // ATTACH_JIT_TIMES
	out      bytes.Buffer
	done     chan struct{}
	status   int
}

// startTarget starts attach-jit with args alone; it is killed when the
// test ends.
func startTarget(t *testing.T, args ...string) *attachTarget {
	t.Helper()
	return newTarget(t, true, args...)
}

// newTarget is startTarget; without manifest the program writes none (its
// SHA-256 of every version costs 3 s under --pt=soft), only its times.
func newTarget(t *testing.T, manifest bool, args ...string) *attachTarget {
	t.Helper()
	return newTargetEnv(t, manifest, nil, args...)
}

// newTargetEnv is newTarget with env added to the program's environment.
func newTargetEnv(t *testing.T, manifest bool, env []string, args ...string) *attachTarget {
	t.Helper()
	tmp := t.TempDir()
	a := &attachTarget{manifest: filepath.Join(tmp, "manifest"), times: filepath.Join(tmp, "times"), done: make(chan struct{})}
	a.cmd = exec.Command(e2eProg("attach-jit"), args...)
	a.cmd.Env = append(os.Environ(), "PTJIT_MANIFEST=", "ATTACH_JIT_TIMES="+a.times)
	if manifest {
		a.cmd.Env = append(a.cmd.Env, "PTJIT_MANIFEST="+a.manifest)
	}
	a.cmd.Env = append(a.cmd.Env, env...)
	a.cmd.Stdout = &a.out
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.cmd.Wait()
		a.status = e2eStatus(a.cmd.ProcessState)
		close(a.done)
	}()
	t.Cleanup(func() {
		a.cmd.Process.Kill()
		<-a.done
	})
	return a
}

// lines returns how many versions the target has made so far.
func (a *attachTarget) lines(t *testing.T) int { return len(a.readTimes(t)) }

// jitPage is the address of attach-jit's JIT page, from its first line.
func (a *attachTarget) jitPage(t *testing.T) uint64 {
	t.Helper()
	var page uint64
	if b, err := os.ReadFile(a.times); err != nil {
		t.Fatal(err)
	} else if _, err := fmt.Sscanf(string(b), "0 %d %v", new(int64), &page); err != nil {
		t.Fatalf("%s: %v", a.times, err)
	}
	return page
}

// waitLines waits until the target has made n versions.
func (a *attachTarget) waitLines(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for a.lines(t) < n {
		if time.Now().After(deadline) {
			t.Fatalf("attach-jit made %d versions in 30 s, want %d", a.lines(t), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// wait waits for the target's end.
func (a *attachTarget) wait(t *testing.T) {
	t.Helper()
	select {
	case <-a.done:
	case <-time.After(e2eTimeout):
		t.Fatal("attach-jit did not end")
	}
}

// procStatus returns a field of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("/proc/%d/status has no %s", pid, field)
	return ""
}

// procMaps returns /proc/PID/maps' ranges and protections, without the
// page at skip (the JIT page, which the program toggles RW and RX).
func procMaps(t *testing.T, pid int, skip uint64) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		lo, _, _ := strings.Cut(f[0], "-")
		if a, _ := strconv.ParseUint(lo, 16, 64); a == skip {
			continue
		}
		out = append(out, f[0]+" "+f[1])
	}
	return strings.Join(out, "\n")
}

// checkWindow checks that the versions of the JIT page recorded in dir
// are exactly the program's versions from the attach to the detach: a run
// of consecutive manifest lines made by mprotect, starting after the line
// that was executable at the attach (recorded with cause "attach", unless
// the page was writable then). The program's times (a.times: read right
// after each mprotect returned) and the recording's attach and detach
// times (meta attach_mono_ns, detach_mono_ns; no detach: the process
// ended) name the versions made before the attach and after the detach;
// only a version whose time was read across the attach or the detach
// (its thread stopped between the call's return and the clock read) may
// fall on either side. It returns the first and last manifest index
// recorded.
func checkWindow(t *testing.T, a *attachTarget, dir string) (first, last int) {
	t.Helper()
	ms, times := e2eReadManifest(t, a.manifest), a.readTimes(t)
	meta := recordingMeta(t, dir)
	attachNS, err := strconv.ParseInt(meta["attach_mono_ns"], 10, 64)
	if err != nil {
		t.Fatalf("meta attach_mono_ns %q", meta["attach_mono_ns"])
	}
	detachNS := int64(math.MaxInt64)
	if meta["detached"] == "1" {
		if detachNS, err = strconv.ParseInt(meta["detach_mono_ns"], 10, 64); err != nil {
			t.Fatalf("meta detach_mono_ns %q", meta["detach_mono_ns"])
		}
	}
	before, upTo := -1, -1 // the last versions whose time was read before the attach, before the detach
	for i, ns := range times {
		if ns < attachNS {
			before = i
		}
		if ns < detachNS {
			upTo = i
		}
	}
	page := ms[0].Addr
	index := map[string]int{}
	for i, m := range ms {
		if m.Addr != page {
			t.Fatalf("manifest line %d at %#x, want the one page %#x", i, m.Addr, page)
		}
		index[m.SHA256] = i
	}
	var attach *historyLine
	first, last = -1, -1
	for _, h := range e2eHistory(t, dir) {
		if h.Addr != fmt.Sprintf("%#x", page) {
			continue
		}
		switch h.Cause {
		case "attach":
			h := h
			attach = &h
			continue
		case "mprotect":
		default:
			t.Errorf("JIT page version with cause %q: %v", h.Cause, h)
			continue
		}
		i, ok := index[h.SHA256]
		if !ok {
			t.Errorf("recorded version %v is none of the program's", h)
			continue
		}
		if h.TID != ms[i].TID || h.PID != ms[i].PID || h.Size != ms[i].Size {
			t.Errorf("version %d: recorded %v, manifest %v", i, h, ms[i])
		}
		if first < 0 {
			first = i
		} else if i != last+1 {
			t.Errorf("recorded version %d after %d: versions %d..%d are missing", i, last, last+1, i-1)
		}
		last = i
	}
	if first < 0 {
		t.Fatalf("no version of the JIT page %#x recorded while attached", page)
	}
	if attach != nil && (first == 0 || attach.SHA256 != ms[first-1].SHA256) {
		t.Errorf("the attach version %v is not the version before the first recorded one (%d)", attach, first)
	}
	if first != before+1 && first != before+2 {
		t.Errorf("first recorded version %d; version %d was the last made before the attach", first, before)
	}
	if last != upTo && last != upTo+1 {
		t.Errorf("last recorded version %d; version %d was the last made before the detach", last, upTo)
	}
	return first, last
}

// readTimes reads the target's version times (ATTACH_JIT_TIMES).
func (a *attachTarget) readTimes(t *testing.T) []int64 {
	t.Helper()
	b, err := os.ReadFile(a.times)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var i int
		var ns int64
		var addr string
		if _, err := fmt.Sscanf(l, "%d %d %s", &i, &ns, &addr); err != nil || i != len(out) {
			t.Fatalf("%s: bad line %q", a.times, l)
		}
		out = append(out, ns)
	}
	return out
}

// TestE2EAttach: attach-jit runs alone; ptjit attaches to it twice, a
// while each time, and detaches. Each recording holds exactly the
// versions the program made while attached (checkWindow), the program's
// output and status are those of a run never traced, and after each
// detach it has no tracer, no seccomp filter and its protections as
// before. history and show read the attached recording.
func TestE2EAttach(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	const n, ms, status = "200", "10", "7"
	alone := e2eRun(t, []string{e2eProg("attach-jit"), n, ms, status}, []string{"PTJIT_MANIFEST=/dev/null"}, "", "")
	if alone.code != 7 || !strings.HasPrefix(alone.stdout, "versions 200 ") {
		t.Fatalf("alone: status %d, output %q", alone.code, alone.stdout)
	}
	a := startTarget(t, n, ms, status)
	pid := a.cmd.Process.Pid
	a.waitLines(t, 10)
	page := e2eReadManifest(t, a.manifest)[0].Addr
	filters, maps := procStatus(t, pid, "Seccomp_filters"), procMaps(t, pid, page)
	var windows [][2]int
	for k := range 2 {
		dir := filepath.Join(t.TempDir(), "rec")
		before := a.lines(t)
		r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--duration", "300ms", "-o", dir)
		after := a.lines(t)
		if r.code != 0 {
			t.Fatalf("attach %d: status %d\n%s", k, r.code, r.stderr)
		}
		e2eCheckMessages(t, r.stderr)
		if !strings.Contains(r.stderr, "detached from pid "+strconv.Itoa(pid)) || !strings.Contains(r.stderr, "versions") {
			t.Errorf("attach %d: no summary and detach line:\n%s", k, r.stderr)
		}
		if got := procStatus(t, pid, "TracerPid"); got != "0" {
			t.Errorf("attach %d: TracerPid %s after the detach", k, got)
		}
		if got := procStatus(t, pid, "Seccomp_filters"); got != filters {
			t.Errorf("attach %d: Seccomp_filters %s after the detach, %s before", k, got, filters)
		}
		if got := procMaps(t, pid, page); got != maps {
			t.Errorf("attach %d: /proc/PID/maps after the detach:\n%s\nbefore:\n%s", k, got, maps)
		}
		first, last := checkWindow(t, a, dir)
		t.Logf("attach %d: versions %d..%d of %s recorded (the program had made %d at the start, %d at the end)", k, first, last, n, before, after)
		windows = append(windows, [2]int{first, last})
		meta := recordingMeta(t, dir)
		if meta["attached"] != strconv.Itoa(pid) || meta["detached"] != "1" || meta["events"] != "bpf" {
			t.Errorf("attach %d: meta attached %q detached %q events %q", k, meta["attached"], meta["detached"], meta["events"])
		}
		if k == 0 {
			// the recording reads like any other
			h := e2ePtjit(t, nil, "history", "-i", dir)
			if h.code != 0 || !strings.Contains(h.stdout, "attach") && !strings.Contains(h.stdout, "mprotect") {
				t.Errorf("history: status %d\n%s%s", h.code, h.stdout, h.stderr)
			}
			s := e2ePtjit(t, nil, "show", "-i", dir, fmt.Sprintf("%#x", page), "-n", "2")
			if s.code != 0 || !strings.Contains(s.stdout, "mov") {
				t.Errorf("show: status %d\n%s%s", s.code, s.stdout, s.stderr)
			}
		}
		a.waitLines(t, after+5) // the program runs on
	}
	if windows[1][0] <= windows[0][1] {
		t.Errorf("second attach's versions %v overlap the first's %v", windows[1], windows[0])
	}
	a.wait(t)
	if a.status != alone.code || a.out.String() != alone.stdout {
		t.Errorf("attached twice: status %d, output %q; alone: status %d, output %q", a.status, a.out.String(), alone.code, alone.stdout)
	}
	if got := len(e2eReadManifest(t, a.manifest)); got != 200 {
		t.Errorf("%d versions made, want 200", got)
	}
}

// TestE2EAttachEnd: a process that ends while attached ends the
// recording as a launched one does: ptjit exits with its status, its
// last versions recorded.
func TestE2EAttachEnd(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	a := startTarget(t, "60", "10", "3")
	a.waitLines(t, 5)
	before := a.lines(t)
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(a.cmd.Process.Pid), "-o", dir)
	if r.code != 3 {
		t.Fatalf("status %d, want the program's 3\n%s", r.code, r.stderr)
	}
	a.wait(t)
	if a.out.String() != "versions 60 sum 1770\n" {
		t.Errorf("output %q", a.out.String())
	}
	if first, _ := checkWindow(t, a, dir); first < before {
		t.Errorf("first recorded version %d, but the program had made %d before ptjit started", first, before)
	}
}

// TestE2EAttachErrors: what cannot be attached to fails with one line
// that names the pid, and leaves no recording; usage errors exit 2.
func TestE2EAttachErrors(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	// a pid that does not exist: above pid_max
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-p", "4194305", "-o", dir)
	if r.code == 0 {
		t.Errorf("missing pid: status 0")
	}
	e2eOneLineError(t, r.stderr, "pid 4194305: no such process")
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("missing pid: %s was created", dir)
	}

	// a process already traced: under strace, and under another ptjit
	a := startTarget(t, "100000", "10", "0")
	pid := strconv.Itoa(a.cmd.Process.Pid)
	a.waitLines(t, 2)
	for _, tracer := range [][]string{{"strace", "-p", pid, "-o", "/dev/null"}, {e2e.ptjit, "run", "-q", "-p", pid, "-o", filepath.Join(t.TempDir(), "first")}} {
		if _, err := exec.LookPath(tracer[0]); err != nil {
			t.Logf("%s: not installed", tracer[0])
			continue
		}
		tr := exec.Command(tracer[0], tracer[1:]...)
		if err := tr.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for procStatus(t, a.cmd.Process.Pid, "TracerPid") == "0" && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		r := e2ePtjit(t, nil, "run", "-p", pid, "-o", dir)
		if r.code == 0 {
			t.Errorf("under %s: status 0", tracer[0])
		}
		e2eOneLineError(t, r.stderr, "pid "+pid+": already traced by pid")
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("under %s: %s was created", tracer[0], dir)
		}
		tr.Process.Signal(syscall.SIGINT)
		tr.Wait()
		if got := procStatus(t, a.cmd.Process.Pid, "TracerPid"); got != "0" {
			t.Errorf("%s left pid %s traced by %s", tracer[0], pid, got)
		}
	}
	a.waitLines(t, a.lines(t)+2) // it runs on after both detached

	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"-p", pid, "--", "/bin/true"}, "-p and a PROGRAM"},
		{[]string{"-p", pid, "--events=seccomp"}, "attach needs BPF events: --events=seccomp"},
		{[]string{"-p", pid, "--pt=soft", "--soft-filter=jit"}, "--soft-filter=jit: not with -p"},
		{[]string{"--duration", "1s", "--", "/bin/true"}, "--duration needs -p"},
		{[]string{"-p", "0"}, "-p: not a process id"},
	} {
		r := e2ePtjit(t, nil, append([]string{"run", "-o", dir}, c.args...)...)
		if r.code != 2 {
			t.Errorf("%v: status %d, want 2", c.args, r.code)
		}
		e2eOneLineError(t, r.stderr, c.what)
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: %s was created", c.args, dir)
		}
	}
	if got := procStatus(t, a.cmd.Process.Pid, "Seccomp_filters"); got != "0" {
		t.Errorf("Seccomp_filters %s after the refused attaches", got)
	}
}

// TestE2EAttachStopped: a process stopped by SIGSTOP while attached (a
// group-stop) is detached from (ptjit's SIGINT) and stays stopped, as it
// would without ptjit; SIGCONT lets it run to its normal end.
func TestE2EAttachStopped(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	a := startTarget(t, "100", "10", "4")
	pid := a.cmd.Process.Pid
	a.waitLines(t, 5)
	dir := filepath.Join(t.TempDir(), "rec")
	cmd, stderr := startAttached(t, pid, e2e.ptjit, "run", "-p", strconv.Itoa(pid), "-o", dir)
	a.waitLines(t, a.lines(t)+3) // recorded for a while
	deadline := time.Now().Add(10 * time.Second)
	syscall.Kill(pid, syscall.SIGSTOP)
	for !strings.HasPrefix(procStatus(t, pid, "State"), "t") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stopped := a.lines(t)
	cmd.Process.Signal(syscall.SIGINT)
	if !e2eWaitTimeout(cmd, 30*time.Second) {
		t.Fatalf("ptjit did not detach\n%s", stderr.String())
	}
	if st := e2eStatus(cmd.ProcessState); st != 0 {
		t.Fatalf("ptjit: status %d\n%s", st, stderr.String())
	}
	time.Sleep(100 * time.Millisecond)
	if got := procStatus(t, pid, "State"); !strings.HasPrefix(got, "T") {
		t.Errorf("after the detach: State %q, want T (stopped)", got)
	}
	if got := a.lines(t); got != stopped {
		t.Errorf("stopped process made versions %d..%d", stopped, got-1)
	}
	syscall.Kill(pid, syscall.SIGCONT)
	a.wait(t)
	if a.status != 4 || a.out.String() != "versions 100 sum 4950\n" {
		t.Errorf("status %d, output %q", a.status, a.out.String())
	}
	checkWindow(t, a, dir)
}

// TestE2EAttachSoftPT: --pt=soft from the attach: the seized threads are
// single-stepped until the detach, and ptjit decode reproduces, per
// thread, exactly the instructions they executed meanwhile (the ground
// truth; the sleeping thread executes none), the JIT code's among them; a step in flight at the detach
// leaves no trap behind (the program ends as alone).
func TestE2EAttachSoftPT(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	a := newTarget(t, false, "100", "10", "6", "64") // a version: about 700 steps
	a.waitLines(t, 5)
	page := a.jitPage(t)
	dir := filepath.Join(t.TempDir(), "rec")
	gt := filepath.Join(t.TempDir(), "truth")
	r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(a.cmd.Process.Pid), "--pt=soft", "--ground-truth", gt, "--duration", "1s", "-o", dir)
	if r.code != 0 {
		t.Fatalf("status %d\n%s", r.code, r.stderr)
	}
	e2eCheckMessages(t, r.stderr)
	truth := groundTruth(t, gt)
	tids, total := checkFlows(t, dir, truth)
	jit := 0
	for _, ips := range truth {
		for _, ip := range ips {
			if ip >= page && ip < page+4096 {
				jit++
			}
		}
	}
	t.Logf("%d threads, %d instructions decoded as executed, %d in the JIT page", len(tids), total, jit)
	if jit == 0 {
		t.Errorf("no instruction of the JIT page traced")
	}
	a.wait(t)
	if a.status != 6 || a.out.String() != "versions 100 sum 4950\n" {
		t.Errorf("status %d, output %q", a.status, a.out.String())
	}
}

// attachNodeJS makes 300 JIT functions in about 1.5 s and prints a result
// that does not depend on timing.
const attachNodeJS = `let acc = 0;
for (let n = 0; n < 300; n++) {
  const f = new Function("x", "let s = " + n + "; for (let i = 0; i < 200; i++) s = (s * 31 + x + i) % 1000003; return s;");
  for (let i = 0; i < 2000; i++) acc = (acc + f(i)) % 1000003;
}
console.log("node attach", acc);
`

// TestE2EAttachNode: node (V8: several threads, RWX code space) attached
// mid-run and detached prints what it prints alone and exits 0, with no
// filter left and its RWX memory RWX again; its code at the attach is
// recorded (cause attach, the RWX code space among it), and W^X, applied
// at the attach, records V8's stores into its code while attached.
func TestE2EAttachNode(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	js := filepath.Join(t.TempDir(), "attach.js")
	if err := os.WriteFile(js, []byte(attachNodeJS), 0o644); err != nil {
		t.Fatal(err)
	}
	alone := e2eRun(t, []string{node, js}, nil, "", "")
	if alone.code != 0 || !strings.HasPrefix(alone.stdout, "node attach ") {
		t.Fatalf("alone: status %d, output %q %s", alone.code, alone.stdout, alone.stderr)
	}
	// --perf-basic-prof: V8 writes /tmp/perf-PID.map from its start and
	// keeps it open, so the names of the code at the attach are in it; it
	// also writes a V8 log into its working directory (not this package's)
	cmd := exec.Command(node, "--perf-basic-prof", js)
	cmd.Dir = t.TempDir()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	time.Sleep(300 * time.Millisecond) // V8 is up and compiling
	pid := cmd.Process.Pid
	filters := procStatus(t, pid, "Seccomp_filters")
	rwx := rwxMaps(t, pid)
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--duration", "400ms", "-o", dir)
	if r.code != 0 {
		t.Fatalf("status %d\n%s", r.code, r.stderr)
	}
	e2eCheckMessages(t, r.stderr)
	if got := procStatus(t, pid, "Seccomp_filters"); got != filters {
		t.Errorf("Seccomp_filters %s after the detach, %s before", got, filters)
	}
	after := rwxMaps(t, pid)
	for m := range rwx {
		if p, ok := after[m]; ok && p != "rwxp" {
			t.Errorf("%s was rwxp before the attach, %s after the detach", m, p)
		}
	}
	if !e2eWaitTimeout(cmd, time.Minute) {
		t.Fatal("node did not end")
	}
	if st := e2eStatus(cmd.ProcessState); st != 0 || out.String() != alone.stdout {
		t.Errorf("attached: status %d, output %q; alone %q", st, out.String(), alone.stdout)
	}
	attach, wx := 0, 0
	for _, h := range e2eHistory(t, dir) {
		switch h.Cause {
		case "attach":
			attach++
		case "write", "wx-batch":
			wx++
		}
	}
	meta := recordingMeta(t, dir)
	t.Logf("%d versions at the attach, %d made by stores W^X saw; meta threads %s, versions %s", attach, wx, meta["threads"], meta["versions"])
	if len(rwx) > 0 && wx == 0 {
		t.Errorf("node has RWX memory, but W^X recorded no store while attached")
	}
	if attach == 0 {
		t.Errorf("no version recorded at the attach")
	}
	if n, _ := strconv.Atoi(meta["threads"]); n < 2 {
		t.Errorf("meta threads %q: node has several", meta["threads"])
	}
	// names V8 wrote before the attach, on the versions recorded then
	placed := 0
	for _, n := range historyNames(t, dir) {
		if strings.HasPrefix(n.Name, "JS:") && len(n.Versions) > 0 {
			placed++
		}
	}
	if placed == 0 {
		t.Errorf("no JS: name of node's perf map is placed on a recorded version")
	}
	os.Remove(fmt.Sprintf("/tmp/perf-%d.map", pid))
}

// rwxMaps returns the mappings of pid ("start-end") with their
// protections, those that are writable and executable.
func rwxMaps(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			out[f[0]] = f[1]
		}
	}
	for m, p := range out {
		if p != "rwxp" {
			delete(out, m)
		}
	}
	return out
}

// TestE2EAttachWX: attach-jit writes each version into one page mapped
// writable and executable before the attach (no mprotect). W^X, applied
// at the attach, sees every store while attached: each version the
// program made in the window is recorded with its bytes. After the
// detach the page is RWX again, and the program ends as alone. So too
// where the program has a seccomp filter of its own that lets mprotect
// run (other: it kills only kexec_load), which ptjit reads and runs before
// each call it injects (tracker/progfilter_linux_amd64.go).
func TestE2EAttachWX(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	for _, filter := range []string{"", "other"} {
		t.Run("filter="+filter, func(t *testing.T) {
			a := newTargetEnv(t, true, []string{"ATTACH_JIT_FILTER=" + filter}, "200", "10", "9", "4096", "rwx")
			pid := a.cmd.Process.Pid
			a.waitLines(t, 10)
			ms := e2eReadManifest(t, a.manifest)
			page := ms[0].Addr // the mmap's line, then one write line per version
			maps := procMaps(t, pid, 0)
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--duration", "400ms", "-o", dir)
			if r.code != 0 {
				t.Fatalf("status %d\n%s", r.code, r.stderr)
			}
			e2eCheckMessages(t, r.stderr)
			if got := procMaps(t, pid, 0); got != maps {
				t.Errorf("/proc/PID/maps after the detach:\n%s\nbefore:\n%s", got, maps)
			}
			if !strings.Contains(r.stderr, "writes") {
				t.Errorf("the summary has no writes:\n%s", r.stderr)
			}
			a.wait(t)
			if a.status != 9 || a.out.String() != "versions 200 sum 19900\n" {
				t.Errorf("status %d, output %q", a.status, a.out.String())
			}
			// the versions made between the attach and the detach, by the
			// program's clock; the first and the last may straddle them
			ms, times := e2eReadManifest(t, a.manifest)[1:], a.readTimes(t)
			meta := recordingMeta(t, dir)
			from, _ := strconv.ParseInt(meta["attach_mono_ns"], 10, 64)
			to, _ := strconv.ParseInt(meta["detach_mono_ns"], 10, 64)
			have := map[string]bool{}
			for _, h := range e2eHistory(t, dir) {
				if h.Addr == fmt.Sprintf("%#x", page) {
					have[h.SHA256] = true
				}
			}
			var in []int
			for i, ns := range times {
				if ns > from && ns < to {
					in = append(in, i)
				}
			}
			if len(in) < 5 {
				t.Fatalf("%d versions made while attached", len(in))
			}
			for _, i := range in[1 : len(in)-1] {
				if !have[ms[i].SHA256] {
					t.Errorf("version %d (made while attached) not recorded", i)
				}
			}
			t.Logf("versions %d..%d made while attached, all recorded", in[0], in[len(in)-1])
		})
	}
}

// TestE2EAttachFiltered: attach-jit with a seccomp filter of its own that
// kills, traps or fails mprotect (a sandbox's), installed before the
// attach. ptjit reads the filter and runs it on the protection changes
// W^X would make: each would be refused, so W^X is off for the process,
// ptjit says so in one line naming the filter's answer, and injects
// nothing; the program ends as alone (before, the first change killed it:
// SIGSYS). Its RWX page is left as it was.
func TestE2EAttachFiltered(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	for _, c := range []struct{ filter, answer string }{
		{"kill", "SECCOMP_RET_KILL_PROCESS"},
		{"trap", "SECCOMP_RET_TRAP"},
		{"errno", "SECCOMP_RET_ERRNO(EPERM)"},
	} {
		t.Run(c.filter, func(t *testing.T) {
			a := newTargetEnv(t, true, []string{"ATTACH_JIT_FILTER=" + c.filter}, "60", "10", "9", "4096", "rwx")
			pid := a.cmd.Process.Pid
			a.waitLines(t, 10)
			maps := procMaps(t, pid, 0)
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--duration", "200ms", "-o", dir)
			if r.code != 0 {
				t.Fatalf("status %d\n%s", r.code, r.stderr)
			}
			want := fmt.Sprintf("pid %d: W^X is off for this process: its seccomp filter would answer mprotect(", pid)
			if n := strings.Count(r.stderr, want); n != 1 || !strings.Contains(r.stderr, "with "+c.answer+";") {
				t.Errorf("want one line %q… with %s:\n%s", want, c.answer, r.stderr)
			}
			if got := procMaps(t, pid, 0); got != maps {
				t.Errorf("/proc/PID/maps after the detach:\n%s\nbefore:\n%s", got, maps)
			}
			d, err := db.Open(filepath.Join(dir, "code.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			var n int
			if err := d.SQL().QueryRow(`SELECT count(*) FROM ptjit_prot`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d protection changes recorded; want none", n)
			}
			a.wait(t)
			if a.status != 9 || a.out.String() != "versions 60 sum 1770\n" {
				t.Errorf("status %d, output %q; want 9, \"versions 60 sum 1770\\n\" (as alone)", a.status, a.out.String())
			}
		})
	}
}

// TestE2EAttachLateFilter: attach-jit installs a seccomp filter of its
// own (kill, or fail, on mprotect) while ptjit is attached, after W^X
// made its RWX page executable-only. ptjit says so in one line, emulates
// its stores from then on (no protection change), and stays attached past
// --duration until the program exits (a detach would leave the page
// without write access: the program's next store would kill it). The
// program's output and status are as alone, ptjit exits with that status,
// and the versions the program made after the filter are recorded, its
// last one included.
func TestE2EAttachLateFilter(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	for _, c := range []struct{ filter, answer string }{
		{"kill", "SECCOMP_RET_KILL_PROCESS"},
		{"errno", "SECCOMP_RET_ERRNO(EPERM)"},
	} {
		t.Run(c.filter, func(t *testing.T) {
			a := newTargetEnv(t, true, []string{"ATTACH_JIT_FILTER=" + c.filter, "ATTACH_JIT_FILTER_AT=40"}, "150", "10", "9", "64", "rwx")
			pid := a.cmd.Process.Pid
			a.waitLines(t, 10)
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--duration", "600ms", "-o", dir)
			a.wait(t)
			if a.status != 9 || a.out.String() != "versions 150 sum 11175\n" {
				t.Errorf("status %d, output %q; want 9, \"versions 150 sum 11175\\n\" (as alone)", a.status, a.out.String())
			}
			if r.code != 9 {
				t.Errorf("ptjit exited %d, want the program's 9 (it stayed attached until the end)\n%s", r.code, r.stderr)
			}
			want := fmt.Sprintf("pid %d: a seccomp filter it installed while attached answers mprotect with %s: W^X emulates its stores from now on, and ptjit stays attached until the process exits", pid, c.answer)
			if n := strings.Count(r.stderr, want); n != 1 || strings.Contains(r.stderr, "not run") || strings.Contains(r.stderr, "detached from") {
				t.Errorf("want the line %q once, no refusal told apart and no detach:\n%s", want, r.stderr)
			}
			ms := e2eReadManifest(t, a.manifest)
			have := map[string]bool{}
			for _, h := range e2eHistory(t, dir) {
				have[h.SHA256] = true
			}
			for _, i := range []int{60, 100, 149} { // after the filter (version 40)
				if !have[ms[1+i].SHA256] {
					t.Errorf("version %d, made after the filter, not recorded", i)
				}
			}
		})
	}
}

// TestE2EAttachWXProtect: attach-jit makes each version executable with
// mprotect(RWX). Attached, no filter stops the call: the BPF program
// stops the thread at its exit (stopping mode), where W^X takes PROT_WRITE
// away before the thread runs on. Every version in the window is
// recorded, the program's protections are its own again after the detach
// and it ends as alone.
func TestE2EAttachWXProtect(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	a := startTarget(t, "200", "10", "8", "4096", "rwxprot")
	pid := a.cmd.Process.Pid
	a.waitLines(t, 10)
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--duration", "400ms", "-o", dir)
	if r.code != 0 {
		t.Fatalf("status %d\n%s", r.code, r.stderr)
	}
	e2eCheckMessages(t, r.stderr)
	if got := procStatus(t, pid, "Seccomp_filters"); got != "0" {
		t.Errorf("Seccomp_filters %s after the detach", got)
	}
	a.wait(t)
	if a.status != 8 || a.out.String() != "versions 200 sum 19900\n" {
		t.Errorf("status %d, output %q", a.status, a.out.String())
	}
	checkWindow(t, a, dir)
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var n int
	if err := d.SQL().QueryRow(`SELECT count(*) FROM ptjit_prot WHERE reason LIKE '%applied after the call%'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Errorf("no protection W^X applied at a call's stop")
	}
	t.Logf("%d RWX mprotects made RX at their stop", n)
}

// TestE2EAttachSignals: real-time signals (they queue: alone, none is
// lost) sent to attach-jit all through an attach and its detach reach its
// handler, every one: those that arrive while ptjit is attached are
// delivered as they come, those pending at the detach after it.
func TestE2EAttachSignals(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	const rtSignal = syscall.Signal(35) // glibc's SIGRTMIN+1
	const sent = 300
	a := startTarget(t, "200", "10", "0")
	pid := a.cmd.Process.Pid
	a.waitLines(t, 10)
	dir := filepath.Join(t.TempDir(), "rec")
	cmd := exec.Command(e2e.ptjit, "run", "-p", strconv.Itoa(pid), "--duration", "500ms", "-o", dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range sent {
			syscall.Kill(pid, rtSignal)
			time.Sleep(3 * time.Millisecond) // 0.9 s: before, while and after ptjit is attached
		}
	}()
	if !e2eWaitTimeout(cmd, time.Minute) {
		t.Fatalf("ptjit did not end\n%s", stderr.String())
	}
	<-done
	if st := e2eStatus(cmd.ProcessState); st != 0 {
		t.Fatalf("ptjit: status %d\n%s", st, stderr.String())
	}
	a.wait(t)
	want := fmt.Sprintf("versions 200 sum 19900\nsignals %d\n", sent)
	if a.status != 0 || a.out.String() != want {
		t.Errorf("status %d, output %q, want %q", a.status, a.out.String(), want)
	}
	checkWindow(t, a, dir)
}

// TestE2EAttachIntelPT: --pt=intel with -p. Where the machine has no
// Intel PT, it is refused before anything is touched, with the launch
// path's line and status 2, and the process runs on as alone. Where it
// has (an intel_pt PMU), perf record -p traces the attached process from
// the attach to the detach: perf.data decodes through code.db with no
// error, through the JIT page, and the process ends as alone.
func TestE2EAttachIntelPT(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	a := newTarget(t, false, "150", "10", "5", "64")
	pid := a.cmd.Process.Pid
	a.waitLines(t, 5)
	page := a.jitPage(t)
	dir := filepath.Join(t.TempDir(), "rec")
	if _, err := os.Stat("/sys/bus/event_source/devices/intel_pt/type"); err != nil {
		launch := e2ePtjit(t, nil, "run", "--pt=intel", "-o", filepath.Join(t.TempDir(), "launch"), "--", "/bin/true")
		want := strings.TrimSpace(launch.stderr)
		if launch.code != 2 || !strings.Contains(want, "--pt=intel: this CPU has no Intel PT") {
			t.Fatalf("launch: status %d\n%s", launch.code, launch.stderr)
		}
		r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--pt=intel", "-o", dir)
		if r.code != 2 {
			t.Errorf("status %d, want 2", r.code)
		}
		e2eOneLineError(t, r.stderr, want)
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s was created", dir)
		}
		if got := procStatus(t, pid, "TracerPid"); got != "0" {
			t.Errorf("TracerPid %s", got)
		}
	} else {
		r := e2ePtjit(t, nil, "run", "-p", strconv.Itoa(pid), "--pt=intel", "--duration", "500ms", "-o", dir)
		if r.code != 0 {
			t.Fatalf("status %d\n%s", r.code, r.stderr)
		}
		e2eCheckMessages(t, r.stderr)
		meta := recordingMeta(t, dir)
		attach, _ := strconv.ParseInt(meta["attach_mono_ns"], 10, 64)
		enabled, _ := strconv.ParseInt(meta["perf_enabled_mono_ns"], 10, 64)
		stopped, _ := strconv.ParseInt(meta["perf_stopped_mono_ns"], 10, 64)
		detach, _ := strconv.ParseInt(meta["detach_mono_ns"], 10, 64)
		if !(attach < enabled && enabled < stopped && stopped < detach) {
			t.Errorf("meta: attach %d, perf enabled %d, perf stopped %d, detach %d: want them in this order", attach, enabled, stopped, detach)
		}
		tids, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		jit, total := 0, 0
		for _, e := range tids {
			tid, _ := strconv.Atoi(e.Name())
			ips, errs := decodedFlow(t, dir, tid)
			if len(errs) > 0 {
				t.Errorf("tid %d: decode errors: %v", tid, errs[:min(3, len(errs))])
			}
			for _, ip := range ips {
				if ip >= page && ip < page+4096 {
					jit++
				}
			}
			total += len(ips)
		}
		t.Logf("%d instructions decoded, %d in the JIT page", total, jit)
		if jit == 0 {
			t.Errorf("no instruction of the JIT page %#x decoded", page)
		}
	}
	a.wait(t)
	if a.status != 5 || a.out.String() != "versions 150 sum 11175\n" {
		t.Errorf("status %d, output %q", a.status, a.out.String())
	}
}

// TestE2EAttachBackground: a ptjit started as a shell's background job
// (SIGINT ignored, as a non-interactive shell starts one: `ptjit run -p
// PID &`) still detaches at `kill -INT`: the attach is ptjit's to end,
// and the process attached to inherits nothing from ptjit.
func TestE2EAttachBackground(t *testing.T) {
	e2eSetup(t)
	e2eNeedBPF(t)
	a := startTarget(t, "100", "10", "4")
	pid := a.cmd.Process.Pid
	a.waitLines(t, 5)
	dir := filepath.Join(t.TempDir(), "rec")
	// trap "" INT: ignored, and kept so across exec
	cmd, stderr := startAttached(t, pid, "sh", "-c", `trap "" INT; exec "$@"`, "sh", e2e.ptjit, "run", "-p", strconv.Itoa(pid), "-o", dir)
	a.waitLines(t, a.lines(t)+3) // recorded for a while
	if ign := procStatus(t, cmd.Process.Pid, "SigIgn"); ign == "" {
		t.Fatalf("no SigIgn for ptjit")
	}
	cmd.Process.Signal(syscall.SIGINT)
	if !e2eWaitTimeout(cmd, 30*time.Second) {
		t.Fatalf("ptjit did not detach at SIGINT (it inherited SIGINT ignored)\n%s", stderr.String())
	}
	if st := e2eStatus(cmd.ProcessState); st != 0 || !strings.Contains(stderr.String(), "detached from pid") {
		t.Fatalf("ptjit: status %d, want 0 and its detached line\n%s", st, stderr.String())
	}
	a.wait(t)
	if a.status != 4 || a.out.String() != "versions 100 sum 4950\n" {
		t.Errorf("status %d, output %q", a.status, a.out.String())
	}
	checkWindow(t, a, dir)
}

// startAttached starts argv, a ptjit run -p of pid, and returns once pid
// has a tracer (or after 10 s), with ptjit's stderr.
func startAttached(t *testing.T, pid int, argv ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	stderr := new(bytes.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for procStatus(t, pid, "TracerPid") == "0" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return cmd, stderr
}
