package ptfmt

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// The libipt conformance corpus: every row of INDEX.tsv with a ptxed
// expectation is decoded with ptjit's ptxed format, once per libipt decoder
// flavour (--insn-decoder, --block-decoder; an explicit one in the row's
// options wins), and compared with libipt's rule (diff -ub: whitespace
// amounts and trailing whitespace ignored).

type ptxedRow struct {
	name, pt, exp, opts string
	raws                []string
}

func readPtxedRows(t testing.TB, dir string) []ptxedRow {
	var rows []ptxedRow
	for _, r := range testenv.CorpusIndex(t, dir) {
		if r.PtxedExp != "-" {
			rows = append(rows, ptxedRow{name: r.Name, pt: r.PT, raws: strings.Fields(r.RawImages), exp: r.PtxedExp, opts: r.PtxedOpts})
		}
	}
	return rows
}

func runPtxedRow(dir string, row ptxedRow, decoder string) ([]byte, error) {
	args := []string{decoder}
	for _, r := range row.raws {
		args = append(args, "--raw", filepath.Join(dir, r))
	}
	args = append(args, strings.Fields(row.opts)...)
	args = append(args, "--pt", filepath.Join(dir, row.pt))
	o, err := ParsePtxedArgs(args)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = Ptxed(o, &out)
	return out.Bytes(), err
}

// firstDiff describes the first differing line.
func firstDiff(got, want []string) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		} else {
			g = "<EOF>"
		}
		if i < len(want) {
			w = want[i]
		} else {
			w = "<EOF>"
		}
		if g != w {
			return fmt.Sprintf("line %d: got %q, want %q", i+1, g, w)
		}
	}
	return ""
}

func TestConformancePtxed(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	rows := readPtxedRows(t, dir)
	if len(rows) != 432 {
		t.Errorf("INDEX.tsv has %d rows with ptxed expectations, want 432 (430 libipt tests + synthetic small and mid)", len(rows))
	}
	pass, exact := map[string]int{}, map[string]int{}
	var failed []string
	for _, row := range rows {
		wantRaw := testenv.ReadExpected(t, filepath.Join(dir, row.exp))
		want := diffBLines(wantRaw)
		for _, dec := range []string{"--insn-decoder", "--block-decoder"} {
			out, err := runPtxedRow(dir, row, dec)
			if err != nil {
				failed = append(failed, fmt.Sprintf("%s %s: %v", row.name, dec, err))
				continue
			}
			if diff := firstDiff(diffBLines(out), want); diff != "" {
				failed = append(failed, fmt.Sprintf("%s %s: %s", row.name, dec, diff))
				continue
			}
			pass[dec]++
			if bytes.Equal(out, wantRaw) {
				exact[dec]++
			}
		}
	}
	t.Logf("ptxed conformance (diff -ub): insn decoder %d/%d, block decoder %d/%d; byte-identical: %d and %d",
		pass["--insn-decoder"], len(rows), pass["--block-decoder"], len(rows), exact["--insn-decoder"], exact["--block-decoder"])
	for _, f := range failed {
		t.Error(f)
	}
}
