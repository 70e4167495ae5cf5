package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
)

// TestRefuse32Bit runs jit32 (testdata/jit32.c, built with gcc -m32: a
// 32-bit program that JIT-compiles f(x) = 3x + 7), alone and under ptjit,
// directly and as the child of a 64-bit shell. Alone it prints f(5) = 22.
// Under ptjit the run is refused at jit32's exec: exit 126, jit32 never
// prints, nor does the shell after it (every process is killed), stderr is
// the one line naming jit32's pid and path (-q or not), code.db records
// that exec and its state says the run was refused, and every query says
// the recording is incomplete. Without gcc-multilib jit32 is not built and
// the test skips, except under CI=true, where it fails.
func TestRefuse32Bit(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("jit32")
	if _, err := os.Stat(prog); err != nil {
		testenv.Missing(t, "%s not built: gcc -m32 cannot link here (Debian: apt-get install gcc-multilib)", prog)
	}
	alone := e2eRun(t, []string{prog}, nil, "", "")
	if alone.code != 0 || alone.stdout != "f(5) = 22\n" {
		t.Fatalf("jit32 alone: exit %d, stdout %q, stderr %q", alone.code, alone.stdout, alone.stderr)
	}
	line := regexp.MustCompile(`^ptjit: pid (\d+): ` + regexp.QuoteMeta(prog) + ` is a 32-bit \(compat-mode\) program: ptjit records 64-bit processes only\n$`)
	for _, c := range []struct {
		name   string
		flags  []string
		argv   []string
		stdout string
	}{
		{"direct", []string{"-q", "--pt=off"}, []string{prog}, ""},
		{"soft", []string{"--pt=soft", "--soft-filter=jit"}, []string{prog}, ""},
		{"child", []string{"--pt=off"}, []string{"/bin/sh", "-c", "echo before; " + prog + "; echo after"}, "before\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			args := append(append([]string{"run", "-o", dir}, c.flags...), "--")
			r := e2ePtjit(t, nil, append(args, c.argv...)...)
			if r.code != 126 || r.stdout != c.stdout {
				t.Fatalf("exit %d, stdout %q; want 126, %q\nstderr:\n%s", r.code, r.stdout, c.stdout, r.stderr)
			}
			m := line.FindStringSubmatch(r.stderr)
			if m == nil {
				t.Fatalf("stderr is not the one refusal line:\n%s", r.stderr)
			}
			pid, _ := strconv.Atoi(m[1])
			cdb, err := db.Open(filepath.Join(dir, "code.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer cdb.Close()
			procs, err := cdb.Processes()
			if err != nil {
				t.Fatal(err)
			}
			var execed, root int
			for _, p := range procs {
				if p.ExecPath == prog {
					execed = p.PID
				}
				if root == 0 {
					root = p.PID
				}
			}
			if execed != pid {
				t.Errorf("the line names pid %d; code.db's exec of %s is pid %d (processes %+v)", pid, prog, execed, procs)
			}
			if (c.name == "child") != (pid != root) {
				t.Errorf("refused pid %d, root pid %d: want the child refused only in the child case", pid, root)
			}
			why, err := cdb.Incomplete()
			if err != nil || !strings.HasPrefix(why, "ptjit refused the run and killed the program (pid "+m[1]+": ") {
				t.Errorf("Incomplete() = %q, %v; want the refusal", why, err)
			}
			h := e2ePtjit(t, nil, "history", "-i", dir)
			if h.code != 0 || !strings.Contains(h.stderr, "is incomplete: ptjit refused the run") {
				t.Errorf("history: exit %d, stderr %q; want a warning that the recording was refused", h.code, h.stderr)
			}
		})
	}
}
