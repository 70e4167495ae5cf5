package main

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sigexitRun starts argv in a process group of its own, waits for its
// first line ("ready" or "ignoring"), sends each of sigs (to the group when
// group is set, else to the started process: ptjit, or the program alone)
// 500 ms apart, and returns its output and exit status. It fails the test
// if the process is still running killBound after the last signal.
func sigexitRun(t *testing.T, argv []string, group bool, sigs ...syscall.Signal) (string, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	}()
	r := bufio.NewReader(out)
	first, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%v: no first line: %v\nstderr:\n%s", argv, err, stderr.String())
	}
	target := cmd.Process.Pid
	if group {
		target = -target
	}
	for i, s := range sigs {
		if i > 0 {
			time.Sleep(500 * time.Millisecond)
		}
		if err := syscall.Kill(target, s); err != nil {
			t.Fatal(err)
		}
	}
	rest := make(chan string, 1)
	go func() {
		var b strings.Builder
		bufio.NewReader(r).WriteTo(&b)
		rest <- b.String()
	}()
	if !e2eWaitTimeout(cmd, killBound+time.Second) {
		t.Fatalf("%v: still running %v after %v\nstderr:\n%s", argv, killBound, sigs, stderr.String())
	}
	return first + <-rest, e2eStatus(cmd.ProcessState)
}

// TestSignalsPassed: a program that handles SIGINT, SIGTERM and SIGHUP
// (testdata/sigexit) behaves under ptjit run as alone: Ctrl-C (SIGINT to
// the process group) and kill of the process group reach it once, so it
// prints what it prints alone and ptjit exits with its status; a signal
// sent to ptjit alone is passed on to it, as kill(1) of the program's pid
// would be; a program that ignores SIGINT keeps running after one, and a
// second SIGINT to ptjit kills it (ptjit exits 130).
func TestSignalsPassed(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("sigexit")
	for _, c := range []struct {
		name  string
		group bool
		sig   syscall.Signal
		flags []string
	}{
		{"ctrl-c", true, syscall.SIGINT, nil},
		{"kill-group-term", true, syscall.SIGTERM, nil},
		{"hangup", true, syscall.SIGHUP, nil},
		{"kill-ptjit-int", false, syscall.SIGINT, nil},
		{"kill-ptjit-term", false, syscall.SIGTERM, nil},
		{"ctrl-c-soft-jit", true, syscall.SIGINT, []string{"--pt=soft", "--soft-filter=jit"}},
		{"kill-ptjit-term-soft", false, syscall.SIGTERM, []string{"--pt=soft"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantOut, wantCode := sigexitRun(t, []string{prog}, c.group, c.sig)
			if wantCode != 3 || !strings.Contains(wantOut, " 1\n") {
				t.Fatalf("alone: status %d, output %q; want 3 and one signal", wantCode, wantOut)
			}
			dir := filepath.Join(t.TempDir(), "rec")
			argv := append(append([]string{e2e.ptjit, "run", "-q", "-o", dir}, c.flags...), "--", prog)
			out, code := sigexitRun(t, argv, c.group, c.sig)
			if out != wantOut || code != wantCode {
				t.Errorf("under ptjit: status %d, output %q; alone: status %d, output %q", code, out, wantCode, wantOut)
			}
			if r := e2ePtjit(t, nil, "history", "-i", dir); r.code != 0 {
				t.Errorf("history after the signal: exit %d: %s", r.code, r.stderr)
			}
		})
	}
	t.Run("ignored-then-killed", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "rec")
		out, code := sigexitRun(t, []string{e2e.ptjit, "run", "-q", "-o", dir, "--", prog, "ignore"}, false,
			syscall.SIGINT, syscall.SIGINT)
		if out != "ignoring\n" || code != 128+int(syscall.SIGINT) {
			t.Errorf("two SIGINTs to ptjit, the program ignoring SIGINT: status %d, output %q; want 130 and %q", code, out, "ignoring\n")
		}
	})
}

// TestSignalInfoWhilePatching: signals that arrive while ptjit acts in a
// thread (an injected mprotect of W^X batch mode or of the soft filter, a
// single-stepped store, a restarted call) reach the program's handler with
// their own siginfo, in time. testdata/sigqueue-jit's main thread patches
// JIT code without pause while a second thread sends it 2000 signals one at
// a time (sigqueue and pthread_sigqueue with a value, SIGCHLD of forked
// children) and its handlers check every field. Before the fix a signal
// that came during an injected step was delivered with ptjit's pid and
// SI_USER (1324 of 2000 wrong with --wx=batch), or not until the thread's
// next fault; under --soft-filter=jit the forked children were parked for
// ever and the program lost their SIGCHLD (then ptjit waited for them).
func TestSignalInfoWhilePatching(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("sigqueue-jit")
	for _, c := range []struct {
		name    string
		signals string
		flags   []string
	}{
		{"wx-precise", "2000", []string{"--pt=off", "--wx=precise"}},
		{"wx-batch", "2000", []string{"--pt=off", "--wx=batch"}},
		{"wx-auto", "2000", []string{"--pt=off", "--wx=auto"}},
		{"soft-filter", "300", []string{"--pt=soft", "--soft-filter=jit"}},
		{"soft", "100", []string{"--pt=soft"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			argv := []string{prog, c.signals}
			want := e2eRun(t, argv, nil, "", "")
			if want.code != 0 || want.stdout != "signals "+c.signals+" handled "+c.signals+" bad 0 calls right\n" {
				t.Fatalf("sigqueue-jit alone: exit %d, stdout %q, stderr %q", want.code, want.stdout, want.stderr)
			}
			dir := filepath.Join(t.TempDir(), "rec")
			got := e2ePtjit(t, nil, append(append([]string{"run", "-q", "-o", dir}, c.flags...), append([]string{"--"}, argv...)...)...)
			if got.code != want.code || got.stdout != want.stdout {
				t.Errorf("under ptjit: exit %d, stdout %q; alone: exit %d, stdout %q\nstderr:\n%s",
					got.code, got.stdout, want.code, want.stdout, got.stderr)
			}
		})
	}
}

// TestStoreFaultsSigbus: a store into W^X-protected memory that the kernel
// answers with SIGBUS (testdata/sigbus-store: past the end of a shared
// memory object grown by mremap) reaches the program as alone, with and
// without its own handler, in every W^X mode. ptjit cannot emulate the
// store (the page cannot be read) and steps it; before the fix the step's
// SIGBUS was held and the step retried for ever: ptjit and the program
// spun until killed.
func TestStoreFaultsSigbus(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("sigbus-store")
	for _, args := range [][]string{nil, {"handler"}} {
		alone := e2eRun(t, append([]string{prog}, args...), nil, "", "")
		if want := map[bool]int{false: 128 + int(syscall.SIGBUS), true: 7}[len(args) > 0]; alone.code != want {
			t.Fatalf("alone %v: status %d, want %d\n%s", args, alone.code, want, alone.stdout)
		}
		for _, mode := range []string{"auto", "precise", "batch"} {
			t.Run(mode+"/"+strings.Join(append([]string{"plain"}, args...), "-"), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "rec")
				r := e2ePtjit(t, nil, append([]string{"run", "-q", "--pt=off", "--wx=" + mode, "-o", dir, "--", prog}, args...)...)
				if r.code != alone.code || r.stdout != alone.stdout {
					t.Errorf("under ptjit: status %d, output %q; alone: status %d, output %q\n%s", r.code, r.stdout, alone.code, alone.stdout, r.stderr)
				}
			})
		}
	}
}
