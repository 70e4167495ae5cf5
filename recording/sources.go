package recording

import (
	"bufio"
	"fmt"
	"io"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptfmt"
)

// Source is one PT stream ready to decode: the trace, the image to decode
// it through, the decoder configuration, and the names of its addresses.
type Source struct {
	Label    string
	TID, PID int // 0 when not known (a raw trace)
	Trace    decode.TraceReader
	Image    *decode.Image
	Config   *decode.FlowConfig
	Symbols  *Symbolizer
	// Origin maps the stream's offsets to the CPU queue's, for a thread
	// demultiplexed from a per-CPU trace; nil otherwise.
	Origin ptfmt.OriginFunc
	// Unattributed: for the pseudo-source "unattributed" (TID -1) of a
	// per-CPU recording, the stretches of CPU queues no thread could be
	// given (its Trace is empty).
	Unattributed []*DemuxError
}

// WriteProblems writes s's unattributed stretches in format
// (ptfmt.WriteUnattributed) and returns how many.
func (s *Source) WriteProblems(w *bufio.Writer, format string, stat *ptfmt.StatSink) int {
	for _, e := range s.Unattributed {
		ptfmt.WriteUnattributed(w, format, stat, e.CPU, e.Offset, e.End, e.TSC, e.Reason)
	}
	return len(s.Unattributed)
}

// Sources returns a Source per thread of the recording (only tid's when
// tid is not 0), each with a copy of base completed by the recorded PT
// configuration (options the user gave, as given says, win).
func (r *Recording) Sources(tid int, base *decode.FlowConfig, given func(option string) bool) ([]Source, error) {
	r.PTConfig(&base.Packet, given)
	ts, err := r.Traces(tid)
	if err != nil {
		return nil, err
	}
	out := make([]Source, 0, len(ts))
	for _, t := range ts {
		cfg := *base
		src := Source{Label: t.String(), TID: t.TID, PID: t.PID, Trace: t.Trace, Image: t.Image, Config: &cfg, Symbols: r.Symbolizer()}
		if t.Queue == nil {
			src.Origin = t.Origin
		}
		out = append(out, src)
	}
	if len(r.Unattributed) > 0 {
		out = append(out, Source{Label: "unattributed (stretches of CPU queues the sideband gives no thread)", TID: -1,
			Trace: decode.BytesTrace(nil), Image: decode.NewImage(), Config: base, Symbols: r.Symbolizer(), Unattributed: r.Unattributed})
	}
	return out, nil
}

// IsPerfInput reports whether raw mode's --pt FILE is read by content
// (ptfmt.OpenTraceInput): stdin, or a perf.data without a byte range. Any
// other file, and a byte range of any file, is a raw trace, as libipt's
// ptxed reads it.
func IsPerfInput(arg string) bool {
	name, _, _, err := ptfmt.ParseFileRange(arg)
	if err != nil {
		return false
	}
	if name == "-" {
		return true
	}
	if name != arg {
		return false
	}
	k, err := perf.SniffFile(name)
	return err == nil && k.IsPerfData()
}

// nopCloser closes nothing.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// OpenRaw opens raw mode's trace (libipt's ptxed --pt FILE --raw ...): a
// raw trace file is one Source; a perf.data (or stdin, IsPerfInput) is a
// Source per AUX queue (only tid's when tid is not 0), with the PT
// configuration recorded in it unless given says the user set an option.
// Every Source decodes through the --raw image with a copy of base. The
// caller closes the returned Closer when done with the Sources.
func OpenRaw(o *ptfmt.PtxedOptions, base *decode.FlowConfig, tid int, given func(option string) bool) (io.Closer, []Source, error) {
	if len(o.Raw) == 0 {
		return nil, nil, fmt.Errorf("raw mode needs at least one --raw FILE[:FROM[-TO]]:BASE")
	}
	img, err := o.RawImage()
	if err != nil {
		return nil, nil, err
	}
	if !IsPerfInput(o.PT) {
		pt, err := ptfmt.LoadPT(o.PT)
		if err != nil {
			return nil, nil, err
		}
		return nopCloser{}, []Source{{Label: o.PT, Trace: decode.BytesTrace(pt), Image: img, Config: base, Symbols: NewSymbolizer()}}, nil
	}
	in, err := ptfmt.OpenTraceInput(o.PT, true, ptfmt.LoadPT)
	if err != nil {
		return nil, nil, err
	}
	if in.Trace == nil { // a raw trace on stdin
		return in, []Source{{Label: in.Name, Trace: decode.BytesTrace(in.Raw), Image: img, Config: base, Symbols: NewSymbolizer()}}, nil
	}
	in.Trace.PTConfig(&base.Packet, given)
	var out []Source
	for _, q := range in.Trace.Queues {
		if tid != 0 && int(q.Tid) != tid {
			continue
		}
		cfg := *base
		out = append(out, Source{Label: fmt.Sprintf("%s %v", in.Name, q), TID: int(q.Tid),
			Trace: q.Reader(in.Perf), Image: img, Config: &cfg, Symbols: NewSymbolizer()})
	}
	if len(out) == 0 {
		in.Close()
		return nil, nil, fmt.Errorf("%s: no AUX queue of thread %d", in.Name, tid)
	}
	return in, out, nil
}
