package ptfmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/x86"
)

// ptjit decode's own formats of a decoded flow.

// NewFlowSink returns the sink that prints a decoded flow in one of ptjit
// decode's formats: "trace" (time, address, where, disassembly), "insn"
// (address and disassembly), "calls" (the call/return tree), "json" (one
// object per line) or "stat" (counts; a *StatSink). img is the image the
// flow was decoded through (the disassembly of an instruction across two
// sections reads the second there; nil: none). where names an
// instruction's address (recording.Symbolizer.Where).
// time prints a TSC (nil: as the raw number).
func NewFlowSink(format string, w *bufio.Writer, img *decode.Image, where func(*decode.FlowInsn) string, time func(uint64) string) decode.FlowSink {
	if time == nil {
		time = func(tsc uint64) string { return strconv.FormatUint(tsc, 10) }
	}
	switch format {
	case "insn":
		return &traceSink{w: w, img: img, where: where, short: true}
	case "calls":
		return &callSink{w: w, where: where, time: time}
	case "json":
		return &jsonSink{enc: json.NewEncoder(w), where: where, time: time}
	case "stat":
		return &StatSink{}
	}
	return &traceSink{w: w, img: img, where: where, time: time}
}

// traceSink prints the instruction trace.
type traceSink struct {
	w     *bufio.Writer
	img   *decode.Image
	where func(*decode.FlowInsn) string
	time  func(uint64) string
	short bool
}

func (s *traceSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.short {
		fmt.Fprintf(s.w, "%016x  %s\n", in.IP, FlowInsnText(in, s.img))
		return
	}
	spec := ""
	if in.Speculative {
		spec = "? "
	}
	fmt.Fprintf(s.w, "%16s  %s%016x  %-28s  %s\n", s.time(in.TSC), spec, in.IP, s.where(in), FlowInsnText(in, s.img))
}

func (s *traceSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "[%s]\n", EventText(ev, true))
}

func (s *traceSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
}

// callSink prints the call/return tree: one line per call and return,
// indented by call depth. It formats its lines by hand and remembers the
// names of the addresses it printed (direct-mapped, 4096 slots): on a long
// trace it writes millions of lines, mostly for the same few call sites.
type callSink struct {
	w     *bufio.Writer
	where func(*decode.FlowInsn) string
	time  func(uint64) string
	depth int
	// kind: kindCall, the previous instruction was a call; kindRet, a
	// return; kindEntry: tracing started anew and no instruction ran
	// since: the next one is entered, also after a disable and resume
	// in between (a per-CPU trace's context switch right at the entry)
	kind uint8
	// callEnd is the address after the previous instruction; outCalls
	// the calls after which tracing stopped (their target is outside the
	// traced code): their return address and depth, the last one last
	callEnd  uint64
	outCalls []outDepth
	names    *[whereSlots]whereSlot
	// the last time printed, padded (prefix): lines between two timing
	// updates share it
	lastTSC uint64
	prefix  []byte
}

// outDepth is a call out of the traced code: where it returns to and the
// depth of its caller.
type outDepth struct {
	ret   uint64
	depth int
}

// maxOutCalls bounds callSink.outCalls and Profile.outCalls: calls out of the traced code that
// never came back (a longjmp, an exception unwound outside) are forgotten.
const maxOutCalls = 64

// whereSlot is an entry of callSink's direct-mapped memo of names.
type whereSlot struct {
	sec  *decode.Section
	ip   uint64
	name string
}

const whereSlots = 1 << 12

// indent is the call tree's indentation up to depth 32, sliced.
const indent = "                                                                "

// name returns the name of the instruction at ip in sec; in is built (by
// mk) only when the memo does not have it.
func (s *callSink) name(sec *decode.Section, ip uint64, mk func() decode.FlowInsn) string {
	if s.names == nil {
		s.names = new([whereSlots]whereSlot)
	}
	e := &s.names[(ip^ip>>12)&(whereSlots-1)]
	if e.sec != sec || e.ip != ip || e.name == "" {
		in := mk()
		*e = whereSlot{sec, ip, s.where(&in)}
	}
	return e.name
}

// line writes "%16s  <indent><arrow><name>\n", the time as s.time prints
// it, straight into w's buffer.
func (s *callSink) line(tsc uint64, arrow, name string) {
	if tsc != s.lastTSC || s.prefix == nil {
		d := s.time(tsc)
		s.lastTSC, s.prefix = tsc, s.prefix[:0]
		for i := len(d); i < 16; i++ {
			s.prefix = append(s.prefix, ' ')
		}
		s.prefix = append(append(s.prefix, d...), ' ', ' ')
	}
	if n := len(s.prefix) + 2*s.depth + len(arrow) + len(name) + 1; s.w.Available() < n {
		s.w.Flush()
	}
	b := append(s.w.AvailableBuffer(), s.prefix...)
	if 2*s.depth <= len(indent) {
		b = append(b, indent[:2*s.depth]...)
	} else {
		for i := 0; i < s.depth; i++ {
			b = append(b, ' ', ' ')
		}
	}
	b = append(append(append(b, arrow...), name...), '\n')
	s.w.Write(b)
}

// enter prints the line of a call's or return's target, the instruction
// at ip in sec (in, built only when its name is not known yet).
func (s *callSink) enter(tsc uint64, sec *decode.Section, ip uint64, in func() decode.FlowInsn) {
	if s.kind&kindCall != 0 {
		s.line(tsc, "-> ", s.name(sec, ip, in))
		s.depth++
	}
	if s.kind&kindRet != 0 {
		if s.depth > 0 {
			s.depth--
		}
		s.line(tsc, "<- ", s.name(sec, ip, in))
	}
}

func (s *callSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.kind&(kindCall|kindRet) != 0 {
		s.enter(in.TSC, in.Section, in.IP, func() decode.FlowInsn { return *in })
	}
	s.setEnd(in.Class)
	s.callEnd = in.IP + uint64(in.Size)
}

// Block implements decode.BlockSink: only a block's first instruction can
// follow a call or return, and only its last one can be one.
func (s *callSink) Block(b *decode.FlowBlock, off, tsc uint64) {
	if s.kind&(kindCall|kindRet) != 0 {
		s.enterBlock(b)
		return
	}
	s.kind, s.callEnd = callKinds[b.EndClass], b.End
}

// enterBlock is enter for a block's first instruction (out of Block, which
// stays small enough to inline).
//
//go:noinline
func (s *callSink) enterBlock(b *decode.FlowBlock) {
	s.enter(b.TSC, b.Section, b.IP, b.First)
	s.setEnd(b.EndClass)
	s.callEnd = b.End
}

func (s *callSink) setEnd(c x86.InsnClass) {
	s.kind = callKinds[c]
}

// callKinds says which classes of instruction end a block with a call
// (kindCall) or a return (kindRet) for the call tree: one load per block.
var callKinds = func() (t [256]uint8) {
	for _, c := range []x86.InsnClass{x86.ClassCall, x86.ClassIndCall, x86.ClassFarCall, x86.ClassSyscall} {
		t[c] |= kindCall
	}
	for _, c := range []x86.InsnClass{x86.ClassRet, x86.ClassFarRet, x86.ClassSysret} {
		t[c] |= kindRet
	}
	return t
}()

const (
	kindCall = 1 << iota
	kindRet
	kindEntry
)

// callWant is the call tree's decode.BlockCounts.WantEnd: the blocks that
// end in a call or a return (besides them it needs only the block after
// one, and that while kind says so).
var callWant = func() (t [256]bool) {
	for c, k := range callKinds {
		t[c] = k != 0
	}
	return t
}()

func (s *callSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "%s[%s]\n", strings.Repeat("  ", s.depth), EventText(ev, true))
	switch ev.Type {
	case decode.EvExecMode, decode.EvIflags:
		// state, not flow: what the previous instruction was still holds
	case decode.EvEnabled:
		// tracing that starts (not resumes) enters the traced code, as a
		// call would: a filtered trace's entries into JIT code, each a
		// tree of its own (what ran outside the filter is not known) —
		// unless it starts where a call that left the traced code
		// returns (also after the code outside called back into the
		// traced code): the caller goes on at its depth
		if l := len(s.outCalls); ev.Resumed && l > 0 && s.outCalls[l-1].ret == ev.IP {
			s.outCalls = s.outCalls[:l-1] // a syscall returning
		}
		if !ev.Resumed {
			s.kind, s.depth = kindEntry, 0
			for i := len(s.outCalls) - 1; i >= 0; i-- {
				if c := s.outCalls[i]; !ev.IPSuppressed && c.ret == ev.IP {
					s.kind, s.depth, s.outCalls = 0, c.depth, s.outCalls[:i]
					break
				}
			}
		}
		// an entry is entered as a call is; tracing resumed where it
		// paused (EvAsyncDisabled below) keeps the call or return
		// before the pause: it enters its target now
		if s.kind&kindEntry != 0 {
			s.kind = kindEntry | kindCall
		} else if !ev.Resumed {
			s.kind = 0
		}
	default:
		if ev.Type == decode.EvDisabled && s.kind&kindCall != 0 {
			if len(s.outCalls) == maxOutCalls {
				s.outCalls = append(s.outCalls[:0], s.outCalls[1:]...)
			}
			s.outCalls = append(s.outCalls, outDepth{s.callEnd, s.depth})
		}
		if ev.Type != decode.EvAsyncDisabled {
			// an asynchronous disable pauses the flow at the last
			// instruction's target (ev.From), not yet run: a call or
			// return before it stays pending (Profile.Event)
			s.kind &= kindEntry
		}
	}
}

func (s *callSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
	s.kind, s.depth = 0, 0
	s.outCalls = s.outCalls[:0]
}

// jsonSink prints one JSON object per line.
type jsonSink struct {
	enc   *json.Encoder
	where func(*decode.FlowInsn) string
	time  func(uint64) string
}

type jsonInsn struct {
	Kind   string `json:"kind"`
	TSC    uint64 `json:"tsc"`
	IP     string `json:"ip"`
	Size   uint8  `json:"size"`
	Class  string `json:"class"`
	Spec   bool   `json:"speculative,omitempty"`
	Region string `json:"section,omitempty"`
	Where  string `json:"where,omitempty"` // as the text format's column: a symbol or JIT-published name
	Time   string `json:"time"`            // as the text format prints it: seconds since the start, or the TSC
	Offset uint64 `json:"pt_offset"`
}

func (s *jsonSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	r := jsonInsn{Kind: "insn", TSC: in.TSC, Time: s.time(in.TSC), IP: fmt.Sprintf("%#x", in.IP), Size: in.Size, Class: in.Class.String(), Spec: in.Speculative, Offset: off}
	if in.Section != nil {
		r.Region = in.Section.Tag
		if s.where != nil {
			r.Where = s.where(in)
		}
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

func (s *jsonSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	s.enc.Encode(map[string]any{"kind": kind, "error": e.Code.String(), "pt_offset": e.Offset, "ip": fmt.Sprintf("%#x", e.IP)})
}

// StatSink counts instructions (by branch class), events and errors. It
// takes blocks: b.N instructions, the last of class b.EndClass.
type StatSink struct {
	insns, events, errors uint64
	classes               [256]uint64 // by x86.InsnClass
}

func (s *StatSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	s.insns++
	s.classes[in.Class]++
}

// Block implements decode.BlockSink.
func (s *StatSink) Block(b *decode.FlowBlock, off, tsc uint64) {
	s.insns += uint64(b.N)
	s.classes[b.EndClass]++
}

func (s *StatSink) Event(ev *decode.Event, off uint64) {
	if !ev.StatusUpdate {
		s.events++
	}
}

func (s *StatSink) Error(e *decode.FlowError, kind decode.ErrorKind) { s.errors++ }

// Add adds o's counts to s.
func (s *StatSink) Add(o *StatSink) {
	s.insns += o.insns
	s.events += o.events
	s.errors += o.errors
	for k, v := range o.classes {
		s.classes[k] += v
	}
}

// Print writes the counts, one "name: N" line each.
func (s *StatSink) Print(w io.Writer) {
	fmt.Fprintf(w, "instructions: %d\nevents: %d\nerrors: %d\n", s.insns, s.events, s.errors)
	for _, k := range []x86.InsnClass{x86.ClassCondJump, x86.ClassJump, x86.ClassIndJump, x86.ClassCall, x86.ClassIndCall,
		x86.ClassRet, x86.ClassFarCall, x86.ClassFarRet, x86.ClassFarJump, x86.ClassSyscall, x86.ClassSysret} {
		if n := s.classes[k]; n != 0 {
			fmt.Fprintf(w, "%s: %d\n", k, n)
		}
	}
}

// FlowOptions configure WriteFlow.
type FlowOptions struct {
	Format string                        // as NewFlowSink
	Where  func(*decode.FlowInsn) string // names an instruction's address
	Time   func(tsc uint64) string       // prints a time (nil: the raw TSC)
	// From, To: only what happened in the TSC range [From, To) (To 0:
	// no window). The caller skips to the PSBs around it
	// (decode.TimeRange); what lies between them outside the range is
	// decoded and left out here.
	From, To uint64
	// Base is the offset of src in the whole trace (a TimeRange
	// section), added to every trace offset printed.
	Base   uint64
	Window int  // the most trace bytes held at once
	Jobs   int  // PSB segments decoded at once
	Resync bool // resync at the next PSB after an error
	// Progress, if not nil, is told how many bytes of the trace are
	// decoded; it is called from the goroutine that called WriteFlow.
	Progress func(done uint64)
	// Stat, with Format "stat", receives the counts (nothing is written).
	Stat *StatSink
	// Counts, if not nil, receives the instructions decoded and the
	// errors met, whatever the format.
	Counts *FlowCounts
	// Profile, if not nil, takes the flow instead of Format's sink, in
	// trace order (as "calls"): the stacks carry across chunks.
	Profile *Profile
	// Origin, if not nil, maps the stream's offsets to the CPU queue's
	// they came from (a thread demultiplexed from a per-CPU trace): the
	// output's offsets are then the queue's, and errors name the CPU.
	Origin OriginFunc
}

// FlowCounts is what a decode produced: instructions and errors.
type FlowCounts struct {
	Insns, Errors uint64
}

// countSink counts what passes through it to next, with every trace
// offset moved by base (the window's offset in the whole trace: it does
// decode.OffsetSink's work too, one call per block less on the in-order
// path).
type countSink struct {
	next  decode.FlowSink
	n     FlowCounts
	base  uint64
	relay decode.BlockRelay
	// calls is next when it is the call tree's sink: its blocks go
	// there by a direct call (the usual block, not a call or return
	// nor after one, is then a few instructions inline)
	calls *callSink
}

func (c *countSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	c.n.Insns++
	c.next.Insn(in, off+c.base, tsc)
}

func (c *countSink) Event(ev *decode.Event, off uint64) {
	if c.base != 0 {
		e := *ev
		e.Offset += c.base
		ev = &e
	}
	c.next.Event(ev, off+c.base)
}

// Block implements decode.BlockSink; TakesBlocks says whether next does.
func (c *countSink) Block(b *decode.FlowBlock, off, tsc uint64) {
	c.n.Insns += uint64(b.N)
	if c.calls != nil {
		c.calls.Block(b, off+c.base, tsc)
		return
	}
	c.relay.Send(c.next, b, off+c.base, tsc)
}
func (c *countSink) TakesBlocks() bool { return c.relay.Takes(c.next) }

// BlockCounts implements decode.BlockCounter in front of the call tree:
// the blocks it does not need are only counted.
func (c *countSink) BlockCounts() (decode.BlockCounts, bool) {
	if c.calls == nil {
		return decode.BlockCounts{}, false
	}
	return decode.BlockCounts{Insns: &c.n.Insns, Want: &c.calls.kind, WantEnd: &callWant}, true
}
func (c *countSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	c.n.Errors++
	if c.base != 0 {
		f := *e
		f.Offset += c.base
		e = &f
	}
	c.next.Error(e, kind)
}

// WriteFlow decodes the trace src through img and writes its flow to w in
// o.Format. The trace is decoded in windows that end at PSBs, so memory
// stays bounded whatever its size (decode.ForEachWindow), and each window
// on o.Jobs goroutines: each chunk renders its own text on its worker and
// the texts are written in trace order; the call tree ("calls") and a
// Profile take the flow in order, the stack carrying from chunk to chunk
// (the chunks are still decoded in parallel, recorded and replayed).
func WriteFlow(w *bufio.Writer, src decode.TraceReader, img *decode.Image, cfg *decode.FlowConfig, o *FlowOptions) error {
	progress := o.Progress
	if progress == nil {
		progress = func(uint64) {}
	}
	var calls *countSink
	if o.Profile != nil {
		calls = &countSink{next: o.Profile}
	} else if o.Format == "calls" {
		calls = &countSink{next: o.withOrigin(NewFlowSink(o.Format, w, img, o.Where, o.Time))}
		calls.calls, _ = calls.next.(*callSink)
	}
	if calls != nil {
		if o.Counts != nil {
			defer func() {
				o.Counts.Insns += calls.n.Insns
				o.Counts.Errors += calls.n.Errors
			}()
		}
	}
	return decode.ForEachWindow(src, o.Window, func(pt []byte, stop, base uint64) {
		if calls != nil {
			calls.base = base + o.Base
			decode.ParallelFlowWindow(pt, stop, img, cfg, o.window(calls), o.Resync, o.Jobs)
			progress(base + stop)
			return
		}
		decode.ParallelFlowChunksWindow(pt, stop, img, cfg, o.Resync, o.Jobs,
			func() decode.FlowSink {
				c := &chunkOut{}
				if o.Format != "stat" {
					// (--stat writes nothing: no 64 KiB buffer a chunk)
					c.w = bufio.NewWriterSize(&c.buf, 1<<16)
				}
				c.inner = NewFlowSink(o.Format, c.w, img, o.Where, o.Time)
				c.stat, _ = c.inner.(*StatSink)
				c.sink = &decode.OffsetSink{Next: o.window(&c.count), Base: base + o.Base}
				c.base = base + o.Base
				c.count.next = o.withOrigin(c.inner)
				c.chain = o.To != 0 || o.Origin != nil
				return c
			},
			func(s decode.FlowSink) {
				c := s.(*chunkOut)
				c.settle()
				if c.w != nil {
					c.w.Flush()
					w.Write(c.buf.Bytes())
				}
				progress(base + c.last)
				if ss, ok := c.inner.(*StatSink); ok && o.Stat != nil {
					o.Stat.Add(ss)
				}
				if o.Counts != nil {
					o.Counts.Insns += c.count.n.Insns
					o.Counts.Errors += c.count.n.Errors
				}
			})
	})
}

// withOrigin returns s, behind an originSink when o.Origin is set.
func (o *FlowOptions) withOrigin(s decode.FlowSink) decode.FlowSink {
	if o.Origin == nil {
		return s
	}
	return &originSink{next: s, origin: originMap{f: o.Origin}}
}

// window returns next, or, with a time window (o.To != 0), a sink that
// passes on only what happened in [o.From, o.To).
func (o *FlowOptions) window(next decode.FlowSink) decode.FlowSink {
	if o.To == 0 {
		return next
	}
	return &timeSink{next: next, from: o.From, to: o.To}
}

// timeSink drops the instructions and timed events outside [from, to).
type timeSink struct {
	next     decode.FlowSink
	from, to uint64
	relay    decode.BlockRelay
}

// Block implements decode.BlockSink: a block's instructions share one time.
func (s *timeSink) Block(b *decode.FlowBlock, off, tsc uint64) {
	if b.TSC >= s.from && b.TSC < s.to {
		s.relay.Send(s.next, b, off, tsc)
	}
}

// TakesBlocks says whether next does.
func (s *timeSink) TakesBlocks() bool { return s.relay.Takes(s.next) }

func (s *timeSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if in.TSC >= s.from && in.TSC < s.to {
		s.next.Insn(in, off, tsc)
	}
}

func (s *timeSink) Event(ev *decode.Event, off uint64) {
	if !ev.HasTSC || ev.TSC >= s.from && ev.TSC < s.to {
		s.next.Event(ev, off)
	}
}

func (s *timeSink) Error(e *decode.FlowError, kind decode.ErrorKind) { s.next.Error(e, kind) }

// chunkOut is one parallel chunk's sink and the text it produced.
type chunkOut struct {
	buf   bytes.Buffer
	w     *bufio.Writer
	inner decode.FlowSink // the format's sink
	count countSink       // counts, then inner
	sink  decode.FlowSink // count, with offsets in the whole trace
	last  uint64          // the last trace offset seen, for progress
	base  uint64          // sink's Base
	stat  *StatSink       // inner, if it is one: blocks go to it directly
	relay decode.BlockRelay
	// chain: a time window or an origin map sits between count and
	// inner, so blocks take the way of instructions (sink)
	chain bool
	// skipped: instructions of the blocks counted into stat's classes
	// without a Block call (decode.BlockCounter); settle adds them
	skipped uint64
}

// BlockCounts implements decode.BlockCounter for --stat: no block need be
// handed over, the decoder counts them.
func (c *chunkOut) BlockCounts() (decode.BlockCounts, bool) {
	if c.chain || c.stat == nil {
		return decode.BlockCounts{}, false
	}
	return decode.BlockCounts{Insns: &c.skipped, Classes: &c.stat.classes}, true
}

// settle adds the skipped blocks' instructions to the counts.
func (c *chunkOut) settle() {
	if c.stat != nil {
		c.stat.insns += c.skipped
	}
	c.count.n.Insns += c.skipped
	c.skipped = 0
}

func (c *chunkOut) Insn(in *decode.FlowInsn, off, tsc uint64) {
	c.last = off
	c.sink.Insn(in, off, tsc)
}

// Block implements decode.BlockSink: what sink (offsets, then count) does
// with a block, done here, straight to the format's sink (one call per
// block instead of three).
func (c *chunkOut) Block(b *decode.FlowBlock, off, tsc uint64) {
	c.last = off
	if c.chain {
		c.relay.Send(c.sink, b, off, tsc)
		return
	}
	c.count.n.Insns += uint64(b.N)
	if c.stat != nil {
		c.stat.Block(b, off+c.base, tsc)
		return
	}
	c.relay.Send(c.inner, b, off+c.base, tsc)
}
func (c *chunkOut) TakesBlocks() bool {
	if c.chain {
		return c.relay.Takes(c.sink)
	}
	return c.relay.Takes(c.inner)
}
func (c *chunkOut) Event(ev *decode.Event, off uint64)               { c.sink.Event(ev, off) }
func (c *chunkOut) Error(e *decode.FlowError, kind decode.ErrorKind) { c.sink.Error(e, kind) }
