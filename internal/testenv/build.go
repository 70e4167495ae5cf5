package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Tool returns the path of the command name, which the Debian package pkg
// provides; where it is not installed the test is Missing it.
func Tool(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, "%s not installed (Debian: apt-get install %s; .ci/run installs it)", name, pkg)
	}
	return p
}

// CompileC writes source to a new temporary directory as the file name (C,
// or assembly where name ends in .s or .S), compiles it with gcc and flags,
// and returns the program's path: name without its extension, beside it.
// gcc's output goes into the failure message.
func CompileC(t testing.TB, name, source string, flags ...string) string {
	t.Helper()
	gcc := Tool(t, "gcc", "gcc")
	dir := t.TempDir()
	src := filepath.Join(dir, name)
	if err := os.WriteFile(src, []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := strings.TrimSuffix(src, filepath.Ext(src))
	args := append(append([]string{}, flags...), "-o", bin, src)
	if out, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// CompileCDir compiles every NAME.c of the directory src with gcc and
// flags into dir (which the caller makes and removes), once per test
// binary and directory, and returns dir/NAME for name. A failed build
// fails every test that asks, with gcc's output.
func CompileCDir(t testing.TB, src, dir, name string, flags ...string) string {
	t.Helper()
	gcc := Tool(t, "gcc", "gcc")
	v, _ := cdirs.LoadOrStore(src+"\x00"+dir, &cdir{})
	c := v.(*cdir)
	c.once.Do(func() {
		srcs, err := filepath.Glob(filepath.Join(src, "*.c"))
		if err == nil && len(srcs) == 0 {
			err = fmt.Errorf("no C sources in %s", src)
		}
		for _, f := range srcs {
			if err != nil {
				break
			}
			out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(f), ".c"))
			args := append(append([]string{}, flags...), "-o", out, f)
			if b, e := exec.Command(gcc, args...).CombinedOutput(); e != nil {
				err = fmt.Errorf("gcc %s: %v\n%s", strings.Join(args, " "), e, b)
			}
		}
		c.err = err
	})
	if c.err != nil {
		t.Fatal(c.err)
	}
	return filepath.Join(dir, name)
}

type cdir struct {
	once sync.Once
	err  error
}

var cdirs sync.Map // source and output directory → *cdir

var programs struct {
	once sync.Once
	dir  string
	err  error
}

// BuildTestPrograms builds the C test programs of testdata (make -C
// testdata, once per test binary; the Makefile renames each finished
// program into place, so test binaries building at the same time never run
// a half-written one) and returns testdata/bin. A failed build is an
// error, never a skip: the programs are sources of the repository.
func BuildTestPrograms() (string, error) {
	programs.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			programs.err = err
			return
		}
		if out, err := exec.Command("make", "-s", "-C", filepath.Join(root, "testdata")).CombinedOutput(); err != nil {
			programs.err = fmt.Errorf("make -C testdata: %v\n%s", err, out)
			return
		}
		programs.dir = filepath.Join(root, "testdata", "bin")
	})
	return programs.dir, programs.err
}

// TestPrograms is BuildTestPrograms for a test: it fails the test when the
// build fails.
func TestPrograms(t testing.TB) string {
	t.Helper()
	dir, err := BuildTestPrograms()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// LibiptHeader is the header testdata's Makefile and make test look for to
// build libipt's side of the differential tests.
const LibiptHeader = "/usr/include/intel-pt.h"

// LibiptHelper returns testdata/bin/libipt-helper, libipt's decoders as a
// command (testdata/libipt-helper.c, linked with -lipt: Go allows no cgo in
// test files), built by TestPrograms. Without libipt-dev the test is
// Missing it.
func LibiptHelper(t testing.TB) string {
	t.Helper()
	if _, err := os.Stat(LibiptHeader); err != nil {
		Missing(t, "libipt not installed: no %s (Debian: apt-get install libipt-dev)", LibiptHeader)
	}
	helper := filepath.Join(TestPrograms(t), "libipt-helper")
	if _, err := os.Stat(helper); err != nil {
		t.Fatalf("make -C testdata did not build the libipt helper: %v", err)
	}
	return helper
}

// Synthetic returns the trace of one of the corpus's synthetic traces
// ("small" or "mid": synthetic/SUMMARY.txt), the path of its code image
// and the address the image is loaded at.
func Synthetic(t testing.TB, name string) (pt []byte, image string, base uint64) {
	t.Helper()
	dir := filepath.Join(ConformanceDir(t), "synthetic")
	pt, err := os.ReadFile(filepath.Join(dir, name+".pt"))
	if err != nil {
		t.Fatal(err)
	}
	return pt, filepath.Join(dir, name+".bin"), SyntheticBase
}

// SyntheticBase is where the synthetic traces' images are loaded.
const SyntheticBase = 0x400000

// repoRoot is RepoRoot without a test: the directory holding go.mod above
// the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above %s", dir)
		}
		dir = parent
	}
}
