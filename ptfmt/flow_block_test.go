package ptfmt

import (
	"bufio"
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/internal/testenv"
)

// insnOnly hides a sink's Block method, so the decoder hands it every
// instruction: the reference the block path must equal.
type insnOnly struct{ decode.FlowSink }

func blockTestWhere(in *decode.FlowInsn) string {
	if in.Section == nil {
		return "?"
	}
	return fmt.Sprintf("%s+%#x", in.Section.Tag, in.IP-in.Section.Vaddr)
}

// TestBlockPathCorpus: on every trace of the libipt conformance corpus
// (with its images and decoder options), the outputs that run on blocks —
// --calls, --stat, and the instruction count — are exactly what the same
// sinks give when fed instruction by instruction, on one core and on two.
func TestBlockPathCorpus(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	rows := readPtxedRows(t, dir)
	blocksSeen := 0
	for _, row := range rows {
		args := []string{}
		for _, r := range row.raws {
			args = append(args, "--raw", filepath.Join(dir, r))
		}
		args = append(args, strings.Fields(row.opts)...)
		args = append(args, "--pt", filepath.Join(dir, row.pt))
		o, err := ParsePtxedArgs(args)
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		img, err := o.RawImage()
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		pt, err := LoadPT(o.PT)
		if err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		cfg, err := o.FlowConfig()
		if err != nil {
			continue // an unknown --cpu: ptxed refuses, nothing to decode
		}
		for _, format := range []string{"calls", "stat"} {
			for _, jobs := range []int{1, 2} {
				run := func(blocks bool) string {
					var buf bytes.Buffer
					w := bufio.NewWriter(&buf)
					sink := NewFlowSink(format, w, nil, blockTestWhere, nil)
					var s decode.FlowSink = sink
					if !blocks {
						s = insnOnly{sink}
					} else if decode.AsBlockSink(s) == nil {
						t.Fatalf("%s sink does not take blocks", format)
					}
					counted := &countSink{next: s}
					if blocks {
						// As WriteFlow: the call tree behind it sees
						// only the blocks it needs (decode.BlockCounter).
						counted.calls, _ = sink.(*callSink)
					}
					decode.ParallelFlow(pt, img.Clone(), cfg, counted, o.Resync, jobs)
					if st, ok := sink.(*StatSink); ok {
						st.Print(w)
					}
					w.Flush()
					return fmt.Sprintf("%s\ninsns %d errors %d\n", buf.String(), counted.n.Insns, counted.n.Errors)
				}
				// WriteFlow's own sinks (the --stat chunks count their
				// blocks in the decoder, decode.BlockCounter).
				writeFlow := func() string {
					var buf bytes.Buffer
					w := bufio.NewWriter(&buf)
					var stat StatSink
					var counts FlowCounts
					err := WriteFlow(w, decode.BytesTrace(pt), img.Clone(), cfg, &FlowOptions{Format: format, Where: blockTestWhere,
						Jobs: jobs, Resync: o.Resync, Stat: &stat, Counts: &counts})
					if err != nil {
						t.Fatalf("%s: WriteFlow: %v", row.name, err)
					}
					if format == "stat" {
						stat.Print(w)
					}
					w.Flush()
					return fmt.Sprintf("%s\ninsns %d errors %d\n", buf.String(), counts.Insns, counts.Errors)
				}
				got, want := run(true), run(false)
				if got != want {
					t.Errorf("%s --%s -j %d: blocks vs instructions: %s", row.name, format, jobs,
						firstDiff(strings.Split(got, "\n"), strings.Split(want, "\n")))
				}
				if got := writeFlow(); got != want {
					t.Errorf("%s --%s -j %d: WriteFlow vs instructions: %s", row.name, format, jobs,
						firstDiff(strings.Split(got, "\n"), strings.Split(want, "\n")))
				}
			}
		}
		var probe blockProbe
		decode.RunFlow(decode.NewFlowDecoder(pt, img.Clone(), cfg), &probe, o.Resync)
		blocksSeen += probe.n
	}
	if blocksSeen == 0 {
		t.Error("no corpus trace went through a block")
	}
}

type blockProbe struct{ n int }

func (p *blockProbe) Insn(*decode.FlowInsn, uint64, uint64)     {}
func (p *blockProbe) Event(*decode.Event, uint64)               {}
func (p *blockProbe) Error(*decode.FlowError, decode.ErrorKind) {}
func (p *blockProbe) Block(*decode.FlowBlock, uint64, uint64)   { p.n++ }
