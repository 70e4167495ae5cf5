package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestSeccompOwnFilter runs testdata/seccomp-own, whose own seccomp filter
// returns RET_TRACE, RET_ERRNO, RET_TRAP and RET_USER_NOTIF, alone and
// under ptjit run: the same output and exit status. Alone
// its RET_TRACE calls fail with ENOSYS (no tracer); ptjit, the tracer,
// must make them fail the same way, and record nothing for the mprotect
// that never ran.
func TestSeccompOwnFilter(t *testing.T) {
	e2eSetup(t)
	argv := []string{e2eProg("seccomp-own")}
	native := e2eRun(t, argv, nil, "", "")
	if native.code != 0 {
		t.Fatalf("seccomp-own alone: status %d\n%s%s", native.code, native.stdout, native.stderr)
	}
	runs := [][]string{nil, {"--wx=precise"}, {"--pt=soft"}}
	if len(e2eEventSources(t)) > 1 {
		runs = append(runs, []string{"--events=bpf"}, []string{"--events=bpf", "--wx=precise"})
	}
	for _, flags := range runs {
		flags := flags
		t.Run(strings.Join(append([]string{"default"}, flags...), "_"), func(t *testing.T) {
			if len(flags) > 0 && flags[0] == "--pt=soft" && testing.Short() {
				t.Skip("--pt=soft steps every instruction: about 30 s")
			}
			dir := filepath.Join(t.TempDir(), "rec")
			args := append(append([]string{"run", "-o", dir}, flags...), "--")
			traced := e2ePtjit(t, nil, append(args, argv...)...)
			e2eCheckMessages(t, traced.stderr)
			if traced.code != native.code || traced.stdout != native.stdout {
				t.Fatalf("under ptjit %v: status %d, alone %d\n--- alone:\n%s--- under ptjit:\n%s--- ptjit stderr:\n%s",
					flags, traced.code, native.code, native.stdout, traced.stdout, traced.stderr)
			}
			// The program makes nothing executable that ptjit can see:
			// its RET_TRACE/RET_ERRNO mprotect calls never run, the one its
			// listener continues makes no stop. With BPF events that one
			// (6 pages) is seen at its exit and recorded.
			bpf := len(flags) > 0 && flags[0] == "--events=bpf"
			continued := 0
			for _, h := range e2eHistory(t, dir) {
				if h.Cause != "mprotect" {
					continue
				}
				if bpf && h.Size == 6*4096 && continued == 0 {
					continued++
					continue
				}
				t.Errorf("recorded %v: an mprotect the program's filter failed", h)
			}
			if bpf && continued != 1 {
				t.Errorf("with BPF events: the mprotect the listener continued is not recorded")
			}
		})
	}
}

// TestPtraceUnderPtjit: a program that tries to become a tracer under
// ptjit gets EPERM from the kernel, as before, and ptjit prints one line
// saying why (once per run, none with -q).
func TestPtraceUnderPtjit(t *testing.T) {
	e2eSetup(t)
	const why = "already traced by ptjit"
	count := func(stderr string) int {
		n := 0
		for _, l := range strings.Split(stderr, "\n") {
			if strings.Contains(l, why) {
				n++
				if !strings.HasPrefix(l, "ptjit: ") {
					t.Errorf("warning without the ptjit: prefix: %q", l)
				}
			}
		}
		return n
	}
	t.Run("seccomp-own", func(t *testing.T) {
		// two calls, TRACEME in one child and SEIZE of another: one line
		r := e2ePtjit(t, nil, "run", "-o", filepath.Join(t.TempDir(), "rec"), "--", e2eProg("seccomp-own"), "ptrace")
		e2eCheckMessages(t, r.stderr)
		for _, want := range []string{"PTRACE_TRACEME:", "PTRACE_SEIZE child:"} {
			ok := false
			for _, l := range strings.Split(r.stdout, "\n") {
				ok = ok || strings.HasPrefix(l, want) && strings.HasSuffix(l, "ret=-1 errno=EPERM")
			}
			if !ok {
				t.Errorf("%s: want ret=-1 errno=EPERM in\n%s", want, r.stdout)
			}
		}
		if n := count(r.stderr); n != 1 || r.code != 0 {
			t.Errorf("status %d, %d lines saying %q, want 0 and 1:\n%s", r.code, n, why, r.stderr)
		}
		q := e2ePtjit(t, nil, "run", "-q", "-o", filepath.Join(t.TempDir(), "rec"), "--", e2eProg("seccomp-own"), "ptrace")
		if q.stderr != "" || q.stdout != r.stdout {
			t.Errorf("with -q: stderr %q, stdout\n%s", q.stderr, q.stdout)
		}
	})
	t.Run("strace", func(t *testing.T) {
		strace := testenv.Tool(t, "strace", "strace")
		r := e2ePtjit(t, nil, "run", "-o", filepath.Join(t.TempDir(), "rec"), "--", strace, "-o", "/dev/null", "true")
		if n := count(r.stderr); n != 1 {
			t.Errorf("%d lines saying %q, want 1:\n%s", n, why, r.stderr)
		}
		if r.code == 0 {
			t.Errorf("strace under ptjit exited 0: it cannot trace there\n%s", r.stderr)
		}
	})
}

// TestSoftFilterOwnSeccomp: under --pt=soft --soft-filter=jit, which hides
// JIT code with injected mprotect calls, testdata/seccomp-late installs a
// filter of its own that kills, traps or fails mprotect, then goes on
// JIT-compiling (in a forked child too). Its output is as alone, and the
// decoded flow of every thread is the ground truth's: from the filter on,
// the process hides nothing and is stepped throughout, still tracing only
// its JIT code (filterStepAll). Found by the new-user trial: killed by
// SIGSYS, or, with EPERM, ptjit retrying the same mprotect for ever.
func TestSoftFilterOwnSeccomp(t *testing.T) {
	e2eSetup(t)
	for _, args := range [][]string{{"20", "kill"}, {"20", "errno", "prctl"}, {"20", "trap", "seccomp", "fork"},
		{"20", "allow", "seccomp", "fork"}} {
		t.Run(strings.Join(args[1:], "-"), func(t *testing.T) {
			argv := append([]string{e2eProg("seccomp-late")}, args...)
			native := e2eRun(t, argv, nil, "", "")
			if native.code != 0 {
				t.Fatalf("alone: status %d\n%s%s", native.code, native.stdout, native.stderr)
			}
			tmp := t.TempDir()
			dir, gt := filepath.Join(tmp, "rec"), filepath.Join(tmp, "truth")
			r := e2ePtjit(t, nil, append([]string{"run", "-q", "--pt=soft", "--soft-filter=jit", "--ground-truth", gt, "-o", dir, "--"}, argv...)...)
			if r.code != 0 || r.stdout != native.stdout {
				t.Fatalf("under ptjit: status %d\n--- alone:\n%s--- under ptjit:\n%s--- ptjit stderr:\n%s", r.code, native.stdout, r.stdout, r.stderr)
			}
			e2eCheckMessages(t, r.stderr)
			truth := groundTruth(t, gt)
			if fork := len(args) > 3; len(truth) != 1 && !fork || len(truth) != 2 && fork {
				t.Errorf("%d threads in the ground truth, want the program's and its child's", len(truth))
			}
			_, total := checkFlows(t, dir, truth)
			// phase 1 and phase 2 each run 20 functions 1+2+…+20 times,
			// two instructions each
			if want := 2 * 2 * 210; total < want {
				t.Errorf("%d JIT instructions executed, want %d at least", total, want)
			}
		})
	}
}

// TestSeccompAllowlist: testdata/seccomp-late's allow filter is a
// sandbox's allowlist that kills the process at any call it does not
// list (mprotect and seccomp among them), and the program then
// JIT-compiles into a new RWX mapping, alone or in a forked child. Under
// the default mode and --proxy=off it runs as alone: ptjit injects no
// seccomp filter and no mprotect after the program's filter, and says
// once what it cannot watch for want of a filter (a kernel copy into the
// new code). Found by the new-user trial: a libseccomp default-kill
// filter killed the program at the first filter ptjit added after it.
func TestSeccompAllowlist(t *testing.T) {
	e2eSetup(t)
	for _, args := range [][]string{{"50", "allow"}, {"50", "allow", "prctl", "fork"}} {
		argv := append([]string{e2eProg("seccomp-late")}, args...)
		native := e2eRun(t, argv, nil, "", "")
		if native.code != 0 {
			t.Fatalf("%v alone: status %d\n%s%s", args, native.code, native.stdout, native.stderr)
		}
		for _, flags := range [][]string{nil, {"--proxy=off"}, {"--wx=batch"}} {
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, append(append(append([]string{"run", "-o", dir}, flags...), "--"), argv...)...)
			if r.code != 0 || r.stdout != native.stdout {
				t.Errorf("%v %v: status %d\n--- alone:\n%s--- under ptjit:\n%s--- ptjit stderr:\n%s", args, flags, r.code, native.stdout, r.stdout, r.stderr)
				continue
			}
			e2eCheckMessages(t, r.stderr)
			if strings.Contains(r.stderr, "injecting") {
				t.Errorf("%v %v: an injection failed:\n%s", args, flags, r.stderr)
			}
			if !strings.Contains(r.stderr, "a seccomp filter of its own") {
				t.Errorf("%v %v: no line says which filter ptjit could not add:\n%s", args, flags, r.stderr)
			}
		}
	}
}
