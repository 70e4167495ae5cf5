package ptfmt

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/ptjit/ptjit/decode"
)

// OriginFunc maps an offset of a thread's stream demultiplexed from a
// per-CPU trace (recording.Thread.Origin) to the stretch of the stream
// around it that came, in one piece, from one CPU's queue.
type OriginFunc func(off uint64) OriginSpan

// OriginSpan says where the stream's bytes [From, To) came from: the
// queue of CPU, from queue offset QOff on, or, when Fixed, the bytes that
// replace the packet at QOff (an IP packet rewritten with a full IP).
type OriginSpan struct {
	From, To uint64
	CPU      int
	QOff     uint64
	Fixed    bool
}

// Map returns the queue offset of the stream's byte at off, in s.
func (s *OriginSpan) Map(off uint64) uint64 {
	if s.Fixed {
		return s.QOff
	}
	return s.QOff + off - s.From
}

// originMap is an OriginFunc with the last span it returned: offsets come
// mostly in increasing order, so most lookups stay in that span.
type originMap struct {
	f    OriginFunc
	span OriginSpan
}

// at returns the CPU and queue offset of the stream's byte at off.
func (m *originMap) at(off uint64) (cpu int, qoff uint64) {
	if off < m.span.From || off >= m.span.To {
		m.span = m.f(off)
	}
	return m.span.CPU, m.span.Map(off)
}

// originSink passes a flow on to next with every trace offset mapped to
// the CPU queue's, and each error naming its CPU (where next can print
// it: cpuErrorSink).
type originSink struct {
	next   decode.FlowSink
	origin originMap
	relay  decode.BlockRelay
}

// Block implements decode.BlockSink: a block goes on whole, at its
// offset in the CPU queue, when next takes blocks.
func (s *originSink) Block(b *decode.FlowBlock, off, tsc uint64) {
	_, q := s.origin.at(off)
	s.relay.Send(s.next, b, q, tsc)
}

// TakesBlocks says whether next does.
func (s *originSink) TakesBlocks() bool { return s.relay.Takes(s.next) }

// cpuErrorSink is a sink that prints the CPU of an error's offset.
type cpuErrorSink interface {
	errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int)
}

func (s *originSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	_, q := s.origin.at(off)
	s.next.Insn(in, q, tsc)
}

func (s *originSink) Event(ev *decode.Event, off uint64) {
	c := *ev
	_, c.Offset = s.origin.at(ev.Offset)
	_, q := s.origin.at(off)
	s.next.Event(&c, q)
}

func (s *originSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	c := *e
	cpu, q := s.origin.at(e.Offset)
	c.Offset = q
	if cs, ok := s.next.(cpuErrorSink); ok {
		cs.errorOnCPU(&c, kind, cpu)
		return
	}
	s.next.Error(&c, kind)
}

// cpuErrorText is the error line of a per-CPU recording's thread: "[KIND:
// cpu C pt offset X, tsc T, ip I: CODE]", X the offset in CPU C's queue,
// T the decoder's time (left out when it has none).
func cpuErrorText(e *decode.FlowError, kind decode.ErrorKind, cpu int) string {
	tsc := ""
	if e.HasTSC {
		tsc = fmt.Sprintf(", tsc %#x", e.TSC)
	}
	return fmt.Sprintf("[%s: cpu %d pt offset %#x%s, ip %#x: %s]\n", kind, cpu, e.Offset, tsc, e.IP, e.Code)
}

func (s *traceSink) errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int) {
	s.w.WriteString(cpuErrorText(e, kind, cpu))
}

func (s *callSink) errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int) {
	s.w.WriteString(cpuErrorText(e, kind, cpu))
	s.kind, s.depth = s.kind&kindEntry, 0
}

func (s *jsonSink) errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int) {
	r := map[string]any{"kind": kind, "error": e.Code.String(), "cpu": cpu, "pt_offset": e.Offset, "ip": fmt.Sprintf("%#x", e.IP)}
	if e.HasTSC {
		r["tsc"] = e.TSC
	}
	s.enc.Encode(r)
}

// WriteUnattributed writes, in format, a stretch [off, end) of CPU cpu's
// queue that demultiplexing a per-CPU trace gave no thread, with why: an
// error line ("[error: cpu C pt offset X-Y, tsc T: not attributed to a
// thread: REASON]"), or a JSON object of kind "error". The "stat" format
// counts it in s.
func WriteUnattributed(w *bufio.Writer, format string, s *StatSink, cpu int, off, end, tsc uint64, reason string) {
	switch format {
	case "json":
		json.NewEncoder(w).Encode(map[string]any{"kind": decode.KindError, "error": "not attributed to a thread: " + reason,
			"cpu": cpu, "pt_offset": off, "pt_end": end, "tsc": tsc})
	case "stat":
		if s != nil {
			s.errors++
		}
	default:
		fmt.Fprintf(w, "[error: cpu %d pt offset %#x-%#x, tsc %#x: not attributed to a thread: %s]\n", cpu, off, end, tsc, reason)
	}
}
