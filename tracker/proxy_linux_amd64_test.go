package tracker_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/tracker"
)

// proxyRounds: rounds of each append-jit phase (each two protection
// changes under --wx=batch).
const proxyRounds = 150

// TestProxy: under W^X, a launched program's protection changes run in
// the proxy (two a round of append-jit's append-and-run), none injected
// into the program's thread past the proxy's own clone; the program
// computes what it does alone, has no child it can wait for and one
// thread; without the proxy (--proxy=off) the same calls are injected,
// with the same output; under --proxy=auto both paths run (each at least
// pickWarm times, then the cheaper), again with the same output.
func TestProxy(t *testing.T) {
	prog := filepath.Join(testenv.TestPrograms(t), "append-jit")
	want, code := run(t, prog, strconv.Itoa(proxyRounds))
	if code != 0 {
		t.Fatalf("alone: exit %d\n%s", code, want)
	}
	for _, line := range []string{"children: none", "threads: 1"} {
		if !strings.Contains(want, line+"\n") {
			t.Fatalf("alone: no %q in\n%s", line, want)
		}
	}
	var stats [3]tracker.Stats
	for i, mode := range []tracker.ProxyMode{tracker.ProxyOn, tracker.ProxyOff, tracker.ProxyAuto} {
		tr := traceOpts(t, func(o *tracker.Options) {
			o.WX = tracker.WXBatch
			o.Proxy = mode
		}, prog, strconv.Itoa(proxyRounds))
		if tr.res.Status != 0 || tr.stdout != want {
			t.Fatalf("--proxy=%s: exit %d, output\n%s\nwant (alone)\n%s", mode, tr.res.Status, tr.stdout, want)
		}
		stats[i] = tr.res.Stats
	}
	with, without, auto := stats[0], stats[1], stats[2]
	// two changes a round, but for the first store into each of the two
	// pages (fresh memory starts writable)
	if with.Proxies != 1 || with.ProxyCalls < 4*proxyRounds-2 {
		t.Errorf("%d proxies ran %d calls, want 1 and ≥ %d", with.Proxies, with.ProxyCalls, 4*proxyRounds-2)
	}
	if without.Proxies != 0 || without.ProxyCalls != 0 {
		t.Errorf("--proxy=off: %d proxies ran %d calls", without.Proxies, without.ProxyCalls)
	}
	// every call the proxy ran is one injection fewer; the proxy's clone
	// is one more
	if with.Injected != without.Injected-with.ProxyCalls+1 {
		t.Errorf("injected %d with the proxy (which ran %d), %d without: want %d", with.Injected, with.ProxyCalls,
			without.Injected, without.Injected-with.ProxyCalls+1)
	}
	const warm = 8 // proxypick.go's pickWarm
	if auto.Proxies != 1 || auto.ProxyCalls < warm || auto.Injected-1 < warm || auto.ProxyCalls+auto.Injected-1 != without.Injected {
		t.Errorf("--proxy=auto: %d proxies, %d calls in them, %d injected (one the clone): want 1, both ≥ %d, together %d",
			auto.Proxies, auto.ProxyCalls, auto.Injected, warm, without.Injected)
	}
}

// TestProxyKilled: a proxy killed from outside (a SIGKILL to it alone)
// between append-jit's phases costs the program nothing: the second
// phase's protection changes are injected into its thread, and it
// computes what it does alone.
func TestProxyKilled(t *testing.T) {
	prog := filepath.Join(testenv.TestPrograms(t), "append-jit")
	want, code := run(t, prog, strconv.Itoa(proxyRounds))
	if code != 0 {
		t.Fatalf("alone: exit %d\n%s", code, want)
	}
	syncPath := filepath.Join(t.TempDir(), "go")
	pidc := make(chan int, 1)
	killed := make(chan error, 1)
	go func() {
		pid := <-pidc
		killed <- killProxyWhenReady(pid, syncPath)
		os.WriteFile(syncPath, nil, 0o644)
	}()
	tr := traceOpts(t, func(o *tracker.Options) {
		o.WX = tracker.WXBatch
		o.Proxy = tracker.ProxyOn
		o.OnStart = func(pid int) { pidc <- pid }
	}, prog, strconv.Itoa(proxyRounds), syncPath)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	s := tr.res.Stats
	if tr.res.Status != 0 || tr.stdout != want {
		t.Fatalf("exit %d, output\n%s\nwant (alone)\n%s", tr.res.Status, tr.stdout, want)
	}
	// phase 1 in the proxy, phase 2 injected
	if s.Proxies != 1 || s.ProxyCalls < 2*proxyRounds-2 || s.Injected < 2*proxyRounds {
		t.Errorf("%d proxies, %d calls in them, %d injected: want 1, ≥ %d, ≥ %d", s.Proxies, s.ProxyCalls, s.Injected, 2*proxyRounds-2, 2*proxyRounds)
	}
}

// killProxyWhenReady waits for append-jit (pid) to create syncPath.ready, then
// kills the proxy: the task other than pid whose parent is this process
// and whose executable is pid's.
func killProxyWhenReady(pid int, syncPath string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(syncPath + ".ready"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return os.ErrDeadlineExceeded
		}
		time.Sleep(time.Millisecond)
	}
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return err
	}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, d := range dirs {
		p, err := strconv.Atoi(d.Name())
		if err != nil || p == pid {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if e, _ := os.Readlink("/proc/" + d.Name() + "/exe"); e == exe {
			return syscall.Kill(p, syscall.SIGKILL)
		}
	}
	return os.ErrNotExist
}

// TestProxySeccompLate: a program that forbids mprotect with a seccomp
// filter of its own after its start (kill, trap or EPERM; installed with
// seccomp(2) or prctl), then goes on JIT-compiling into RWX memory, runs
// as alone. ptjit's filter stops the call that installs the filter
// (ownfilter_linux_amd64.go): where the process has a proxy (made at the
// exec, before that filter) every protection change runs there from then
// on, and none is injected into the thread the filter would kill or fail
// it in. Either way the batch pages are settled before the filter is in
// (the program leaves a page written but not run) and every later store
// into code is emulated, so that a child forked after the filter (which
// inherits it and the pages as they are, and has no proxy) runs as alone
// too. Found by new-user trials: killed by SIGSYS under --proxy=auto
// before the proxy went only; under --proxy=off, killed, or thousands of
// refused injections of the same store; a forked child killed.
func TestProxySeccompLate(t *testing.T) {
	prog := filepath.Join(testenv.TestPrograms(t), "seccomp-late")
	// phase 2 makes 100 functions of three stores each (opcode, imm32, ret)
	cases := []struct {
		proxy  tracker.ProxyMode
		action string
		how    []string // install with, fork
		proxy1 bool     // the program has a proxy
	}{
		{tracker.ProxyAuto, "kill", nil, true},
		{tracker.ProxyAuto, "trap", nil, true},
		{tracker.ProxyAuto, "errno", []string{"prctl"}, true},
		{tracker.ProxyOff, "kill", nil, false},
		{tracker.ProxyOff, "trap", []string{"prctl"}, false},
		{tracker.ProxyOff, "errno", nil, false},
		{tracker.ProxyAuto, "kill", []string{"seccomp", "fork"}, true},
		{tracker.ProxyAuto, "trap", []string{"prctl", "fork"}, true},
		{tracker.ProxyOff, "errno", []string{"seccomp", "fork"}, false},
	}
	for _, c := range cases {
		args := append([]string{"100", c.action}, c.how...)
		t.Run(fmt.Sprintf("%s-%s", c.proxy, strings.Join(args[1:], "-")), func(t *testing.T) {
			argv := append([]string{prog}, args...)
			want, code := run(t, argv...)
			if code != 0 {
				t.Fatalf("alone: exit %d\n%s", code, want)
			}
			// (traceOpts fails the test on any warning: a refused injection)
			tr := traceOpts(t, func(o *tracker.Options) {
				o.WX = tracker.WXBatch
				o.Proxy = c.proxy
			}, argv...)
			if tr.res.Status != 0 || tr.stdout != want {
				t.Fatalf("exit %d, output\n%s\nwant (alone)\n%s", tr.res.Status, tr.stdout, want)
			}
			s := tr.res.Stats
			if c.proxy1 && s.Proxies != 1 {
				t.Errorf("%d proxies, want 1", s.Proxies)
			}
			if s.Emulated < 300 {
				t.Errorf("%d stores emulated, want the second phase's 300 at least (%d proxy calls)", s.Emulated, s.ProxyCalls)
			}
		})
	}
}
