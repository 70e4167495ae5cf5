package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestRealJITs runs HotSpot (java 17) and V8 (node 20) under ptjit run with
// the default W^X mode: both keep their code in writable and executable
// memory and patch it in place, and HotSpot relies on its own SIGSEGV
// handlers (the NullPointerException in Hot.java is an implicit null check).
// Their output and exit status must be what they are alone, and the
// recording must hold code versions and logged writes, each with its
// thread, instruction and bytes: HotSpot's under the default mode, V8's
// under --wx=precise (under the default, auto, a store into zeros — code
// being appended — sends its page batch at once, and V8, which patches
// little after it emits, can leave none; HotSpot under precise logs some
// 200,000 stores in a minute here).
func TestRealJITs(t *testing.T) {
	e2eSetup(t)
	root, _ := filepath.Abs("../..")
	javac := testenv.Tool(t, "javac", "default-jdk-headless")
	classes := t.TempDir()
	if out, err := exec.Command(javac, "-d", classes, filepath.Join(root, "testdata", "Hot.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name    string
		pkg     string // the Debian package of argv[0]
		argv    []string
		want    string
		precise bool // writes from a --wx=precise run
	}{
		{"java", "default-jdk-headless", []string{"java", "-cp", classes, "Hot"}, "caught NPE\njava result 906632\n", false},
		{"node", "nodejs", []string{"node", filepath.Join(root, "testdata", "hot.js")}, "node result 906632\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testenv.Tool(t, tc.argv[0], tc.pkg)
			alone := e2eRun(t, tc.argv, nil, "", "")
			if alone.code != 0 || alone.stdout != tc.want {
				t.Fatalf("alone: exit %d, stdout %q (want %q)", alone.code, alone.stdout, tc.want)
			}
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, append([]string{"run", "--pt=off", "-o", dir, "--"}, tc.argv...)...)
			if r.code != alone.code || r.stdout != alone.stdout {
				t.Fatalf("under ptjit: exit %d, stdout %q; alone: exit %d, stdout %q\nstderr: %s", r.code, r.stdout, alone.code, alone.stdout, r.stderr)
			}
			if strings.Contains(r.stderr, "panic") {
				t.Fatalf("ptjit stderr: %s", r.stderr)
			}
			versions := e2ePtjit(t, nil, "history", "-i", dir, "--json")
			nv := strings.Count(versions.stdout, "\n")
			if nv < 10 {
				t.Fatalf("recorded %d versions: a JIT at work makes many", nv)
			}
			wdir := dir
			if tc.precise {
				wdir = filepath.Join(t.TempDir(), "precise")
				r = e2ePtjit(t, nil, append([]string{"run", "--pt=off", "--wx=precise", "-o", wdir, "--"}, tc.argv...)...)
				if r.code != alone.code || r.stdout != alone.stdout {
					t.Fatalf("under --wx=precise: exit %d, stdout %q; alone: exit %d, stdout %q\nstderr: %s", r.code, r.stdout, alone.code, alone.stdout, r.stderr)
				}
			}
			writes := e2ePtjit(t, nil, "history", "-i", wdir, "--writes", "--json")
			nw := strings.Count(writes.stdout, "\n")
			if nw < 1 {
				t.Fatalf("%d writes logged: a JIT at work makes many", nw)
			}
			// Every write names its thread, instruction and bytes.
			first := strings.SplitN(writes.stdout, "\n", 2)[0]
			var w map[string]any
			if err := json.Unmarshal([]byte(first), &w); err != nil {
				t.Fatalf("write line %q: %v", first, err)
			}
			for _, k := range []string{"tsc", "tid", "ip", "addr", "old", "new"} {
				if _, ok := w[k]; !ok {
					t.Errorf("write line lacks %q: %s", k, first)
				}
			}
			t.Logf("%d versions, %d writes", nv, nw)
		})
	}
}
