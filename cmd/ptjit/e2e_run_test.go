package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/internal/testenv"
)

// e2eProgram is one testdata program run under ptjit run.
type e2eProgram struct {
	name string
	args []string
	// rwx: the program stores into RWX pages; without W^X enforcement
	// ptjit cannot see those stores, so the "write" manifest lines are
	// left out of the comparison (and --wx=off is passed when supported).
	rwx bool
	// mask, if set, matches the parts of stdout that differ from run to
	// run (timings); they are blanked before comparing.
	mask *regexp.Regexp
}

var e2ePrograms = []e2eProgram{
	{name: "ubpf-test"},
	{name: "ubpf-test", args: []string{"1000"}},
	{name: "jit-threads"},
	{name: "forker"},
	{name: "sigsegv-handler"},
	{name: "stopbench", args: []string{"run", "40", "3"}, mask: regexp.MustCompile(`\d+ ns`)},
	{name: "exitcode", args: []string{"0"}},
	{name: "static-keys", rwx: true},
	{name: "smc", rwx: true},
	{name: "rwx-threads", rwx: true},
}

// e2eRecord runs prog natively and under ptjit run (extra ptjit flags in
// flags), compares stdout and exit status, and returns the manifest written
// under ptjit and the recording directory.
func e2eRecord(t *testing.T, p e2eProgram, flags ...string) ([]manifestLine, string) {
	t.Helper()
	tmp := t.TempDir()
	argv := append([]string{e2eProg(p.name)}, p.args...)

	nativeManifest := filepath.Join(tmp, "native.manifest")
	native := e2eRun(t, argv, []string{"PTJIT_MANIFEST=" + nativeManifest}, "", "")

	manifest := filepath.Join(tmp, "ptjit.manifest")
	dir := filepath.Join(tmp, "rec")
	args := append([]string{"run", "-o", dir}, flags...)
	args = append(append(args, "--"), argv...)
	traced := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + manifest}, args...)

	e2eCheckMessages(t, traced.stderr)
	if traced.code != native.code {
		t.Errorf("exit status: under ptjit %d, alone %d\nptjit stderr:\n%s", traced.code, native.code, traced.stderr)
	}
	if p.mask != nil {
		native.stdout = p.mask.ReplaceAllString(native.stdout, "#")
		traced.stdout = p.mask.ReplaceAllString(traced.stdout, "#")
	}
	if traced.stdout != native.stdout {
		t.Errorf("stdout differs\n--- alone:\n%s--- under ptjit:\n%s", native.stdout, traced.stdout)
	}
	ms := e2eReadManifest(t, manifest)
	if n := len(e2eReadManifest(t, nativeManifest)); n != len(ms) {
		t.Errorf("manifest: %d lines under ptjit, %d alone", len(ms), n)
	}
	return ms, dir
}

// TestE2ERunPrograms runs every testdata program under ptjit run and checks
// that the recorded versions are exactly the ones the program reports, and
// that the program behaves as it does alone, with each event source.
func TestE2ERunPrograms(t *testing.T) {
	e2eSetup(t)
	for _, events := range e2eEventSources(t) {
		for _, p := range e2ePrograms {
			p := p
			t.Run(events+"/"+strings.Join(append([]string{p.name}, p.args...), "_"), func(t *testing.T) {
				flags := []string{"--events=" + events}
				if p.rwx {
					flags = append(flags, "--wx=off")
				}
				ms, dir := e2eRecord(t, p, flags...)
				if len(ms) == 0 && p.name != "exitcode" {
					t.Fatalf("%s wrote no manifest lines", p.name)
				}
				if p.rwx {
					ms = withoutWrites(ms)
				}
				e2eCompare(t, ms, e2eHistory(t, dir), false)
			})
		}
	}
}

// e2eEventSources are the --events values the tests that check versions
// against a manifest run with: seccomp, and bpf where BPF events can run
// here (root, BTF: the test says so where they cannot; under CI, which
// runs as root on a kernel with BTF, it fails).
func e2eEventSources(t *testing.T) []string {
	if err := bpfev.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but BPF events cannot run here: %v", err)
		}
		t.Logf("--events=bpf not tested: %v", err)
		return []string{"seccomp"}
	}
	return []string{"seccomp", "bpf"}
}

// TestE2EWX runs the programs that patch RWX pages under W^X enforcement:
// every store becomes a version, so the whole manifest must match, and the
// write log must hold each static-key toggle (modes precise, batch, auto).
func TestE2EWX(t *testing.T) {
	e2eSetup(t)
	for _, events := range e2eEventSources(t) {
		for _, mode := range []string{"precise", "batch", "auto"} {
			for _, p := range e2ePrograms {
				if !p.rwx && p.name != "sigsegv-handler" {
					continue
				}
				p := p
				t.Run(events+"/"+mode+"/"+p.name, func(t *testing.T) {
					ms, dir := e2eRecord(t, p, "--wx="+mode, "--events="+events)
					e2eCompare(t, ms, e2eHistory(t, dir), mode != "precise")
				})
			}
		}
	}
	t.Run("precise/static-keys-writes", func(t *testing.T) {
		tmp := t.TempDir()
		toggles := filepath.Join(tmp, "toggles")
		manifest := filepath.Join(tmp, "manifest")
		dir := filepath.Join(tmp, "rec")
		env := []string{"PTJIT_TOGGLES=" + toggles, "PTJIT_MANIFEST=" + manifest}
		r := e2ePtjit(t, env, "run", "-q", "-o", dir, "--wx=precise", "--", e2eProg("static-keys"))
		if r.code != 0 {
			t.Fatalf("status %d\n%s", r.code, r.stderr)
		}
		e2eCheckWrites(t, dir, toggles, e2eReadManifest(t, manifest))
	})
}

// e2eWrite is the part of a `ptjit history --writes --json` line used here.
type e2eWrite struct{ Addr, Old, New string }

// e2eCheckWrites checks ptjit's write log against static-keys' toggle log:
// the toggles on the RWX page (the page with "write" manifest lines) are
// direct stores and must be exactly the logged writes, in order, with their
// old and new bytes; the toggles on the other page happen while it is not
// executable and must not be logged.
func e2eCheckWrites(t *testing.T, dir, togglesPath string, ms []manifestLine) {
	t.Helper()
	rwxPage := uint64(0)
	for _, m := range ms {
		if m.Cause == "write" {
			rwxPage = m.Addr
		}
	}
	if rwxPage == 0 {
		t.Fatal("static-keys manifest has no write lines")
	}
	b, err := os.ReadFile(togglesPath)
	if err != nil {
		t.Fatal(err)
	}
	var want []e2eWrite
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			t.Fatalf("toggle log line %q", l)
		}
		a, err := strconv.ParseUint(f[0], 0, 64)
		if err != nil {
			t.Fatalf("toggle log line %q: %v", l, err)
		}
		if a&^0xfff == rwxPage {
			want = append(want, e2eWrite{f[0], f[1], f[2]})
		}
	}
	r := e2ePtjit(t, nil, "history", "-i", dir, "--writes", "--json")
	if r.code != 0 {
		t.Fatalf("history --writes: status %d\n%s", r.code, r.stderr)
	}
	var got []e2eWrite
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if l == "" {
			continue
		}
		var w e2eWrite
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatalf("history --writes line %q: %v", l, err)
		}
		if !e2eHexOK(w.Old) || !e2eHexOK(w.New) || len(w.Old) != len(w.New) {
			t.Errorf("write %q: old/new not lowercase hex of equal length", l)
		}
		got = append(got, w)
	}
	if len(got) != len(want) {
		t.Errorf("write log has %d writes, static-keys made %d direct stores", len(got), len(want))
	}
	for i := 0; i < len(got) && i < len(want); i++ {
		g, w := got[i], want[i]
		// the store is 8 bytes wide; the toggle log shows the 5 bytes of the site
		if g.Addr != w.Addr || !strings.HasPrefix(g.Old, w.Old) || !strings.HasPrefix(g.New, w.New) {
			t.Errorf("write %d: logged %s %s→%s, toggled %s %s→%s", i, g.Addr, g.Old, g.New, w.Addr, w.Old, w.New)
		}
	}
}

// TestE2EExitStatus: ptjit run exits with the program's status, 128+N when
// a signal killed it, like a shell.
func TestE2EExitStatus(t *testing.T) {
	e2eSetup(t)
	cases := []struct {
		prog string
		arg  string
		want int
	}{
		{"exitcode", "0", 0}, {"exitcode", "1", 1}, {"exitcode", "42", 42}, {"exitcode", "255", 255},
		{"killself", "9", 128 + 9}, {"killself", "15", 128 + 15},
		{"killself", "11", 128 + 11}, {"killself", "6", 128 + 6}, {"killself", "1", 128 + 1},
	}
	for _, c := range cases {
		t.Run(c.prog+"_"+c.arg, func(t *testing.T) {
			argv := []string{e2eProg(c.prog), c.arg}
			native := e2eRun(t, argv, nil, "", "")
			if native.code != c.want {
				t.Fatalf("%s %s alone: status %d, want %d", c.prog, c.arg, native.code, c.want)
			}
			traced := e2ePtjit(t, nil, append([]string{"run", "-q", "-o", filepath.Join(t.TempDir(), "rec"), "--"}, argv...)...)
			if traced.code != c.want {
				t.Errorf("ptjit run -- %s %s: status %d, want %d\nstderr:\n%s", c.prog, c.arg, traced.code, c.want, traced.stderr)
			}
			if traced.stdout != native.stdout {
				t.Errorf("stdout %q, alone %q", traced.stdout, native.stdout)
			}
			e2eCheckMessages(t, traced.stderr)
		})
	}
}

// TestE2EKilled: ptjit run killed with SIGTERM or SIGINT while the program
// runs kills the program, exits 128+N and leaves a readable code.db holding
// every version recorded so far.
func TestE2EKilled(t *testing.T) {
	e2eSetup(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			tmp := t.TempDir()
			manifest := filepath.Join(tmp, "manifest")
			dir := filepath.Join(tmp, "rec")
			// about ten minutes of work: it will not finish by itself
			cmd := exec.Command(e2e.ptjit, "run", "-o", dir, "--", e2eProg("ubpf-test"), "2000000000")
			cmd.Env = append(os.Environ(), "PTJIT_MANIFEST="+manifest)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					cmd.Process.Kill()
					cmd.Wait()
				}
			})
			// ubpf-test writes 3 manifest lines, the last one just before
			// its long loop.
			var ms []manifestLine
			for deadline := time.Now().Add(60 * time.Second); len(ms) < 3; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					e2eWaitTimeout(cmd, 30*time.Second)
					t.Fatalf("ubpf-test under ptjit wrote %d of 3 manifest lines in 60 s\nstderr:\n%s", len(ms), stderr.String())
				}
				ms = e2eReadManifest(t, manifest)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if !e2eWaitTimeout(cmd, 30*time.Second) {
				t.Fatalf("ptjit still running 30 s after %v", sig)
			}
			if got, want := e2eStatus(cmd.ProcessState), 128+int(sig); got != want {
				t.Errorf("ptjit killed by %v: status %d, want %d", sig, got, want)
			}
			e2eCheckMessages(t, stderr.String())
			if !e2eWaitGone(ms[0].PID) {
				t.Errorf("the traced program (pid %d) outlived ptjit", ms[0].PID)
				syscall.Kill(ms[0].PID, syscall.SIGKILL)
			}
			// Every version was recorded at its syscall stop, before the
			// program logged it: all three must be in the database.
			e2eCompare(t, ms, e2eHistory(t, dir), false)
		})
	}
}

// TestE2EStartErrors: a program that cannot be started gives one ptjit:
// line and the shell's status (127 not found, 126 not executable).
func TestE2EStartErrors(t *testing.T) {
	e2eSetup(t)
	tmp := t.TempDir()
	notExec := filepath.Join(tmp, "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, prog string
		want       int
	}{
		{"missing path", filepath.Join(tmp, "no-such-program"), 127},
		{"missing in PATH", "ptjit-no-such-program-e2e", 127},
		{"not executable", notExec, 126},
		{"directory", tmp, 126},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e2ePtjit(t, nil, "run", "-o", filepath.Join(t.TempDir(), "rec"), "--", c.prog)
			if r.code != c.want {
				t.Errorf("status %d, want %d; stderr:\n%s", r.code, c.want, r.stderr)
			}
			e2eOneLineError(t, r.stderr, filepath.Base(c.prog))
		})
	}
}

// e2eOneLineError checks stderr is exactly one "ptjit: ..." line mentioning
// what, and no panic.
func e2eOneLineError(t *testing.T, stderr, what string) {
	t.Helper()
	e2eCheckMessages(t, stderr)
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "ptjit: ") || !strings.Contains(lines[0], what) {
		t.Errorf("want one line \"ptjit: ...%s...\", got:\n%s", what, stderr)
	}
}

// TestE2EOutputDir: -o naming a regular file or a directory holding other
// things is refused before the program runs and nothing there is touched;
// an old recording is replaced.
func TestE2EOutputDir(t *testing.T) {
	e2eSetup(t)
	t.Run("regular file", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, []byte("keep me\n"), 0o644)
		r := e2ePtjit(t, nil, "run", "-o", f, "--", e2eProg("exitcode"), "0")
		if r.code == 0 || strings.Contains(r.stdout, "exiting") {
			t.Errorf("-o FILE: status %d, stdout %q: want refusal before running", r.code, r.stdout)
		}
		e2eOneLineError(t, r.stderr, f)
		if b, _ := os.ReadFile(f); string(b) != "keep me\n" {
			t.Errorf("-o FILE changed the file: %q", b)
		}
	})
	t.Run("directory with other content", func(t *testing.T) {
		d := t.TempDir()
		os.WriteFile(filepath.Join(d, "notes.txt"), []byte("mine\n"), 0o644)
		r := e2ePtjit(t, nil, "run", "-o", d, "--", e2eProg("exitcode"), "0")
		if r.code == 0 || strings.Contains(r.stdout, "exiting") {
			t.Errorf("-o DIR with other files: status %d, stdout %q: want refusal", r.code, r.stdout)
		}
		e2eOneLineError(t, r.stderr, d)
		ents, _ := os.ReadDir(d)
		if b, _ := os.ReadFile(filepath.Join(d, "notes.txt")); len(ents) != 1 || string(b) != "mine\n" {
			t.Errorf("-o DIR was changed: %d entries, notes.txt %q", len(ents), b)
		}
	})
	t.Run("a user's files are never replaced", func(t *testing.T) {
		// another program's SQLite database named code.db, a text file
		// named code.db, perf record's perf.data alone: refused with one
		// line naming the directory, nothing changed
		sqliteDir := t.TempDir()
		if out, err := exec.Command(testenv.Tool(t, "sqlite3", "sqlite3"), filepath.Join(sqliteDir, "code.db"), "create table mine(x)").CombinedOutput(); err != nil {
			t.Fatalf("sqlite3: %v\n%s", err, out)
		}
		textDir := t.TempDir()
		os.WriteFile(filepath.Join(textDir, "code.db"), []byte("my notes\n"), 0o644)
		perfDir := t.TempDir()
		if out, err := exec.Command("perf", "record", "-q", "-e", "task-clock", "-o", filepath.Join(perfDir, "perf.data"), "--", "true").CombinedOutput(); err != nil {
			t.Fatalf("perf record: %v\n%s", err, out)
		}
		for _, d := range []string{sqliteDir, textDir, perfDir} {
			before := dirDigest(t, d)
			r := e2ePtjit(t, nil, "run", "-o", d, "--", e2eProg("exitcode"), "0")
			if r.code == 0 || strings.Contains(r.stdout, "exiting") {
				t.Errorf("-o %s: status %d, stdout %q: want refusal before running", d, r.code, r.stdout)
			}
			e2eOneLineError(t, r.stderr, d)
			if after := dirDigest(t, d); after != before {
				t.Errorf("-o %s changed the directory:\n%s\nwas\n%s", d, after, before)
			}
		}
	})
	t.Run("two runs into one directory", func(t *testing.T) {
		// the first holds DIR (a program that waits for its stdin to
		// close); the second fails at once; the first's recording decodes
		dir := filepath.Join(t.TempDir(), "rec")
		first := exec.Command(e2e.ptjit, "run", "-q", "-o", dir, "--", "cat")
		stdin, err := first.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		defer first.Process.Kill()
		deadline := time.Now().Add(e2eTimeout)
		for {
			if _, err := os.Stat(filepath.Join(dir, "code.db")); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the first run never created its code.db")
			}
			time.Sleep(10 * time.Millisecond)
		}
		r := e2ePtjit(t, nil, "run", "-q", "-o", dir, "--", e2eProg("exitcode"), "0")
		if r.code == 0 || !strings.Contains(r.stderr, "another ptjit run") {
			t.Errorf("second run: status %d, stderr %q: want refused at once", r.code, r.stderr)
		}
		e2eOneLineError(t, r.stderr, dir)
		stdin.Close()
		if err := first.Wait(); err != nil {
			t.Fatalf("first run: %v", err)
		}
		if r := e2ePtjit(t, nil, "history", "-i", dir); r.code != 0 {
			t.Errorf("history of the first run: status %d\n%s", r.code, r.stderr)
		}
	})
	t.Run("old recording replaced", func(t *testing.T) {
		tmp := t.TempDir()
		dir := filepath.Join(tmp, "rec")
		m1 := filepath.Join(tmp, "m1")
		if r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + m1}, "run", "-q", "-o", dir, "--", e2eProg("ubpf-test")); r.code != 0 {
			t.Fatalf("first run: status %d\n%s", r.code, r.stderr)
		}
		e2eCompare(t, e2eReadManifest(t, m1), e2eHistory(t, dir), false)
		m2 := filepath.Join(tmp, "m2")
		if r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + m2}, "run", "-q", "-o", dir, "--", e2eProg("sigsegv-handler")); r.code != 0 {
			t.Fatalf("second run into the same directory: status %d\n%s", r.code, r.stderr)
		}
		e2eCompare(t, e2eReadManifest(t, m2), e2eHistory(t, dir), false)
	})
	t.Run("soft-only options without --pt=soft", func(t *testing.T) {
		// refused with status 2 before anything is touched: an earlier
		// recording in DIR stays as it was
		dir := filepath.Join(t.TempDir(), "rec")
		if r := e2ePtjit(t, nil, "run", "-q", "-o", dir, "--", e2eProg("exitcode"), "0"); r.code != 0 {
			t.Fatalf("first run: status %d\n%s", r.code, r.stderr)
		}
		before, err := os.ReadFile(filepath.Join(dir, "code.db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			args []string
			what string // the message names it
		}{
			{[]string{"--soft-filter=jit"}, "--soft-filter"},
			{[]string{"--pt=off", "--ground-truth", filepath.Join(t.TempDir(), "gt")}, "--ground-truth"},
			{[]string{"--pt=soft", "--soft-filter=all"}, "--soft-filter"},
		} {
			r := e2ePtjit(t, nil, append(append([]string{"run", "-o", dir}, c.args...), "--", e2eProg("exitcode"), "0")...)
			if r.code != 2 || strings.Contains(r.stdout, "exiting") {
				t.Errorf("%v: status %d, stdout %q: want 2 before running", c.args, r.code, r.stdout)
			}
			e2eOneLineError(t, r.stderr, c.what)
		}
		if after, err := os.ReadFile(filepath.Join(dir, "code.db")); err != nil || string(after) != string(before) {
			t.Errorf("the earlier recording changed (%v)", err)
		}
	})
	t.Run("default directory", func(t *testing.T) {
		cwd := t.TempDir()
		r := e2eRun(t, []string{e2e.ptjit, "run", "-q", "--", e2eProg("exitcode"), "0"}, nil, "", cwd)
		if r.code != 0 {
			t.Fatalf("status %d\n%s", r.code, r.stderr)
		}
		if _, err := os.Stat(filepath.Join(cwd, "ptjit.out", "code.db")); err != nil {
			t.Errorf("no ./ptjit.out/code.db: %v", err)
		}
	})
}

// TestE2EPassThrough: stdin, stdout, stderr, environment and working
// directory reach the program unchanged; -q silences ptjit; without -q
// ptjit prints a summary line.
func TestE2EPassThrough(t *testing.T) {
	e2eSetup(t)
	run := func(t *testing.T, quiet bool, argv []string, env []string, stdin, dir string) (alone, traced e2eResult) {
		t.Helper()
		alone = e2eRun(t, argv, env, stdin, dir)
		args := []string{e2e.ptjit, "run", "-o", filepath.Join(t.TempDir(), "rec")}
		if quiet {
			args = append(args, "-q")
		}
		traced = e2eRun(t, append(append(args, "--"), argv...), env, stdin, dir)
		if traced.code != alone.code {
			t.Errorf("status %d under ptjit, %d alone\n%s", traced.code, alone.code, traced.stderr)
		}
		return alone, traced
	}
	t.Run("stdin", func(t *testing.T) {
		in := strings.Repeat("line of input\n", 1000)
		_, r := run(t, true, []string{"cat"}, nil, in, "")
		if r.stdout != in {
			t.Errorf("cat under ptjit: %d bytes out of %d in", len(r.stdout), len(in))
		}
	})
	t.Run("environment", func(t *testing.T) {
		env := []string{"PTJIT_E2E_MARK=a b\tc", "LC_ALL=C"}
		a, r := run(t, true, []string{"env"}, env, "", "")
		sa, sr := strings.Split(a.stdout, "\n"), strings.Split(r.stdout, "\n")
		sort.Strings(sa)
		sort.Strings(sr)
		if strings.Join(sa, "\n") != strings.Join(sr, "\n") {
			t.Errorf("environment differs\n--- alone:\n%s\n--- under ptjit:\n%s", a.stdout, r.stdout)
		}
		if !strings.Contains(r.stdout, "PTJIT_E2E_MARK=a b\tc\n") {
			t.Errorf("PTJIT_E2E_MARK missing under ptjit")
		}
	})
	t.Run("cwd", func(t *testing.T) {
		dir := t.TempDir()
		a, r := run(t, true, []string{"pwd"}, nil, "", dir)
		if r.stdout != a.stdout {
			t.Errorf("pwd under ptjit %q, alone %q", r.stdout, a.stdout)
		}
	})
	t.Run("stderr and status", func(t *testing.T) {
		argv := []string{"sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 5"}
		_, r := run(t, true, argv, nil, "", "")
		if r.stdout != "to-stdout\n" || r.stderr != "to-stderr\n" || r.code != 5 {
			t.Errorf("got stdout %q stderr %q status %d", r.stdout, r.stderr, r.code)
		}
	})
	t.Run("closed standard streams", func(t *testing.T) {
		// ptjit itself is started with the fd closed (Go's runtime then
		// opens /dev/null there); the program must find it closed, as it
		// does alone: seq fails writing to a closed stdout, a shell sees
		// no stdin, nothing on a closed stderr. A /dev/null redirection
		// stays /dev/null.
		for _, c := range []struct {
			redir string
			argv  []string
		}{
			{">&-", []string{"seq", "3"}},
			{"<&-", []string{"sh", "-c", "ls /proc/self/fd/0 2>/dev/null; echo status $?"}},
			{"2>&-", []string{"sh", "-c", "ls /proc/self/fd/2 >/dev/null 2>&1; echo status $?"}},
			{">/dev/null", []string{"seq", "3"}},
			{"</dev/null", []string{"sh", "-c", "cat; echo status $?"}},
		} {
			wrap := func(argv ...string) []string {
				return append([]string{"sh", "-c", `exec "$@" ` + c.redir, "sh"}, argv...)
			}
			alone := e2eRun(t, wrap(c.argv...), nil, "", "")
			traced := e2eRun(t, wrap(append([]string{e2e.ptjit, "run", "-q", "-o", filepath.Join(t.TempDir(), "rec"), "--"}, c.argv...)...), nil, "", "")
			if traced.code != alone.code || traced.stdout != alone.stdout || traced.stderr != alone.stderr {
				t.Errorf("%s %v: under ptjit status %d stdout %q stderr %q; alone %d %q %q", c.redir, c.argv,
					traced.code, traced.stdout, traced.stderr, alone.code, alone.stdout, alone.stderr)
			}
		}
	})
	t.Run("summary", func(t *testing.T) {
		_, r := run(t, false, []string{e2eProg("ubpf-test")}, nil, "", "")
		e2eCheckMessages(t, r.stderr)
		if !regexp.MustCompile(`(?m)^ptjit: .*\bversions?\b.*\bstops?\b`).MatchString(r.stderr) {
			t.Errorf("no summary line (\"ptjit: ... versions, ... stops ...\") on stderr:\n%s", r.stderr)
		}
		_, q := run(t, true, []string{e2eProg("ubpf-test")}, nil, "", "")
		if q.stderr != "" {
			t.Errorf("-q: stderr not empty:\n%s", q.stderr)
		}
	})
}

// TestE2EHistoryErrors: history on a missing or damaged code.db prints one
// "ptjit:" line naming the file and exits non-zero, never panics.
func TestE2EHistoryErrors(t *testing.T) {
	e2eSetup(t)
	tmp := t.TempDir()
	valid := filepath.Join(tmp, "valid")
	if r := e2ePtjit(t, nil, "run", "-q", "-o", valid, "--", e2eProg("ubpf-test")); r.code != 0 {
		t.Fatalf("ptjit run: status %d\n%s", r.code, r.stderr)
	}
	db, err := os.ReadFile(filepath.Join(valid, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string, content []byte) string {
		d := filepath.Join(tmp, name)
		os.Mkdir(d, 0o755)
		if content != nil {
			os.WriteFile(filepath.Join(d, "code.db"), content, 0o644)
		}
		return d
	}
	cases := []struct{ name, dir string }{
		{"missing directory", filepath.Join(tmp, "nowhere")},
		{"no code.db", mk("empty", nil)},
		{"garbage", mk("garbage", []byte("this is not an SQLite database, not even close\n"))},
		{"empty file", mk("zero", []byte{})},
		{"foreign sqlite header", mk("header", append([]byte("SQLite format 3\x00"), make([]byte, 4080)...))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, json := range []bool{false, true} {
				args := []string{"history", "-i", c.dir}
				if json {
					args = append(args, "--json")
				}
				r := e2ePtjit(t, nil, args...)
				if r.code == 0 {
					t.Errorf("%v: status 0, stdout:\n%s", args, r.stdout)
				}
				e2eOneLineError(t, r.stderr, c.dir)
			}
		})
	}
	// A truncated database may still answer some queries; it must not panic
	// and an error must be a single line.
	for _, frac := range []int{2, 4} {
		t.Run(fmt.Sprintf("truncated to 1/%d", frac), func(t *testing.T) {
			d := mk(fmt.Sprintf("trunc%d", frac), db[:len(db)/frac])
			r := e2ePtjit(t, nil, "history", "-i", d, "--json")
			e2eCheckMessages(t, r.stderr)
			if r.code != 0 {
				e2eOneLineError(t, r.stderr, d)
			}
		})
	}
}

// e2eHexOK reports whether s is lowercase hex (used for write log fields).
func e2eHexOK(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// dirDigest describes a directory's files (names and content hashes), to
// check that a refused run changed nothing.
func dirDigest(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range ents {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&b, "%s %x\n", e.Name(), sha256.Sum256(data))
	}
	return b.String()
}
