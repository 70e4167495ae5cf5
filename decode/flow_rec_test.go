package decode

import "fmt"

// flowRec is one call a FlowSink got, in a form that compares with ==:
// an instruction (with the offset and time it came with), an event or an
// error (the Event or FlowError in recSink's lists, at x).
type flowRec struct {
	kind     uint8 // callInsn, callEvent, callError
	ekind    ErrorKind
	x        int32
	in       FlowInsn
	off, tsc uint64
}

const (
	callInsn = iota
	callEvent
	callError
)

// recSink records what a decode hands its sink, instruction by
// instruction, or, with ref set, compares it with ref's record as it
// comes (a decode of millions of instructions is then held once) and
// keeps the first difference.
type recSink struct {
	ref    *recSink
	recs   []flowRec
	events []Event
	errs   []FlowError

	n    int    // calls compared with ref
	diff string // the first difference from ref
}

func (s *recSink) Insn(in *FlowInsn, off, tsc uint64) {
	s.add(flowRec{kind: callInsn, in: *in, off: off, tsc: tsc}, nil, nil)
}

func (s *recSink) Event(ev *Event, off uint64) {
	s.add(flowRec{kind: callEvent, off: off}, ev, nil)
}

func (s *recSink) Error(e *FlowError, kind ErrorKind) {
	s.add(flowRec{kind: callError, ekind: kind}, nil, e)
}

func (s *recSink) add(r flowRec, ev *Event, fe *FlowError) {
	if s.ref == nil {
		switch {
		case ev != nil:
			r.x = int32(len(s.events))
			s.events = append(s.events, *ev)
		case fe != nil:
			r.x = int32(len(s.errs))
			s.errs = append(s.errs, *fe)
		}
		s.recs = append(s.recs, r)
		return
	}
	i := s.n
	s.n++
	if s.diff != "" {
		return
	}
	if i >= len(s.ref.recs) {
		s.diff = fmt.Sprintf("call %d: %s, reference ended", i, recText(r, ev, fe))
		return
	}
	w := s.ref.recs[i]
	var wev *Event
	var wfe *FlowError
	switch w.kind {
	case callEvent:
		wev = &s.ref.events[w.x]
	case callError:
		wfe = &s.ref.errs[w.x]
	}
	r.x = w.x
	if r != w || (ev == nil) != (wev == nil) || ev != nil && *ev != *wev ||
		(fe == nil) != (wfe == nil) || fe != nil && *fe != *wfe {
		s.diff = fmt.Sprintf("call %d: %s, reference %s", i, recText(r, ev, fe), recText(w, wev, wfe))
	}
}

// check returns the first difference from ref, or "".
func (s *recSink) check() string {
	if s.diff != "" {
		return s.diff
	}
	if s.n != len(s.ref.recs) {
		return fmt.Sprintf("%d calls, reference %d", s.n, len(s.ref.recs))
	}
	return ""
}

func recText(r flowRec, ev *Event, fe *FlowError) string {
	switch r.kind {
	case callInsn:
		return fmt.Sprintf("insn %+v off %#x tsc %d", r.in, r.off, r.tsc)
	case callEvent:
		return fmt.Sprintf("event %+v off %#x", *ev, r.off)
	}
	return fmt.Sprintf("%v %+v", r.ekind, *fe)
}

// recBlocks is recSink taking blocks, each recorded as the instructions
// FlowBlock.Insns expands it to (with the block's offset and time); it
// counts the blocks.
type recBlocks struct {
	recSink
	blocks int
}

func (s *recBlocks) Block(b *FlowBlock, off, tsc uint64) {
	s.blocks++
	b.Insns(func(in *FlowInsn) { s.Insn(in, off, tsc) })
}
