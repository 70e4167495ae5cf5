package recording

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/ptpkt"
)

// FlowRun is one decode of a recording's sources into one of decode's
// formats (ptfmt.NewFlowSink's, "folded" or "summary").
type FlowRun struct {
	Format string
	Window int  // the most trace bytes held at once
	Jobs   int  // PSB segments decoded at once
	Resync bool // resync at the next PSB after an error
	Time   TimeBase
	// From, To: the TSC window [From, To) (To 0: the whole trace); only
	// the PSB segments around it are read (decode.TimeRange).
	From, To uint64
	// Progress, if not nil, is told how many bytes of all the sources'
	// traces are decoded.
	Progress func(done uint64)
	// Warn, if not nil, is told what the output cannot show (stacks
	// restarted after decode errors).
	Warn func(msg string)
	// Stack, with Format "stack", follows each source's call stack
	// (ptfmt.Profile.Stack; nil: not that source's) and is told with
	// done when the source's flow ended. Nothing is written to w but
	// the unattributed stretches, as "stat" counts them.
	Stack func(s *Source) (sink ptfmt.StackSink, done func())
}

// WriteFlows decodes every source in turn into w in r.Format (or,
// "stack", into r.Stack), and returns
// the instructions and errors seen. Several sources are told apart by a
// "== LABEL" line (a {"kind": "trace"} object in JSON); "stat", "folded"
// and "summary" are written once, for all of them, at the end.
func WriteFlows(w *bufio.Writer, sources []Source, r FlowRun) (ptfmt.FlowCounts, error) {
	var counts ptfmt.FlowCounts
	fo := ptfmt.FlowOptions{Format: r.Format, Window: r.Window, Jobs: r.Jobs, Resync: r.Resync,
		Stat: &ptfmt.StatSink{}, Counts: &counts, Time: r.Time.Format, From: r.From, To: r.To}
	var done uint64
	noPSB := 0 // sources whose trace has no PSB: nothing decodable
	if r.Progress != nil {
		fo.Progress = func(n uint64) { r.Progress(done + n) }
	}
	problems := r.Format
	if r.Format == "folded" || r.Format == "summary" || r.Format == "stack" {
		fo.Profile, problems = &ptfmt.Profile{}, "stat" // unattributed stretches: counted as errors
	}
	var stackDone func()
	for _, s := range sources {
		if s.Trace.Size() > 0 && !hasPSB(s.Trace) {
			// Not a trace a decoder can start on (usually not PT at all).
			noPSB++
			if r.Warn != nil && len(sources) > 1 {
				r.Warn(fmt.Sprintf("%s: no PSB in %d bytes of trace: nothing to decode", s.Label, s.Trace.Size()))
			}
			continue
		}
		if fo.Profile != nil {
			prefix := s.Label
			if s.TID > 0 {
				prefix = fmt.Sprintf("tid %d", s.TID)
			}
			fo.Profile.Thread(prefix, s.Label)
			fo.Profile.Func = s.Symbols.Func
			if r.Stack != nil {
				fo.Profile.Stack, stackDone = r.Stack(&s)
			}
		} else if len(sources) > 1 && r.Format != "json" && r.Format != "stat" {
			fmt.Fprintf(w, "== %s\n", s.Label)
		}
		if r.Format == "json" {
			json.NewEncoder(w).Encode(map[string]any{"kind": "trace", "tid": s.TID, "pid": s.PID, "label": s.Label})
		}
		fo.Where, fo.Origin = s.Symbols.Where, s.Origin
		counts.Errors += uint64(s.WriteProblems(w, problems, fo.Stat))
		src, base := s.Trace, uint64(0)
		if r.To != 0 {
			lo, hi, err := decode.TimeRange(src, &s.Config.Packet, r.From, r.To)
			if err != nil {
				return counts, fmt.Errorf("%s: %v", s.Label, err)
			}
			src, base = decode.TraceSection(src, lo, hi-lo), uint64(lo)
		}
		fo.Base = base
		if err := ptfmt.WriteFlow(w, src, s.Image, s.Config, &fo); err != nil {
			return counts, fmt.Errorf("%s: %v", s.Label, err)
		}
		if fo.Profile != nil && fo.Profile.Stack != nil {
			fo.Profile.EndThread()
			if stackDone != nil {
				stackDone()
			}
		}
		done += uint64(s.Trace.Size())
	}
	if noPSB > 0 && noPSB == len(sources) {
		if len(sources) == 1 {
			return counts, fmt.Errorf("%s: no PSB in %d bytes of trace: nothing to decode (not Intel PT?)", sources[0].Label, sources[0].Trace.Size())
		}
		return counts, fmt.Errorf("no PSB in any trace: nothing to decode (not Intel PT?)")
	}
	switch r.Format {
	case "stat":
		fo.Stat.Print(w)
	case "folded":
		fo.Profile.WriteFolded(w)
		if n := fo.Profile.Resets; n > 0 && r.Warn != nil {
			r.Warn(fmt.Sprintf("%d stacks restarted after decode errors (their callers are unknown)", n))
		}
	case "summary":
		var sec func(uint64) float64
		if !r.Time.Raw && r.Time.Hz != 0 {
			sec = func(t uint64) float64 { return float64(t) / float64(r.Time.Hz) }
		}
		fo.Profile.WriteSummary(w, sec)
	}
	return counts, nil
}

// hasPSB reports whether t holds a PSB packet anywhere, a sync point a
// decoder can start from. A trace usually starts with one: the first read
// is small, and only a trace without one is read to its end.
func hasPSB(t decode.TraceReader) bool {
	pat := ptpkt.PSBPattern[:]
	chunk := 4 << 10
	var buf []byte // grown with chunk: the usual trace needs the first 4 KiB
	for off := int64(0); off < t.Size(); off += int64(chunk) {
		if len(buf) < chunk+len(pat)-1 {
			buf = make([]byte, chunk+len(pat)-1)
		}
		n, err := t.ReadAt(buf[:chunk+len(pat)-1], off)
		if bytes.Contains(buf[:n], pat) {
			return true
		}
		if err != nil {
			return false
		}
		chunk = min(chunk*16, 1<<20)
	}
	return false
}
