package main

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestE2EEventsStops: stopbench makes 300 versions of one page (RW, write,
// RX: 600 mprotect calls). With --events=seccomp every RX stops; with
// --events=bpf none does: the versions come from the ring buffer, with
// their bytes, and the stop count (meta "stops", the summary's) is the
// run's few others (exec, exit, file mappings). Both record every version
// byte-exact against the manifest, same output, same status. The same
// with a shared file mapped writable beside the region (stopbench's
// "shared", as java's hsperfdata): with bpf, the calls that can change a
// shared mapping stop (an alias of code may exist), and no other; when
// every mprotect stopped in such a process, java stopped more under bpf
// than under seccomp.
func TestE2EEventsStops(t *testing.T) {
	e2eSetup(t)
	sources := e2eEventSources(t)
	if len(sources) < 2 {
		t.Skip("BPF events cannot run here")
	}
	const versions = 300
	for _, shared := range []bool{false, true} {
		args := []string{"run", strconv.Itoa(versions), "1"}
		if shared {
			args = append(args, "shared")
		}
		p := e2eProgram{name: "stopbench", args: args, mask: regexp.MustCompile(`\d+ ns`)}
		stops := map[string]int{}
		for _, events := range sources {
			ms, dir := e2eRecord(t, p, "--pt=off", "--events="+events)
			if len(ms) != versions {
				t.Fatalf("%s %v: %d manifest lines, want %d", events, args, len(ms), versions)
			}
			e2eCompare(t, ms, e2eHistory(t, dir), false)
			meta := recordingMeta(t, dir)
			n, err := strconv.Atoi(meta["stops"])
			if err != nil || meta["events"] != events {
				t.Fatalf("%s %v: meta stops %q events %q", events, args, meta["stops"], meta["events"])
			}
			stops[events] = n
			if events == "bpf" {
				if applied, _ := strconv.Atoi(meta["events_applied"]); applied < versions {
					t.Errorf("bpf %v: %d calls applied from the ring, want at least %d", args, applied, versions)
				}
			}
		}
		t.Logf("%v: stops for %d versions: seccomp %d, bpf %d", args, versions, stops["seccomp"], stops["bpf"])
		if stops["seccomp"] < versions {
			t.Errorf("seccomp %v: %d stops, want one per version at least (%d)", args, stops["seccomp"], versions)
		}
		if stops["bpf"] >= versions/10 {
			t.Errorf("bpf %v: %d stops for %d versions: the versions stopped", args, stops["bpf"], versions)
		}
	}
}

// TestE2EEventsFallback forces the BPF program's fallback: with a budget
// of one page, every call that makes more executable falls back to a
// stop (SIGSTOP from the kernel, which the program never sees) where
// ptjit reads the range; a fresh mapping's untouched pages fall back as
// not present. Every version stays exact, output and status as alone.
func TestE2EEventsFallback(t *testing.T) {
	e2eSetup(t)
	if len(e2eEventSources(t)) < 2 {
		t.Skip("BPF events cannot run here")
	}
	t.Run("stopbench", func(t *testing.T) {
		const versions = 50
		p := e2eProgram{name: "stopbench", args: []string{"run", strconv.Itoa(versions), "2"}, mask: regexp.MustCompile(`\d+ ns`)}
		ms, dir := e2eRecord(t, p, "--pt=off", "--events=bpf", "--bpf-budget=1")
		e2eCompare(t, ms, e2eHistory(t, dir), false)
		meta := recordingMeta(t, dir)
		if n, _ := strconv.Atoi(meta["events_fallbacks"]); n < versions {
			t.Errorf("%d fallbacks, want one per version at least (%d)", n, versions)
		}
		if n, _ := strconv.Atoi(meta["stops"]); n < versions {
			t.Errorf("%d stops, want a fallback stop per version at least (%d)", n, versions)
		}
	})
	for _, p := range e2ePrograms {
		p := p
		t.Run(strings.Join(append([]string{p.name}, p.args...), "_"), func(t *testing.T) {
			flags := []string{"--events=bpf", "--bpf-budget=1"}
			if p.rwx {
				flags = append(flags, "--wx=off")
			}
			ms, dir := e2eRecord(t, p, flags...)
			if p.rwx {
				ms = withoutWrites(ms)
			}
			e2eCompare(t, ms, e2eHistory(t, dir), false)
		})
	}
}

// TestE2EEventsOptions: a bad --events, BPF events with an option that
// needs the stops, and --bpf-budget without BPF events are refused with
// status 2 and one line, before anything runs; auto says in one line why
// it falls back to seccomp, and the run goes on.
func TestE2EEventsOptions(t *testing.T) {
	e2eSetup(t)
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"--events=ebpf"}, `--events: "ebpf" is not auto, bpf or seccomp`},
		{[]string{"--events=bpf", "--pt=soft"}, "--events=bpf: --pt=soft needs every call that adds PROT_EXEC at its entry"},
		{[]string{"--events=bpf", "--copy=changed"}, "--events=bpf: --copy=changed reads changed pages at stops"},
		{[]string{"--bpf-budget=1"}, "--bpf-budget and --bpf-cache need --events=bpf or auto"},
		{[]string{"--bpf-cache=-1"}, "--bpf-budget and --bpf-cache need --events=bpf or auto"},
	} {
		dir := filepath.Join(t.TempDir(), "rec")
		r := e2ePtjit(t, nil, append(append([]string{"run", "-o", dir}, c.args...), "--", e2eProg("exitcode"), "0")...)
		if r.code != 2 {
			t.Errorf("%v: status %d, want 2", c.args, r.code)
		}
		e2eOneLineError(t, r.stderr, c.what)
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%v: %s was created", c.args, dir)
		}
	}
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-o", dir, "--pt=soft", "--events=auto", "--", e2eProg("exitcode"), "0")
	if r.code != 0 || !strings.HasPrefix(r.stderr, "ptjit: events from seccomp stops, not BPF: --pt=soft needs") {
		t.Errorf("auto with --pt=soft: status %d, stderr:\n%s", r.code, r.stderr)
	}
	if meta := recordingMeta(t, dir); meta["events"] != "seccomp" {
		t.Errorf("auto with --pt=soft: meta events %q, want seccomp", meta["events"])
	}
}

// TestE2EEventsTime: each version's time is inside its call, as the
// program saw it: bpfev-jit reads the TSC right before and right after
// each mprotect that makes a version executable (its "exec" lines), and
// the version ptjit recorded has a TSC between the two, with each event
// source (BPF: the event's CLOCK_MONOTONIC time put on the TSC base;
// seccomp: the TSC read at the call's stop). The bound allows slack for
// the conversion (slackNS, logged with the largest distance seen).
func TestE2EEventsTime(t *testing.T) {
	e2eSetup(t)
	const versions, slackNS = 100, 5000
	for _, events := range e2eEventSources(t) {
		t.Run(events, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2eRun(t, []string{e2e.ptjit, "run", "-q", "--pt=off", "--events=" + events, "-o", dir, "--",
				e2eProg("bpfev-jit"), "toggle", strconv.Itoa(versions)}, nil, "go\n", "")
			if r.code != 0 {
				t.Fatalf("status %d\n%s", r.code, r.stderr)
			}
			type window struct {
				addr     string
				tsc0, t1 uint64
			}
			var ws []window
			for _, l := range strings.Split(r.stdout, "\n") {
				f := strings.Fields(l)
				if len(f) != 5 || f[0] != "exec" {
					continue
				}
				t0, _ := strconv.ParseUint(f[3], 10, 64)
				t1, _ := strconv.ParseUint(f[4], 10, 64)
				ws = append(ws, window{f[2], t0, t1})
			}
			if len(ws) != versions {
				t.Fatalf("%d exec lines, want %d\n%s", len(ws), versions, r.stdout)
			}
			hz, err := strconv.ParseFloat(recordingMeta(t, dir)["tsc_hz"], 64)
			if err != nil || hz == 0 {
				t.Fatalf("meta tsc_hz: %v", err)
			}
			slack := uint64(hz * slackNS / 1e9)
			var hs []historyLine
			for _, h := range e2eHistory(t, dir) {
				if h.Cause == "mprotect" && h.Addr == ws[0].addr {
					hs = append(hs, h)
				}
			}
			if len(hs) != versions {
				t.Fatalf("%d versions at %s, want %d", len(hs), ws[0].addr, versions)
			}
			worst := math.Inf(-1)
			for i, w := range ws {
				h := hs[i]
				if h.TSC+slack < w.tsc0 || h.TSC > w.t1+slack {
					t.Errorf("version %d: TSC %d outside its call [%d, %d] (+- %d)", i, h.TSC, w.tsc0, w.t1, slack)
				}
				for _, d := range []float64{float64(w.tsc0) - float64(h.TSC), float64(h.TSC) - float64(w.t1)} {
					worst = max(worst, d/hz*1e9)
				}
			}
			t.Logf("%s: %d versions, the farthest %.0f ns outside its call (negative: all inside)", events, versions, worst)
		})
	}
}

// TestE2EEventsUnprivileged: where BPF cannot load (another user; root
// without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN, as in a restricted
// container), --events=auto records from seccomp stops and says why in
// one line, and --events=bpf is refused with status 2 and that line,
// before anything runs. ptjit and the program are copied where the
// other user can run them, into a directory it may write.
func TestE2EEventsUnprivileged(t *testing.T) {
	e2eSetup(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to run ptjit as another user")
	}
	testenv.Tool(t, "setpriv", "util-linux")
	shared, err := os.MkdirTemp("", "ptjit-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	bin, prog := filepath.Join(shared, "ptjit"), filepath.Join(shared, "exitcode")
	for _, c := range [][2]string{{e2e.ptjit, bin}, {e2eProg("exitcode"), prog}} {
		if out, err := exec.Command("cp", c[0], c[1]).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
		os.Chmod(c[1], 0o755)
	}
	for _, who := range []struct {
		name string
		argv []string
		why  string
	}{
		{"another user", []string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"}, "not root and no CAP_BPF+CAP_PERFMON"},
		{"root without CAP_BPF", []string{"setpriv", "--inh-caps=-all", "--bounding-set=-bpf,-perfmon,-sys_admin"}, "root without CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN"},
	} {
		t.Run(who.name, func(t *testing.T) {
			dir := filepath.Join(shared, strings.ReplaceAll(who.name, " ", "-"))
			run := func(events string) e2eResult {
				return e2eRun(t, append(append([]string{}, who.argv...), bin, "run", "--pt=off", "--events="+events, "-o", dir, "--", prog, "7"), nil, "", "")
			}
			r := run("bpf")
			if r.code != 2 {
				t.Errorf("--events=bpf: status %d, want 2\n%s", r.code, r.stderr)
			}
			e2eOneLineError(t, r.stderr, "--events=bpf: "+who.why)
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("--events=bpf: %s was created", dir)
			}
			r = run("auto")
			if r.code != 7 {
				t.Errorf("--events=auto: status %d, want the program's 7\n%s", r.code, r.stderr)
			}
			e2eCheckMessages(t, r.stderr)
			if want := "ptjit: events from seccomp stops, not BPF: " + who.why; !strings.HasPrefix(r.stderr, want) || strings.Count(r.stderr, "not BPF") != 1 {
				t.Errorf("--events=auto: stderr does not start with %q once:\n%s", want, r.stderr)
			}
			if meta := recordingMeta(t, dir); meta["events"] != "seccomp" {
				t.Errorf("--events=auto: meta events %q, want seccomp", meta["events"])
			}
		})
	}
}

// TestE2EEventsPageCache records jit-pages with a 64 KiB region (16
// pages, of which each version rewrites two, and some versions hold a
// page dropped with MADV_DONTNEED: changed without a store) under each
// event source, and checks every version's bytes against the program's
// manifest. Under bpf the kernel's page cache sends only the pages that
// changed and the versions are recorded from the last one's pages
// (meta events_pages_same): a page wrongly taken as unchanged would
// hold the previous version's function.
func TestE2EEventsPageCache(t *testing.T) {
	e2eSetup(t)
	p := e2eProgram{name: "jit-pages", args: []string{"24", "64"}}
	for _, events := range e2eEventSources(t) {
		t.Run(events, func(t *testing.T) {
			ms, dir := e2eRecord(t, p, "--pt=off", "--events="+events)
			if len(ms) < 25 {
				t.Fatalf("jit-pages wrote %d manifest lines, want 25 and more", len(ms))
			}
			meta := checkManifestBytes(t, dir, ms)
			same, _ := strconv.Atoi(meta["events_pages_same"])
			t.Logf("%s: %s pages of versions taken unchanged from the last", events, meta["events_pages_same"])
			if events == "bpf" && same < 20*12 {
				// 24 versions of 16 pages, 2 or 3 of them changed
				t.Errorf("bpf: %d pages taken unchanged, want most of 24 versions' 16", same)
			}
			if events == "seccomp" && same != 0 {
				t.Errorf("seccomp: %d pages taken unchanged from events", same)
			}
		})
	}
}
