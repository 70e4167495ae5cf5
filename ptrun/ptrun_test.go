package ptrun_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/ptrun"
	"github.com/ptjit/ptjit/tracker"
)

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
	od, err := ptrun.PrepareOutDir(filepath.Join(tmp, "new", "rec"))
	if err != nil {
		t.Fatal(err)
	}
	od.Release()
	// an old ptjit recording (a real code.db, its WAL, a perf.data):
	// accepted, left for db.Create to replace
	old := filepath.Join(tmp, "old")
	os.Mkdir(old, 0o755)
	rec, err := db.Create(filepath.Join(old, "code.db"), db.Meta{Command: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"code.db-wal", "perf.data"} {
		os.WriteFile(filepath.Join(old, f), []byte("x"), 0o644)
	}
	od, err = ptrun.PrepareOutDir(old)
	if err != nil {
		t.Fatal(err)
	}
	// a second run into the same directory fails at once while the first
	// holds it
	if _, err := ptrun.PrepareOutDir(old); err == nil || !strings.Contains(err.Error(), "another ptjit run") {
		t.Errorf("second run into a locked dir: %v, want refused", err)
	}
	od.Release()
	if od, err := ptrun.PrepareOutDir(old); err != nil {
		t.Errorf("after release: %v", err)
	} else {
		od.Release()
	}

	// Refused, untouched: a regular file; other files beside a code.db;
	// another program's SQLite database named code.db; a text file named
	// code.db; perf record's perf.data alone.
	mkdir := func(name string, files map[string][]byte) string {
		d := filepath.Join(tmp, name)
		os.Mkdir(d, 0o755)
		for f, b := range files {
			os.WriteFile(filepath.Join(d, f), b, 0o644)
		}
		return d
	}
	file := filepath.Join(tmp, "file")
	os.WriteFile(file, []byte("keep"), 0o644)
	sqliteDir := mkdir("sqlite", nil)
	if out, err := exec.Command(testenv.Tool(t, "sqlite3", "sqlite3"), filepath.Join(sqliteDir, "code.db"), "create table mine(x); insert into mine values (1);").CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	cases := []struct{ dir, want string }{
		{file, "not a directory"},
		{mkdir("other", map[string][]byte{"code.db": []byte("x"), "notes.txt": []byte("x")}), "notes.txt"},
		{sqliteDir, "code.db is not a ptjit code.db"},
		{mkdir("text", map[string][]byte{"code.db": []byte("my notes\n")}), "code.db is not a ptjit code.db"},
		{mkdir("perfonly", map[string][]byte{"perf.data": []byte("PERFILE2...")}), "perf.data but no ptjit code.db"},
	}
	for _, c := range cases {
		before := snapshotDir(t, c.dir)
		_, err := ptrun.PrepareOutDir(c.dir)
		var oe *ptrun.OutDirError
		if !errors.As(err, &oe) || !strings.Contains(err.Error(), c.dir) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an OutDirError naming it and saying %q", c.dir, err, c.want)
		}
		if after := snapshotDir(t, c.dir); after != before {
			t.Errorf("%s changed:\n%s\nwas\n%s", c.dir, after, before)
		}
	}
}

// snapshotDir describes a file or directory (names, sizes, contents) so a
// test can check that nothing changed.
func snapshotDir(t *testing.T, path string) string {
	t.Helper()
	var b strings.Builder
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, "%s %x\n", p, sha256.Sum256(data))
		} else {
			fmt.Fprintf(&b, "%s/\n", p)
		}
		return nil
	})
	return b.String()
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
	// Every statistic reaches meta, those Run adds to the tracker's too.
	for _, r := range (&tracker.Stats{}).Meta() {
		if _, ok := meta[r.Key]; !ok {
			t.Errorf("meta has no %s", r.Key)
		}
	}
	number := func(key string) int64 {
		n, err := strconv.ParseInt(meta[key], 10, 64)
		if err != nil || n < 0 {
			t.Errorf("meta %s = %q, want a number", key, meta[key])
		}
		return n
	}
	if meta["processes"] != "1" || meta["threads"] != "1" || meta["wx"] != "" {
		t.Errorf("meta processes %q threads %q wx %q, want 1, 1 and \"\" (a shell that execs nothing, no --wx)", meta["processes"], meta["threads"], meta["wx"])
	}
	if number("wall_ns") == 0 || number("tracer_maxrss_kb") == 0 || number("tracer_user_ns")+number("tracer_sys_ns") == 0 {
		t.Errorf("meta wall_ns %q, tracer_maxrss_kb %q, tracer_user_ns %q, tracer_sys_ns %q: ptjit's own costs are 0",
			meta["wall_ns"], meta["tracer_maxrss_kb"], meta["tracer_user_ns"], meta["tracer_sys_ns"])
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

// TestKilledByTerm: a SIGTERM sent to ptjit alone reaches the program
// (ptjit passes it on): the program dies of it as it would alone, ptjit
// exits with its status (143) and leaves a readable code.db that records
// that exit. A program that ignores SIGTERM is killed by a second one:
// ptjit then says so, exits 143 too, and code.db records the SIGKILL.
// Either way the program does not survive. The test binary re-runs itself
// as "ptjit" (PTJIT_TEST_RUN names the program).
func TestKilledByTerm(t *testing.T) {
	if os.Getenv("PTJIT_TEST_RUN") != "" {
		argv := strings.Fields(os.Getenv("PTJIT_TEST_RUN"))
		st, err := ptrun.Run(ptrun.Config{OutDir: os.Getenv("PTJIT_TEST_DIR"), Argv: argv})
		if err != nil {
			fmt.Fprintf(os.Stderr, "ptjit: %v\n", err)
		}
		os.Exit(st)
	}
	for _, c := range []struct {
		name     string
		ignore   bool // the program ignores SIGTERM
		terms    int  // SIGTERMs sent to ptjit
		recorded int  // the program's exit status in code.db
		said     bool // ptjit says it was stopped by SIGTERM
	}{
		{"passed", false, 1, 128 + int(syscall.SIGTERM), false},
		{"ignored-then-killed", true, 2, 128 + int(syscall.SIGKILL), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			pidFile := filepath.Join(tmp, "pid")
			script := writeScript(t, tmp, pidFile, c.ignore)
			cmd := exec.Command(os.Args[0], "-test.run=^TestKilledByTerm$")
			cmd.Env = append(os.Environ(), "PTJIT_TEST_RUN=sh "+script, "PTJIT_TEST_DIR="+filepath.Join(tmp, "rec"))
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
			for i := 0; i < c.terms; i++ {
				if i > 0 {
					time.Sleep(time.Second)
					if err := syscall.Kill(pid, 0); err != nil {
						t.Fatalf("the program ignoring SIGTERM is gone after one SIGTERM to ptjit")
					}
				}
				cmd.Process.Signal(syscall.SIGTERM)
			}
			cmd.Wait()
			if st := cmd.ProcessState.ExitCode(); st != 128+int(syscall.SIGTERM) {
				t.Errorf("status %d, want 143\n%s", st, stderr.String())
			}
			if err := syscall.Kill(pid, 0); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Errorf("program %d survived ptjit", pid)
			}
			if said := strings.Contains(stderr.String(), "ptjit: SIGTERM"); said != c.said {
				t.Errorf("stderr says ptjit was stopped by SIGTERM: %v, want %v: %q", said, c.said, stderr.String())
			}
			d, err := db.Open(filepath.Join(tmp, "rec", "code.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			procs, _ := d.Processes()
			if len(procs) == 0 || procs[len(procs)-1].ExitStatus != c.recorded {
				t.Errorf("processes recorded (want the last to exit %d): %+v", c.recorded, procs)
			}
		})
	}
}

// writeScript writes a script that writes its pid to pidFile and becomes
// sleep 1000; with ignoreTerm, SIGTERM is ignored (and stays so in sleep).
func writeScript(t *testing.T, dir, pidFile string, ignoreTerm bool) string {
	p := filepath.Join(dir, "script.sh")
	trap := ""
	if ignoreTerm {
		trap = "trap '' TERM\n"
	}
	if err := os.WriteFile(p, []byte(trap+"echo $$ >"+pidFile+"\nexec sleep 1000\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
