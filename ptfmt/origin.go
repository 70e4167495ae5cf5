package ptfmt

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/ptjit/ptjit/decode"
)

// OriginFunc maps an offset of a thread's stream demultiplexed from a
// per-CPU trace (recording.Thread.Origin) to the CPU whose queue the byte
// came from and its offset in that queue.
type OriginFunc func(off uint64) (cpu int, qoff uint64)

// originSink passes a flow on to next with every trace offset mapped to
// the CPU queue's, and each error naming its CPU (where next can print
// it: cpuErrorSink).
type originSink struct {
	next   decode.FlowSink
	origin OriginFunc
	relay  decode.BlockRelay
}

// Block implements decode.BlockSink: a block goes on whole, at its
// offset in the CPU queue, when next takes blocks.
func (s *originSink) Block(b *decode.FlowBlock, off, tsc uint64) {
	_, q := s.origin(off)
	s.relay.Send(s.next, b, q, tsc)
}

// TakesBlocks says whether next does.
func (s *originSink) TakesBlocks() bool { return s.relay.Takes(s.next) }

// cpuErrorSink is a sink that prints the CPU of an error's offset.
type cpuErrorSink interface {
	errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int)
}

func (s *originSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	_, q := s.origin(off)
	s.next.Insn(in, q, tsc)
}

func (s *originSink) Event(ev *decode.Event, off uint64) {
	c := *ev
	_, c.Offset = s.origin(ev.Offset)
	_, q := s.origin(off)
	s.next.Event(&c, q)
}

func (s *originSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	c := *e
	cpu, q := s.origin(e.Offset)
	c.Offset = q
	if cs, ok := s.next.(cpuErrorSink); ok {
		cs.errorOnCPU(&c, kind, cpu)
		return
	}
	s.next.Error(&c, kind)
}

func (s *traceSink) errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int) {
	fmt.Fprintf(s.w, "[%s: cpu %d pt offset %#x, ip %#x: %s]\n", kind, cpu, e.Offset, e.IP, e.Code)
}

func (s *callSink) errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int) {
	fmt.Fprintf(s.w, "[%s: cpu %d pt offset %#x, ip %#x: %s]\n", kind, cpu, e.Offset, e.IP, e.Code)
	s.call, s.ret, s.depth = false, false, 0
}

func (s *jsonSink) errorOnCPU(e *decode.FlowError, kind decode.ErrorKind, cpu int) {
	s.enc.Encode(map[string]any{"kind": kind, "error": e.Code.String(), "cpu": cpu, "pt_offset": e.Offset, "ip": fmt.Sprintf("%#x", e.IP)})
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
