package ptfmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/x86"
)

// tlStep is one step of a synthetic flow for a Timeline: an instruction
// (as profStep: 0x1xx in f, 0x2xx in g, 0x3xx in h), or, with ev, an event
// (tracing disabled or enabled at ip).
type tlStep struct {
	ip    uint64
	class x86.InsnClass
	tsc   uint64
	err   bool
	ev    decode.EventType // 0: an instruction
}

const evNone decode.EventType = 0

// runTimeline runs steps through a Profile with tl as its Stack and
// returns the events tl wrote, read back with encoding/json: "B name@ts"
// and "E@ts", each followed by its args if it has any.
func runTimeline(t *testing.T, tl *Timeline, steps []tlStep) []string {
	t.Helper()
	img := decode.NewImage()
	if err := img.AddVersion(0, make([]byte, 0x400), 0, 1000, "region 1 v1"); err != nil {
		t.Fatal(err)
	}
	sec := img.Sections()[0]
	var b bytes.Buffer
	tl.W = NewTraceEventWriter(&b, func(tsc uint64) float64 { return float64(tsc) })
	tl.PID, tl.TID = 1, 1
	p := &Profile{Stack: tl}
	p.Thread("tid 1", "thread 1")
	p.Func = func(in *decode.FlowInsn, entry bool) string { return string(rune('f' + in.IP>>8 - 1)) }
	for _, s := range steps {
		switch {
		case s.err:
			p.Error(&decode.FlowError{}, decode.KindError)
		case s.ev != evNone:
			p.Event(&decode.Event{Type: s.ev, IP: s.ip, HasTSC: s.tsc != 0, TSC: s.tsc}, 0)
		default:
			p.Insn(&decode.FlowInsn{IP: s.ip, Size: 1, Class: s.class, Section: sec, TSC: s.tsc}, 0, s.tsc)
		}
	}
	p.EndThread()
	if err := tl.W.Close(nil); err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []struct {
			Ph   string
			TS   float64
			Name string
			Args map[string]any
		}
	}
	if err := json.Unmarshal(b.Bytes(), &f); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b.String())
	}
	var out []string
	for _, e := range f.TraceEvents {
		s := fmt.Sprintf("%s %s@%g", e.Ph, e.Name, e.TS)
		if e.Ph == "E" {
			s = fmt.Sprintf("E@%g", e.TS)
		}
		if len(e.Args) > 0 {
			s += fmt.Sprint(e.Args)
		}
		out = append(out, s)
	}
	return out
}

// TestTimeline checks the slices a Timeline writes from a Profile's stack,
// against slices worked out by hand: nesting and times; a return past the
// first frame (the caller begins there); a decode error (the open slices
// end at the last time seen); a filtered trace that stops at a call and
// starts again at its return address (the slice goes on) or elsewhere (a
// new slice; the old one ends when tracing stopped); time 0 before any
// timing; MinDur (short calls left out, counted in the parent's E, a long
// slice written late but before its children); MaxSlices (the cut).
func TestTimeline(t *testing.T) {
	for _, c := range []struct {
		name  string
		tl    Timeline
		steps []tlStep
		want  string
	}{
		{"nesting", Timeline{}, []tlStep{
			{ip: 0x100, tsc: 10}, {ip: 0x101, class: call, tsc: 10}, {ip: 0x200, tsc: 12}, {ip: 0x201, class: ret, tsc: 15},
			{ip: 0x102, tsc: 15}, {ip: 0x103, class: call, tsc: 16}, {ip: 0x300, tsc: 16}, {ip: 0x301, tsc: 20},
		}, "B f@10|B g@12|E@15|B h@16|E@20|E@20"},
		{"return past the first frame", Timeline{}, []tlStep{
			{ip: 0x200, tsc: 10}, {ip: 0x201, class: ret, tsc: 11}, {ip: 0x102, tsc: 13},
		}, "B g@10|E@13|B f@13|E@13"},
		{"error", Timeline{}, []tlStep{
			{ip: 0x100, tsc: 10}, {ip: 0x101, class: call, tsc: 10}, {ip: 0x200, tsc: 12}, {err: true}, {ip: 0x300, tsc: 30},
		}, "B f@10|B g@12|E@12|E@12|B h@30|E@30"},
		{"call out and back", Timeline{}, []tlStep{
			{ip: 0x100, tsc: 10}, {ip: 0x101, class: call, tsc: 11}, {ev: decode.EvDisabled, tsc: 12},
			{ev: decode.EvEnabled, ip: 0x102, tsc: 20}, {ip: 0x102, tsc: 20}, {ip: 0x103, tsc: 21},
		}, "B f@10|E@21"},
		{"call out, enter elsewhere", Timeline{}, []tlStep{
			{ip: 0x100, tsc: 10}, {ip: 0x101, class: call, tsc: 11}, {ev: decode.EvDisabled, tsc: 12},
			{ev: decode.EvEnabled, ip: 0x200, tsc: 20}, {ip: 0x200, tsc: 20}, {ip: 0x201, tsc: 21},
		}, "B f@10|E@12|B g@20|E@21"},
		{"no time yet", Timeline{Start: 5}, []tlStep{
			{ip: 0x100}, {ip: 0x101, class: call}, {ip: 0x200, tsc: 12}, {ip: 0x201, class: ret, tsc: 12}, {ip: 0x102, tsc: 13},
		}, "B f@5|B g@12|E@13|E@13"},
		{"min-dur", Timeline{MinDur: 5}, []tlStep{
			{ip: 0x100, tsc: 10}, {ip: 0x101, class: call, tsc: 10}, {ip: 0x200, tsc: 11}, {ip: 0x201, class: ret, tsc: 12},
			{ip: 0x102, tsc: 12}, {ip: 0x103, class: call, tsc: 13}, {ip: 0x300, tsc: 13}, {ip: 0x301, class: call, tsc: 14},
			{ip: 0x200, tsc: 14}, {ip: 0x201, class: ret, tsc: 15}, {ip: 0x302, tsc: 16}, {ip: 0x303, class: ret, tsc: 21},
			{ip: 0x104, tsc: 22},
		}, "B f@10|B h@13|E@22map[short_calls:1]|E@22map[short_calls:1]"},
		{"max-slices", Timeline{MaxSlices: 2}, []tlStep{
			{ip: 0x100, tsc: 10}, {ip: 0x101, class: call, tsc: 10}, {ip: 0x200, tsc: 11}, {ip: 0x201, class: ret, tsc: 12},
			{ip: 0x102, tsc: 12}, {ip: 0x103, class: call, tsc: 13}, {ip: 0x300, tsc: 14}, {ip: 0x301, tsc: 20},
		}, "B f@10|B g@11|E@12|E@14map[cut:true]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tl := c.tl
			got := strings.Join(runTimeline(t, &tl, c.steps), "|")
			if got != c.want {
				t.Errorf("slices:\n%s\nwant:\n%s", got, c.want)
			}
		})
	}
}

// TestTraceEventWriterEscapes: names are JSON-escaped (quotes,
// backslashes, control characters, JVM signatures with ';'), an empty
// document is valid JSON.
func TestTraceEventWriterEscapes(t *testing.T) {
	var b bytes.Buffer
	w := NewTraceEventWriter(&b, func(tsc uint64) float64 { return float64(tsc) / 1000 })
	if err := w.Close(nil); err != nil || !json.Valid(b.Bytes()) {
		t.Fatalf("empty document: %v\n%s", err, b.String())
	}
	b.Reset()
	w = NewTraceEventWriter(&b, func(tsc uint64) float64 { return float64(tsc) / 1000 })
	name := "LHot;.run(I)V \"q\" \\ \x01 <é>"
	w.Meta(1, 1, "thread_name", name)
	w.Begin(1, 1, 1234567, name)
	w.End(1, 1, 1234568, nil)
	w.Instant(1, 2, 5, "code", name, map[string]any{"k": name})
	if err := w.Close(map[string]any{"n": 1}); err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []struct {
			Name string
			TS   float64
			Args map[string]any
		}
		OtherData map[string]any
	}
	if err := json.Unmarshal(b.Bytes(), &f); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if len(f.TraceEvents) != 4 || f.TraceEvents[1].Name != name || f.TraceEvents[3].Name != name ||
		f.TraceEvents[0].Args["name"] != name || f.TraceEvents[1].TS != 1234.567 || f.OtherData["n"] != 1.0 {
		t.Errorf("read back %+v", f)
	}
}

// TestCallsEntryAcrossSwitch: decode --calls prints the entry of a trace
// that starts anew even when a disable and resume (a per-CPU trace's
// context switch) come before its first instruction, as Profile (and so
// --summary and the timeline) counts it; a resume alone enters nothing.
func TestCallsEntryAcrossSwitch(t *testing.T) {
	img := decode.NewImage()
	if err := img.AddVersion(0, make([]byte, 0x400), 0, 1000, "region 1 v1"); err != nil {
		t.Fatal(err)
	}
	sec := img.Sections()[0]
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	s := NewFlowSink("calls", w, nil, func(in *decode.FlowInsn) string { return fmt.Sprintf("%#x", in.IP) }, nil)
	for _, st := range []tlStep{
		{ev: decode.EvEnabled, ip: 0x100}, {ev: decode.EvDisabled}, {ev: decode.EvEnabled, ip: 0x100, tsc: 1},
		{ip: 0x100, tsc: 1}, {ip: 0x101, tsc: 1}, {ev: decode.EvDisabled}, {ev: decode.EvEnabled, ip: 0x102, tsc: 2}, {ip: 0x102, tsc: 2},
	} {
		if st.ev != evNone {
			// the second enable of each pair resumes
			s.Event(&decode.Event{Type: st.ev, IP: st.ip, Resumed: st.tsc != 0}, 0)
			continue
		}
		s.Insn(&decode.FlowInsn{IP: st.ip, Size: 1, Section: sec, TSC: st.tsc}, 0, st.tsc)
	}
	w.Flush()
	if got := strings.Count(b.String(), "-> "); got != 1 || !strings.Contains(b.String(), "-> 0x100\n") {
		t.Errorf("want one entry, into 0x100:\n%s", b.String())
	}
}
