package ptrun

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
)

// fakePerfAttach stands in for `perf record -p PID` on a machine without
// Intel PT. It checks its options, and logs to $FAKE_PERF_LOG one line per
// step ("start", "enabled", "sigint", "died"): the step, the wall clock in
// µs ($EPOCHREALTIME) and the process of the target's tracer then (the
// Tgid of its TracerPid; 0: not traced). Like perf, it
// enables its events when "enable" comes on the control fd and answers
// "ack\n\0" on the ack fd; at SIGINT it writes the file and dies of
// SIGINT. $FAKE_PERF_FAIL: it fails at its start with that message;
// $FAKE_PERF_ACK_DELAY: it waits that long before enabling;
// $FAKE_PERF_DIE: it exits 1 that long after enabling; $FAKE_PERF_NOACK:
// it never enables; $FAKE_PERF_STUCK: it goes on after SIGINT.
const fakePerfAttach = `#!/bin/bash
[ "$1" = record ] || { echo "fake perf: expected record, got $1" >&2; exit 9; }
shift
printf '%s\n' "$@" > "$FAKE_PERF_LOG.argv"
while [ $# -gt 0 ]; do
	case "$1" in
	-o) out=$2; shift ;;
	-e) ev=$2; shift ;;
	-p) pid=$2; shift ;;
	--control=fd:*) c=${1#--control=fd:}; ctl=${c%,*}; ack=${c#*,} ;;
	-q|--switch-events|--delay=-1) ;;
	*) echo "fake perf: unexpected option $1" >&2; exit 9 ;;
	esac
	shift
done
[ -n "$out" ] && [ -n "$ev" ] && [ -n "$pid" ] && [ -n "$ack" ] || { echo "fake perf: missing -o, -e, -p or --control" >&2; exit 9; }
field() { local k v; while read -r k v; do [ "$k" = "$2:" ] && echo "$v"; done < "/proc/$1/status"; }
tracer() { local tp; tp=$(field "$pid" TracerPid); [ "$tp" = 0 ] && echo 0 || field "$tp" Tgid; }
log() { echo "$1 ${EPOCHREALTIME/./} $(tracer)" >> "$FAKE_PERF_LOG"; }
trap 'log sigint; echo trace >> "$out"; [ -n "$FAKE_PERF_STUCK" ] || { trap - INT; kill -INT $$; }' INT
log start
[ -n "$FAKE_PERF_FAIL" ] && { printf 'Error:\n%s\nHint:\tsomething\n' "$FAKE_PERF_FAIL" >&2; exit 1; }
echo header > "$out"
read -r cmd <&"$ctl"
[ "$cmd" = enable ] || { echo "fake perf: control command $cmd" >&2; exit 8; }
[ -n "$FAKE_PERF_ACK_DELAY" ] && sleep "$FAKE_PERF_ACK_DELAY"
[ -n "$FAKE_PERF_NOACK" ] && while :; do sleep 0.01; done
log enabled
printf 'ack\n\0' >&"$ack"
if [ -n "$FAKE_PERF_DIE" ]; then
	sleep "$FAKE_PERF_DIE"
	log died
	echo "fake perf: AUX buffer overflow" >&2
	exit 1
fi
while :; do sleep 0.01; done
`

// fakeStep is a line of the fake perf's log.
type fakeStep struct {
	what   string
	mono   int64 // CLOCK_MONOTONIC ns
	tracer int
}

// ptTarget is testdata's attach-jit, started alone: not a child of this
// process, whose tracer thread attaches to it (a child's ptrace stops
// would reach this process's own wait for it), but of a shell that
// records its output and status.
type ptTarget struct {
	pid                int
	dir                string
	out, status, times string
}

// attachPTSetup makes the PT probe see an intel_pt PMU and the fake perf,
// and starts testdata's attach-jit alone with args. It returns the
// program and the fake's log.
func attachPTSetup(t *testing.T, args ...string) (a *ptTarget, log string) {
	t.Helper()
	if err := bpfev.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but BPF events cannot run here: %v", err)
		}
		t.Skipf("attach needs BPF events: %v", err)
	}
	bin := testenv.TestPrograms(t)
	dir := t.TempDir()
	pmu := filepath.Join(dir, "intel_pt")
	os.MkdirAll(pmu, 0o755)
	os.WriteFile(filepath.Join(pmu, "type"), []byte("8\n"), 0o644)
	old := sysfsPMU
	sysfsPMU = pmu
	t.Cleanup(func() { sysfsPMU = old })
	perf := filepath.Join(dir, "perf")
	os.WriteFile(perf, []byte(fakePerfAttach), 0o755)
	t.Setenv("PTJIT_PERF", perf)
	log = filepath.Join(dir, "log")
	t.Setenv("FAKE_PERF_LOG", log)

	a = &ptTarget{dir: dir, out: filepath.Join(dir, "out"), status: filepath.Join(dir, "status"), times: filepath.Join(dir, "times")}
	pidFile := filepath.Join(dir, "pid")
	sh := exec.Command("/bin/sh", "-c", `( "$@" > "$T_OUT" & echo $! > "$T_PID"; wait $!; echo $? > "$T_STATUS" ) &`,
		"sh", filepath.Join(bin, "attach-jit"))
	sh.Args = append(sh.Args, args...)
	sh.Env = append(os.Environ(), "PTJIT_MANIFEST=", "ATTACH_JIT_TIMES="+a.times, "T_OUT="+a.out, "T_PID="+pidFile, "T_STATUS="+a.status)
	if err := sh.Run(); err != nil { // no pipe: the program would hold it
		t.Fatalf("starting attach-jit: %v", err)
	}
	// running: it has made a version
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(pidFile)
		if a.pid == 0 && strings.HasSuffix(string(b), "\n") {
			a.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			pid := a.pid
			t.Cleanup(func() {
				syscall.Kill(pid, syscall.SIGKILL)
				a.wait(t)
			})
		}
		if b, _ := os.ReadFile(a.times); a.pid != 0 && len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("attach-jit made no version in 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return a, log
}

// wait waits for the target's end and returns its status.
func (a *ptTarget) wait(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(a.status); strings.HasSuffix(string(b), "\n") {
			return strings.TrimSpace(string(b))
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("attach-jit did not end")
	return ""
}

// waitAlone waits for the target's end and checks it ended as alone.
func (a *ptTarget) waitAlone(t *testing.T, want string, status int) {
	t.Helper()
	got := a.wait(t)
	out, _ := os.ReadFile(a.out)
	if got != strconv.Itoa(status) || string(out) != want {
		t.Errorf("attach-jit: status %s, output %q; want %d, %q", got, out, status, want)
	}
}

// readFakeLog reads the fake perf's log, its wall-clock times turned into
// CLOCK_MONOTONIC by the offset between the two clocks now.
func readFakeLog(t *testing.T, log string) []fakeStep {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = 1 << 62 // wall - mono, the smallest of a few reads
	for range 5 {
		mono := clock.Mono()
		wall := time.Now().UnixNano()
		off = min(off, wall-mono)
	}
	var steps []fakeStep
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s fakeStep
		var us int64
		if _, err := fmt.Sscanf(l, "%s %d %d", &s.what, &us, &s.tracer); err != nil {
			t.Fatalf("fake perf log line %q: %v", l, err)
		}
		s.mono = us*1000 - off
		steps = append(steps, s)
	}
	return steps
}

// ourThread reports whether tgid is this test process (the tracker's:
// ptjit is attached).
func ourThread(tgid int) bool { return tgid == os.Getpid() }

// procTracer returns TracerPid of pid.
func procTracer(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "TracerPid:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func recMeta(t *testing.T, dir string) map[string]string {
	t.Helper()
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.Meta()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func metaNS(t *testing.T, m map[string]string, k string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(m[k], 10, 64)
	if err != nil {
		t.Fatalf("meta %s %q", k, m[k])
	}
	return v
}

// TestAttachIntelPT: --pt=intel with -p runs perf record -p PID with the
// launch path's event and options; perf starts after the attach (the
// process is traced by ptjit when it starts, after attach_mono_ns), the
// attach is done once perf acknowledged the enable, and perf is stopped
// (SIGINT, its exit waited for) while ptjit still holds the process,
// before detach_mono_ns. The process ends as alone.
func TestAttachIntelPT(t *testing.T) {
	a, log := attachPTSetup(t, "120", "10", "5")
	pid := a.pid
	dir := filepath.Join(t.TempDir(), "rec")
	var stderr bytes.Buffer
	status, err := Run(Config{OutDir: dir, Attach: pid, Duration: 400 * time.Millisecond, PT: PTIntel, Stderr: &stderr})
	if err != nil || status != 0 {
		t.Fatalf("run: status %d, %v\n%s", status, err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Intel PT: "+filepath.Join(dir, "perf.data")) || !strings.Contains(stderr.String(), "detached from pid") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	argv, _ := os.ReadFile(log + ".argv")
	want := strings.Join(PerfAttachArgs(filepath.Join(dir, "perf.data"), pid, 3, 4)[1:], "\n") + "\n"
	if string(argv) != want {
		t.Errorf("perf's arguments:\n%s\nwant:\n%s", argv, want)
	}
	for _, a := range []string{"-p\n" + strconv.Itoa(pid) + "\n", "-e\n" + perfEvent + "\n", "--switch-events\n"} {
		if !strings.Contains(string(argv), a) {
			t.Errorf("perf's arguments have no %q", a)
		}
	}
	meta := recMeta(t, dir)
	attach, detach := metaNS(t, meta, "attach_mono_ns"), metaNS(t, meta, "detach_mono_ns")
	enabled, stopped := metaNS(t, meta, "perf_enabled_mono_ns"), metaNS(t, meta, "perf_stopped_mono_ns")
	steps := readFakeLog(t, log)
	var names []string
	for _, s := range steps {
		names = append(names, s.what)
	}
	if strings.Join(names, " ") != "start enabled sigint" {
		t.Fatalf("fake perf's steps %v, want start enabled sigint", names)
	}
	start, en, sigint := steps[0], steps[1], steps[2]
	t.Logf("attach %d, perf start +%.2f ms, enabled +%.2f ms, acknowledged +%.2f ms, SIGINT +%.2f ms, exited +%.2f ms, detach +%.2f ms",
		attach, float64(start.mono-attach)/1e6, float64(en.mono-attach)/1e6, float64(enabled-attach)/1e6,
		float64(sigint.mono-attach)/1e6, float64(stopped-attach)/1e6, float64(detach-attach)/1e6)
	if !ourThread(start.tracer) || start.mono <= attach {
		t.Errorf("perf started at %d with the process traced by %d; attach at %d by this process", start.mono, start.tracer, attach)
	}
	if !(en.mono <= enabled && enabled < sigint.mono) {
		t.Errorf("perf enabled at %d, ptjit saw the ack at %d, SIGINT at %d", en.mono, enabled, sigint.mono)
	}
	if !ourThread(sigint.tracer) || sigint.mono >= detach || stopped >= detach {
		t.Errorf("perf got SIGINT at %d with the process traced by %d, exited at %d; detach at %d", sigint.mono, sigint.tracer, stopped, detach)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "perf.data")); string(b) != "header\ntrace\n" {
		t.Errorf("perf.data %q: perf did not finish it", b)
	}
	if got := procTracer(t, pid); got != "0" {
		t.Errorf("TracerPid %s after the detach", got)
	}
	a.waitAlone(t, "versions 120 sum 7140\n", 5)
}

// TestAttachIntelPTPerfDies: a perf that exits with an error while
// attached ends the attach at once: one line saying so (with perf's
// message), the recording kept, and the process runs on as alone.
func TestAttachIntelPTPerfDies(t *testing.T) {
	a, log := attachPTSetup(t, "120", "10", "6")
	t.Setenv("FAKE_PERF_DIE", "0.2")
	dir := filepath.Join(t.TempDir(), "rec")
	var stderr bytes.Buffer
	t0 := time.Now()
	status, err := Run(Config{OutDir: dir, Attach: a.pid, Duration: 20 * time.Second, PT: PTIntel, Quiet: true, Stderr: &stderr})
	if status != 1 || err == nil || !strings.Contains(err.Error(), "exited while attached") || !strings.Contains(err.Error(), "AUX buffer overflow") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("status %d, %v: want 1 and one line with perf's message", status, err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("detached %v after the start: not at perf's exit", d)
	}
	if stderr.Len() != 0 {
		t.Errorf("-q: stderr %q", stderr.String())
	}
	meta := recMeta(t, dir)
	if meta["detached"] != "1" || metaNS(t, meta, "perf_stopped_mono_ns") >= metaNS(t, meta, "detach_mono_ns") {
		t.Errorf("meta detached %q, perf stopped %s, detach %s", meta["detached"], meta["perf_stopped_mono_ns"], meta["detach_mono_ns"])
	}
	steps := readFakeLog(t, log)
	if len(steps) != 3 || steps[2].what != "died" {
		t.Errorf("fake perf's steps %v", steps)
	}
	if got := procTracer(t, a.pid); got != "0" {
		t.Errorf("TracerPid %s after the detach", got)
	}
	a.waitAlone(t, "versions 120 sum 7140\n", 6)
}

// TestAttachIntelPTPerfFails: a perf that fails before its events are
// enabled: one line with perf's message, no recording left, the process
// detached at once and running on as alone.
func TestAttachIntelPTPerfFails(t *testing.T) {
	a, _ := attachPTSetup(t, "100", "10", "7")
	t.Setenv("FAKE_PERF_FAIL", "The sys_perf_event_open() syscall returned with 22 (Invalid argument) for event (intel_pt//u).")
	dir := filepath.Join(t.TempDir(), "rec")
	status, err := Run(Config{OutDir: dir, Attach: a.pid, PT: PTIntel, Quiet: true})
	if status != 1 || err == nil || !strings.Contains(err.Error(), "sys_perf_event_open() syscall returned with 22") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("status %d, %v: want 1 and one line with perf's message", status, err)
	}
	t.Log(err)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %d files in %s", len(ents), dir)
	}
	if got := procTracer(t, a.pid); got != "0" {
		t.Errorf("TracerPid %s after the failed attach", got)
	}
	a.waitAlone(t, "versions 100 sum 4950\n", 7)
}

// TestAttachIntelPTSignal: SIGTERM for ptjit while perf is being started
// (it has not enabled its events yet): perf is stopped, then the process
// is released, ptjit exits 0 and the process runs on as alone.
func TestAttachIntelPTSignal(t *testing.T) {
	a, log := attachPTSetup(t, "120", "10", "8")
	t.Setenv("FAKE_PERF_ACK_DELAY", "0.5")
	dir := filepath.Join(t.TempDir(), "rec")
	go func() {
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			if b, _ := os.ReadFile(log); len(b) > 0 { // perf runs: ptjit catches SIGTERM
				syscall.Kill(os.Getpid(), syscall.SIGTERM)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	var stderr bytes.Buffer
	status, err := Run(Config{OutDir: dir, Attach: a.pid, Duration: 20 * time.Second, PT: PTIntel, Stderr: &stderr})
	if status != 0 || err != nil {
		t.Fatalf("status %d, %v\n%s", status, err, stderr.String())
	}
	steps := readFakeLog(t, log)
	meta := recMeta(t, dir)
	if len(steps) < 2 || steps[len(steps)-1].what != "sigint" || !ourThread(steps[len(steps)-1].tracer) || steps[len(steps)-1].mono >= metaNS(t, meta, "detach_mono_ns") {
		t.Errorf("fake perf's steps %v; detach at %s", steps, meta["detach_mono_ns"])
	}
	if got := procTracer(t, a.pid); got != "0" {
		t.Errorf("TracerPid %s after the detach", got)
	}
	a.waitAlone(t, "versions 120 sum 7140\n", 8)
}

// TestAttachIntelPTUnavailable: where Intel PT cannot record, --pt=intel
// with -p gives the launch path's error, exits 2 and touches nothing;
// auto records no trace and says so once.
func TestAttachIntelPTUnavailable(t *testing.T) {
	a, log := attachPTSetup(t, "100", "10", "9")
	sysfsPMU = filepath.Join(t.TempDir(), "none")
	_, want := IntelPT()
	dir := filepath.Join(t.TempDir(), "rec")
	status, err := Run(Config{OutDir: dir, Attach: a.pid, PT: PTIntel, Quiet: true})
	if status != 2 || !errors.Is(err, ErrNoIntelPT) || err.Error() != want.Error() {
		t.Fatalf("status %d, %v; want 2 and %v", status, err, want)
	}
	if _, err := os.Stat(dir); err == nil {
		t.Errorf("%s was created", dir)
	}
	var stderr bytes.Buffer
	status, err = Run(Config{OutDir: dir, Attach: a.pid, PT: PTAuto, Duration: 200 * time.Millisecond, Stderr: &stderr})
	if status != 0 || err != nil || strings.Count(stderr.String(), "no PT trace recorded") != 1 {
		t.Fatalf("auto: %d %v\n%s", status, err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "perf.data")); err == nil {
		t.Error("auto without Intel PT wrote a perf.data")
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("perf was run")
	}
	a.waitAlone(t, "versions 100 sum 4950\n", 9)
}

// TestAttachIntelPTPerfStuck: a perf that never enables its events is
// given up after perfReadyWait (one line, no recording); one that goes on
// after SIGINT is killed after perfStopWait, before the detach (one line,
// the recording kept). The process runs on as alone both times.
func TestAttachIntelPTPerfStuck(t *testing.T) {
	a, log := attachPTSetup(t, "150", "10", "3")
	oldReady, oldStop := perfReadyWait, perfStopWait
	perfReadyWait, perfStopWait = 300*time.Millisecond, 300*time.Millisecond
	defer func() { perfReadyWait, perfStopWait = oldReady, oldStop }()

	t.Setenv("FAKE_PERF_NOACK", "1")
	dir := filepath.Join(t.TempDir(), "rec")
	status, err := Run(Config{OutDir: dir, Attach: a.pid, PT: PTIntel, Quiet: true})
	if status != 1 || err == nil || !strings.Contains(err.Error(), "not enabled within 300ms") {
		t.Fatalf("no ack: status %d, %v", status, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("no ack: left %d files in %s", len(ents), dir)
	}
	if got := procTracer(t, a.pid); got != "0" {
		t.Errorf("no ack: TracerPid %s", got)
	}

	os.Unsetenv("FAKE_PERF_NOACK")
	os.Remove(log)
	t.Setenv("FAKE_PERF_STUCK", "1")
	status, err = Run(Config{OutDir: dir, Attach: a.pid, PT: PTIntel, Duration: 200 * time.Millisecond, Quiet: true})
	if status != 1 || err == nil || !strings.Contains(err.Error(), "killed") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("stuck: status %d, %v", status, err)
	}
	meta := recMeta(t, dir)
	if meta["detached"] != "1" || metaNS(t, meta, "perf_stopped_mono_ns") >= metaNS(t, meta, "detach_mono_ns") {
		t.Errorf("stuck: meta detached %q, perf stopped %s, detach %s", meta["detached"], meta["perf_stopped_mono_ns"], meta["detach_mono_ns"])
	}
	if got := procTracer(t, a.pid); got != "0" {
		t.Errorf("stuck: TracerPid %s", got)
	}
	a.waitAlone(t, "versions 150 sum 11175\n", 3)
}

// TestAttachIntelPTRealPerf: the installed perf, on a machine without
// Intel PT (the PT probe fooled): perf cannot open the event and exits at
// its start; ptjit says so in one line, leaves nothing and the process
// runs on as alone.
func TestAttachIntelPTRealPerf(t *testing.T) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		t.Skip("perf is not installed")
	}
	if _, err := os.Stat("/sys/bus/event_source/devices/intel_pt/type"); err == nil {
		t.Skip("this machine has Intel PT: cmd/ptjit's TestE2EAttachIntelPT runs the real thing")
	}
	a, _ := attachPTSetup(t, "100", "10", "4")
	t.Setenv("PTJIT_PERF", perf)
	dir := filepath.Join(t.TempDir(), "rec")
	status, err := Run(Config{OutDir: dir, Attach: a.pid, PT: PTIntel, Quiet: true})
	if status != 1 || err == nil || !strings.HasPrefix(err.Error(), "perf record exited before it was recording") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("status %d, %v: want 1 and one line", status, err)
	}
	t.Log(err)
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("left %d files in %s", len(ents), dir)
	}
	if got := procTracer(t, a.pid); got != "0" {
		t.Errorf("TracerPid %s", got)
	}
	a.waitAlone(t, "versions 100 sum 4950\n", 4)
}
