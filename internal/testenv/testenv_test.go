package testenv

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCorpusComplete: the corpus in the repository is whole: INDEX.tsv's
// 481 rows, and every file a row names (trace, images, expected outputs)
// is there.
func TestCorpusComplete(t *testing.T) {
	dir := ConformanceDir(t)
	rows := CorpusIndex(t, dir)
	if len(rows) != 481 {
		t.Errorf("INDEX.tsv: %d rows, want 481 (README.txt)", len(rows))
	}
	ptxed := 0
	for _, r := range rows {
		files := []string{r.PT, r.PtdumpExp, r.PtxedExp}
		for _, img := range strings.Fields(r.RawImages) {
			files = append(files, strings.SplitN(img, ":", 2)[0])
		}
		if r.PtxedExp != "-" {
			ptxed++
		}
		for _, f := range files {
			if f == "-" {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("%s: %v", r.Name, err)
			}
		}
	}
	if ptxed != 432 {
		t.Errorf("%d rows with ptxed expectations, want 432", ptxed)
	}
	for _, f := range []string{"LICENSE.libipt", "README.txt", "synthetic/SUMMARY.txt"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// TestCompileC builds and runs a program.
func TestCompileC(t *testing.T) {
	bin := CompileC(t, "seven.c", "int main(void) { return 7; }\n", "-O1")
	if filepath.Base(bin) != "seven" {
		t.Errorf("CompileC returned %s, want .../seven", bin)
	}
	err := exec.Command(bin).Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("%s: %v, want exit status 7", bin, err)
	}
}

// TestCompileCDir: every C file of a directory is built once, into the
// directory given; a second call for the same directories builds nothing
// (the program removed in between stays removed).
func TestCompileCDir(t *testing.T) {
	src, out := t.TempDir(), t.TempDir()
	for name, code := range map[string]string{"three.c": "int main(void) { return 3; }\n", "four.c": "int main(void) { return 4; }\n"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]int{"three": 3, "four": 4} {
		bin := CompileCDir(t, src, out, name, "-O1")
		err := exec.Command(bin).Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != want {
			t.Fatalf("%s: %v, want exit status %d", bin, err, want)
		}
	}
	if err := os.Remove(filepath.Join(out, "three")); err != nil {
		t.Fatal(err)
	}
	if bin := CompileCDir(t, src, out, "three"); fileExists(bin) {
		t.Errorf("%s built again: CompileCDir builds a directory once", bin)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

const missingTool = "ptjit-testenv-no-such-tool"

// TestToolMissing: a missing tool skips the test, naming its package;
// under CI it fails it (run in a child process, whose failure is the
// expected outcome).
func TestToolMissing(t *testing.T) {
	if os.Getenv("PTJIT_TESTENV_CHILD") == "1" {
		Tool(t, missingTool, "some-package")
		return
	}
	var skipped bool
	t.Run("skips", func(t *testing.T) {
		t.Setenv("CI", "")
		defer func() { skipped = t.Skipped() }()
		Tool(t, missingTool, "some-package")
	})
	if !skipped {
		t.Error("without CI, a missing tool did not skip the test")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestToolMissing$", "-test.v")
	cmd.Env = append(os.Environ(), "PTJIT_TESTENV_CHILD=1", "CI=true")
	out, err := cmd.CombinedOutput()
	want := "CI is set: " + missingTool + " not installed (Debian: apt-get install some-package"
	if err == nil || !strings.Contains(string(out), want) || !strings.Contains(string(out), "--- FAIL: TestToolMissing") {
		t.Errorf("under CI=true: %v, output:\n%s\nwant a failure saying %q", err, out, want)
	}
}
