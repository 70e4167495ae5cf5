package ptfmt

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/x86"
)

// ptjit decode's own formats of a decoded flow.

// NewFlowSink returns the sink that prints a decoded flow in one of ptjit
// decode's formats: "trace" (time, address, where, disassembly), "insn"
// (address and disassembly), "calls" (the call/return tree), "json" (one
// object per line) or "stat" (counts; a *StatSink). where names an
// instruction's address (recording.Symbolizer.Where).
func NewFlowSink(format string, w *bufio.Writer, where func(*decode.FlowInsn) string) decode.FlowSink {
	switch format {
	case "insn":
		return &traceSink{w: w, where: where, short: true}
	case "calls":
		return &callSink{w: w, where: where}
	case "json":
		return &jsonSink{enc: json.NewEncoder(w)}
	case "stat":
		return &StatSink{}
	}
	return &traceSink{w: w, where: where}
}

// traceSink prints the instruction trace.
type traceSink struct {
	w     *bufio.Writer
	where func(*decode.FlowInsn) string
	short bool
}

func (s *traceSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.short {
		fmt.Fprintf(s.w, "%016x  %s\n", in.IP, FlowInsnText(in))
		return
	}
	spec := ""
	if in.Speculative {
		spec = "? "
	}
	fmt.Fprintf(s.w, "%16d  %s%016x  %-28s  %s\n", in.TSC, spec, in.IP, s.where(in), FlowInsnText(in))
}

func (s *traceSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "[%s]\n", EventText(ev, true))
}

func (s *traceSink) Error(e *decode.FlowError, kind string) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
}

// callSink prints the call/return tree: one line per call and return,
// indented by call depth.
type callSink struct {
	w     *bufio.Writer
	where func(*decode.FlowInsn) string
	depth int
	ret   bool // the previous instruction was a return
	call  bool // the previous instruction was a call
}

func (s *callSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.call {
		fmt.Fprintf(s.w, "%16d  %s-> %s\n", in.TSC, strings.Repeat("  ", s.depth), s.where(in))
		s.depth++
	}
	if s.ret {
		if s.depth > 0 {
			s.depth--
		}
		fmt.Fprintf(s.w, "%16d  %s<- %s\n", in.TSC, strings.Repeat("  ", s.depth), s.where(in))
	}
	s.call = in.Class.IsCall() || in.Class == x86.ClassFarCall || in.Class == x86.ClassSyscall
	s.ret = in.Class == x86.ClassRet || in.Class == x86.ClassFarRet || in.Class == x86.ClassSysret
}

func (s *callSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "%s[%s]\n", strings.Repeat("  ", s.depth), EventText(ev, true))
	s.call, s.ret = false, false
}

func (s *callSink) Error(e *decode.FlowError, kind string) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
	s.call, s.ret, s.depth = false, false, 0
}

// jsonSink prints one JSON object per line.
type jsonSink struct{ enc *json.Encoder }

type jsonInsn struct {
	Kind   string `json:"kind"`
	TSC    uint64 `json:"tsc"`
	IP     string `json:"ip"`
	Size   uint8  `json:"size"`
	Class  string `json:"class"`
	Spec   bool   `json:"speculative,omitempty"`
	Region string `json:"section,omitempty"`
	Offset uint64 `json:"pt_offset"`
}

func (s *jsonSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	r := jsonInsn{Kind: "insn", TSC: in.TSC, IP: fmt.Sprintf("%#x", in.IP), Size: in.Size, Class: in.Class.String(), Spec: in.Speculative, Offset: off}
	if in.Section != nil {
		r.Region = in.Section.Tag
	}
	s.enc.Encode(&r)
}

func (s *jsonSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	r := map[string]any{"kind": "event", "event": EventText(ev, true), "pt_offset": off}
	if ev.HasTSC {
		r["tsc"] = ev.TSC
	}
	s.enc.Encode(r)
}

func (s *jsonSink) Error(e *decode.FlowError, kind string) {
	s.enc.Encode(map[string]any{"kind": kind, "error": e.Code.String(), "pt_offset": e.Offset, "ip": fmt.Sprintf("%#x", e.IP)})
}

// StatSink counts instructions (by branch class), events and errors.
type StatSink struct {
	insns, events, errors uint64
	classes               map[string]uint64
}

func (s *StatSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	s.insns++
	if in.Class != x86.ClassOther {
		if s.classes == nil {
			s.classes = map[string]uint64{}
		}
		s.classes[in.Class.String()]++
	}
}

func (s *StatSink) Event(ev *decode.Event, off uint64) {
	if !ev.StatusUpdate {
		s.events++
	}
}

func (s *StatSink) Error(e *decode.FlowError, kind string) { s.errors++ }

// Add adds o's counts to s.
func (s *StatSink) Add(o *StatSink) {
	s.insns += o.insns
	s.events += o.events
	s.errors += o.errors
	for k, v := range o.classes {
		if s.classes == nil {
			s.classes = map[string]uint64{}
		}
		s.classes[k] += v
	}
}

// Print writes the counts, one "name: N" line each.
func (s *StatSink) Print(w io.Writer) {
	fmt.Fprintf(w, "instructions: %d\nevents: %d\nerrors: %d\n", s.insns, s.events, s.errors)
	for _, k := range []string{"cond-jump", "jump", "ind-jump", "call", "ind-call", "ret", "far-call", "far-ret", "far-jump", "syscall", "sysret"} {
		if n := s.classes[k]; n != 0 {
			fmt.Fprintf(w, "%s: %d\n", k, n)
		}
	}
}
