package testenv

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SystemLibc finds the libc.so.6 that /bin/true loads; it skips the test
// when there is none.
func SystemLibc(t testing.TB) string {
	t.Helper()
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	if out, err := exec.Command("ldd", "/bin/true").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "libc.so.6" && f[1] == "=>" {
				path = f[2]
			}
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	return real
}

// TextSection returns the bytes and address of the .text section of the
// ELF file at path, or fails the test.
func TextSection(tb testing.TB, path string) ([]byte, uint64) {
	tb.Helper()
	f, err := elf.Open(path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	s := f.Section(".text")
	if s == nil {
		tb.Fatalf("%s: no .text", path)
	}
	data, err := s.Data()
	if err != nil {
		tb.Fatalf("%s: read .text: %v", path, err)
	}
	return data, s.Addr
}

// RepoRoot returns the repository's root: the directory holding go.mod,
// found by walking up from the test's working directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// PacketSeeds returns fuzz seeds for the packet layer and the text formats
// above it: traces of libipt's corpus that hold every packet kind, errata
// and resyncs, plus a few hand-made byte strings.
func PacketSeeds(t testing.TB) [][]byte {
	psb := bytes.Repeat([]byte{0x02, 0x82}, 8)
	psbThen := func(b ...byte) []byte { return append(append([]byte{}, psb...), b...) }
	seeds := [][]byte{
		psbThen(0x02, 0x63, 0x80, 0x0c, 1, 2, 3, 4, 5, 6, 7, 8, 0x02, 0xb3),
		psbThen(0x07, 0x02, 0xf3, 0x02, 0x73, 1, 1, 1, 1, 0, 0xff),
		{},
	}
	dir := filepath.Join(ConformanceDir(t), "tests")
	for _, name := range []string{"dump-all-packets", "ptdump-trunc-resync", "ptdump-bad_opc-resync",
		"tsc-tma-cbr-mtc-cyc", "skl168-cyc", "mtc-ovf_reset-cyc", "ptet-evd_vmxq-cfe_intr"} {
		b, err := os.ReadFile(filepath.Join(dir, name, name+".pt"))
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}

// ConformanceDir returns libipt's test suite as data, kept in the
// repository at testdata/conformance/libipt (its README.txt says where it
// comes from). A missing INDEX.tsv fails the test: the corpus is part of
// every checkout.
func ConformanceDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(RepoRoot(t), "testdata", "conformance", "libipt")
	if _, err := os.Stat(filepath.Join(dir, "INDEX.tsv")); err != nil {
		t.Fatalf("libipt conformance corpus: %v", err)
	}
	return dir
}

// CorpusRow is one row of the corpus's INDEX.tsv: a trace, its raw images
// and libipt's expected outputs with the options that produced them.
type CorpusRow struct {
	Name, PT, PtdumpExp, PtxedExp, RawImages, PtxedOpts, PtdumpOpts, CPU string
}

// CorpusIndex reads INDEX.tsv of the corpus in dir.
func CorpusIndex(t testing.TB, dir string) []CorpusRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "INDEX.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	var rows []CorpusRow
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if i == 0 {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 9 {
			t.Fatalf("INDEX.tsv line %d: %d columns, want 9", i+1, len(f))
		}
		rows = append(rows, CorpusRow{Name: f[0], PT: f[1], RawImages: f[2], PtdumpExp: f[3],
			PtxedExp: f[4], PtxedOpts: f[5], PtdumpOpts: f[6], CPU: f[7]})
	}
	return rows
}

// ReadExpected reads a corpus file, gunzipping a .gz one.
func ReadExpected(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = gz
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Missing reports that a tool or file the test needs is not installed.
// Under CI ($CI non-empty, as make test reads it), where .ci/run
// installs everything the tests use, it fails the test; elsewhere it
// skips it, saying what to install.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("CI is set: "+format, args...)
	}
	t.Skipf(format, args...)
}
