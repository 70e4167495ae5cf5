package ptrun_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/ptrun"
	"github.com/ptjit/ptjit/tracker"
)

// The test binary is also the launcher helper.
func init() {
	if len(os.Args) > 1 && os.Args[1] == ptrun.HelperArg {
		runtime.LockOSThread()
		ptrun.Helper(os.Args[2:])
	}
}

func TestResolve(t *testing.T) {
	tmp := t.TempDir()
	script := filepath.Join(tmp, "script")
	os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755)
	noexec := filepath.Join(tmp, "noexec")
	os.WriteFile(noexec, []byte("#!/bin/sh\n"), 0o644)
	t.Setenv("PATH", "/nonexistent:"+tmp+":/usr/bin:/bin")
	cases := []struct {
		prog, want string
		code       int
	}{
		{"sh", "/usr/bin/sh", 0},
		{"script", script, 0},
		{script, script, 0},
		{"noexec", "", 126},
		{noexec, "", 126},
		{tmp, "", 126},
		{"no-such-ptjit-program", "", 127},
		{filepath.Join(tmp, "missing"), "", 127},
		{"", "", 127},
	}
	for _, c := range cases {
		got, err := ptrun.Resolve(c.prog)
		var se *ptrun.StartError
		switch {
		case c.code == 0 && (err != nil || got != c.want):
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.prog, got, err, c.want)
		case c.code != 0 && (!errors.As(err, &se) || se.Code != c.code):
			t.Errorf("Resolve(%q) = %q, %v; want status %d", c.prog, got, err, c.code)
		}
	}
}

func TestPrepareOutDir(t *testing.T) {
	tmp := t.TempDir()
	// absent: created
	if err := ptrun.PrepareOutDir(filepath.Join(tmp, "new", "rec")); err != nil {
		t.Fatal(err)
	}
	// an old recording: accepted, left for db.Create to replace
	old := filepath.Join(tmp, "old")
	os.Mkdir(old, 0o755)
	for _, f := range []string{"code.db", "code.db-wal", "perf.data"} {
		os.WriteFile(filepath.Join(old, f), []byte("x"), 0o644)
	}
	if err := ptrun.PrepareOutDir(old); err != nil {
		t.Fatal(err)
	}
	// a regular file, a directory with other files: refused, untouched
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("keep"), 0o644)
	other := filepath.Join(tmp, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "code.db"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("x"), 0o644)
	for _, d := range []string{file, other} {
		err := ptrun.PrepareOutDir(d)
		var oe *ptrun.OutDirError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), d) {
			t.Errorf("%s: %v, want an OutDirError naming it", d, err)
		}
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Errorf("file changed")
	}
	if ents, _ := os.ReadDir(other); len(ents) != 2 {
		t.Errorf("other dir changed: %d entries", len(ents))
	}
}

// TestRunStatusAndOutput runs the real launch path (helper, seccomp,
// exec) through Run: statuses, the summary line, the recording.
func TestRunStatusAndOutput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "rec")
	var stderr bytes.Buffer
	st, err := ptrun.Run(ptrun.Config{OutDir: dir, Argv: []string{"sh", "-c", "exit 7"}, Stderr: &stderr, Pin: tracker.PinAuto})
	if st != 7 || err != nil {
		t.Fatalf("sh -c 'exit 7': status %d, err %v", st, err)
	}
	if !strings.HasPrefix(stderr.String(), "ptjit: 1 process, 1 thread,") || strings.Count(stderr.String(), "\n") != 1 {
		t.Errorf("summary: %q", stderr.String())
	}
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	meta, _ := d.Meta()
	if meta["ptjit_state"] != "complete" || meta["stops"] == "" {
		t.Errorf("meta: state %q stops %q", meta["ptjit_state"], meta["stops"])
	}
	procs, _ := d.Processes()
	if len(procs) != 1 || procs[0].ExitStatus != 7 || procs[0].ExecPath != "/usr/bin/dash" && procs[0].ExecPath != "/usr/bin/bash" {
		t.Errorf("processes: %+v", procs)
	}

	st, err = ptrun.Run(ptrun.Config{OutDir: dir, Argv: []string{"sh", "-c", "kill -USR2 $$"}, Quiet: true})
	if st != 128+int(syscall.SIGUSR2) || err != nil {
		t.Errorf("killed by SIGUSR2: status %d, err %v", st, err)
	}
	st, err = ptrun.Run(ptrun.Config{OutDir: dir, Argv: []string{"ptjit-no-such-program"}, Quiet: true})
	if st != 127 || err == nil || !strings.Contains(err.Error(), "ptjit-no-such-program") {
		t.Errorf("missing program: status %d, err %v", st, err)
	}
}

// TestKilledByTerm: ptjit stopped by SIGTERM kills the program, exits
// 128+15 and leaves a readable code.db; the program does not survive. The
// test binary re-runs itself as "ptjit" (PTJIT_TEST_RUN names the program).
func TestKilledByTerm(t *testing.T) {
	if os.Getenv("PTJIT_TEST_RUN") != "" {
		argv := strings.Fields(os.Getenv("PTJIT_TEST_RUN"))
		st, err := ptrun.Run(ptrun.Config{OutDir: os.Getenv("PTJIT_TEST_DIR"), Argv: argv})
		if err != nil {
			fmt.Fprintf(os.Stderr, "ptjit: %v\n", err)
		}
		os.Exit(st)
	}
	tmp := t.TempDir()
	pidFile := filepath.Join(tmp, "pid")
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledByTerm$")
	cmd.Env = append(os.Environ(), "PTJIT_TEST_RUN=sh "+writeScript(t, tmp, pidFile), "PTJIT_TEST_DIR="+filepath.Join(tmp, "rec"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			fmt.Sscan(string(b), &pid)
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("program did not start:\n%s", stderr.String())
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if st := cmd.ProcessState.ExitCode(); st != 128+int(syscall.SIGTERM) {
		t.Errorf("status %d, want 143\n%s", st, stderr.String())
	}
	if err := syscall.Kill(pid, 0); err == nil {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Errorf("program %d survived ptjit", pid)
	}
	if !strings.Contains(stderr.String(), "ptjit: SIGTERM") {
		t.Errorf("stderr: %q", stderr.String())
	}
	d, err := db.Open(filepath.Join(tmp, "rec", "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	procs, _ := d.Processes()
	if len(procs) == 0 || procs[len(procs)-1].ExitStatus != 128+int(syscall.SIGKILL) {
		t.Errorf("processes recorded: %+v", procs)
	}
}

func writeScript(t *testing.T, dir, pidFile string) string {
	p := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(p, []byte("echo $$ >"+pidFile+"\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
