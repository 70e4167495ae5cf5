package ptfmt

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// diffBLines normalizes output for a `diff -ub` comparison: trailing white
// space is dropped and every run of blanks counts as one blank.
func diffBLines(b []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, strings.Join(strings.Fields(sc.Text()), " ")+
			leadingBlank(sc.Text()))
	}
	return out
}

// leadingBlank keeps the information "the line starts with white space",
// which diff -b does not ignore (it is appended so Fields can be used).
func leadingBlank(s string) string {
	if s != "" && (s[0] == ' ' || s[0] == '\t') && strings.TrimSpace(s) != "" {
		return "\x00lead"
	}
	return ""
}

// runPtdumpRow dumps pt with a row's ptdump options through the code path
// of `ptjit dump --format=ptdump`.
func runPtdumpRow(t testing.TB, pt []byte, opts string) []byte {
	t.Helper()
	var args []string
	if opts != "-" {
		args = strings.Fields(opts)
	}
	s, files, err := ParsePtdumpArgs(args)
	if err != nil {
		t.Fatalf("options %q: %v", opts, err)
	}
	if len(files) != 0 {
		t.Fatalf("options %q: unexpected arguments %q", opts, files)
	}
	var out bytes.Buffer
	if err := PtdumpRun(&out, pt, s); err != nil {
		t.Fatalf("ptdump: %v", err)
	}
	return out.Bytes()
}

// compareDiffB fails t with the first difference between got and want
// under diff -ub rules and reports whether they matched byte for byte.
func compareDiffB(t testing.TB, got, want []byte) (exact bool) {
	t.Helper()
	g, w := diffBLines(got), diffBLines(want)
	n := min(len(g), len(w))
	for i := 0; i < n; i++ {
		if g[i] != w[i] {
			t.Errorf("line %d differs:\n got: %q\nwant: %q", i+1, g[i], w[i])
			return false
		}
	}
	if len(g) != len(w) {
		extra := g[n:]
		if len(w) > n {
			extra = w[n:]
		}
		t.Errorf("got %d lines, want %d; first extra: %q", len(g), len(w), extra[0])
		return false
	}
	return bytes.Equal(got, want)
}

func TestConformancePtdump(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	rows := testenv.CorpusIndex(t, dir)
	var total, pass, exact int
	for _, r := range rows {
		if r.PtdumpExp == "-" {
			continue
		}
		total++
		ok := t.Run(r.Name, func(t *testing.T) {
			pt, err := os.ReadFile(filepath.Join(dir, r.PT))
			if err != nil {
				t.Fatal(err)
			}
			want := testenv.ReadExpected(t, filepath.Join(dir, r.PtdumpExp))
			got := runPtdumpRow(t, pt, r.PtdumpOpts)
			if compareDiffB(t, got, want) {
				exact++
			}
		})
		if ok {
			pass++
		}
	}
	// 479 rows from libipt's tests plus synthetic-small and -mid.
	if total != 481 {
		t.Errorf("corpus has %d ptdump rows, want 481", total)
	}
	t.Logf("ptdump conformance: %d/%d rows pass (diff -ub); %d byte-identical", pass, total, exact)
}

func TestConformancePtdumpSynthetic(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	for _, c := range []struct{ pt, exp string }{
		{"synthetic/small.pt", "synthetic/small-ptdump.exp"},
		{"synthetic/mid.pt", "synthetic/mid-ptdump.exp.gz"},
	} {
		t.Run(filepath.Base(c.pt), func(t *testing.T) {
			pt := testenv.ReadExpected(t, filepath.Join(dir, c.pt))
			want := testenv.ReadExpected(t, filepath.Join(dir, c.exp))
			got := runPtdumpRow(t, pt, "-")
			// These expectations are real ptdump output: byte-identical.
			if compareDiffB(t, got, want) && !bytes.Equal(got, want) {
				t.Errorf("output matches under diff -ub but is not byte-identical")
			}
		})
	}
}
