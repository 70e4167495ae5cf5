package ptfmt

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/x86"
)

// profStep is one instruction of a synthetic flow: its address (0x1xx in
// f, 0x2xx in g, 0x3xx in h), class and time; err: a decode error
// before it.
type profStep struct {
	ip    uint64
	class x86.InsnClass
	tsc   uint64
	err   bool
	// enable: tracing starts at ip before it (a filtered trace entering
	// the traced code); disable: tracing stops after it (its target is
	// outside the traced code)
	enable, disable bool
}

func runProfile(t *testing.T, p *Profile, steps []profStep) string {
	t.Helper()
	img := decode.NewImage()
	if err := img.AddVersion(0, make([]byte, 0x400), 0, 1000, "region 1 v1"); err != nil {
		t.Fatal(err)
	}
	sec := img.Sections()[0]
	p.Thread("tid 1", "thread 1")
	p.Func = func(in *decode.FlowInsn, entry bool) string { return string(rune('f' + in.IP>>8 - 1)) }
	for _, s := range steps {
		if s.err {
			p.Error(&decode.FlowError{}, decode.KindError)
		}
		if s.enable {
			p.Event(&decode.Event{Type: decode.EvEnabled, IP: s.ip}, 0)
		}
		p.Insn(&decode.FlowInsn{IP: s.ip, Size: 1, Class: s.class, Section: sec, TSC: s.tsc}, 0, s.tsc)
		if s.disable {
			p.Event(&decode.Event{Type: decode.EvDisabled, IP: 0x900}, 0)
		}
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	p.WriteFolded(w)
	w.Flush()
	return b.String()
}

const (
	other = x86.ClassOther
	call  = x86.ClassCall
	ret   = x86.ClassRet
)

// TestProfileStacks checks the stacks Profile folds, against stacks
// worked out by hand: a trace that starts mid-stack and returns past its
// bottom (the caller is prepended to what was counted), a decode error
// (a new root), and recursion past MaxDepth.
func TestProfileStacks(t *testing.T) {
	for _, c := range []struct {
		name   string
		depth  int
		steps  []profStep
		want   string
		resets uint64
	}{
		{"return past the bottom", 0, []profStep{
			{ip: 0x100}, {ip: 0x101, class: call}, {ip: 0x200}, {ip: 0x201, class: ret}, {ip: 0x102, class: ret}, {ip: 0x300},
		}, "tid 1;h 1\ntid 1;h;f 3\ntid 1;h;f;g 2\n", 0},
		{"error resets", 0, []profStep{
			{ip: 0x100}, {ip: 0x101, class: call}, {ip: 0x200}, {ip: 0x201, err: true, class: call}, {ip: 0x100},
		}, "tid 1;f 2\ntid 1;f;g 1\ntid 1;g 1\ntid 1;g;f 1\n", 1},
		{"depth cap", 2, []profStep{
			{ip: 0x101, class: call}, {ip: 0x101, class: call}, {ip: 0x101, class: call}, {ip: 0x101, class: call},
			{ip: 0x102, class: ret}, {ip: 0x102, class: ret}, {ip: 0x102, class: ret}, {ip: 0x102, class: ret}, {ip: 0x300},
		}, "tid 1;f 2\ntid 1;f;f 2\ntid 1;f;f;[depth > 2] 5\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Profile{MaxDepth: c.depth}
			if got := runProfile(t, p, c.steps); got != c.want {
				t.Errorf("folded:\n%s\nwant:\n%s", got, c.want)
			}
			if p.Resets != c.resets {
				t.Errorf("Resets %d, want %d", p.Resets, c.resets)
			}
		})
	}
}

// TestProfileSummary checks the summary of a flow worked out by hand:
// calls per function, and the time between two timing updates shared by
// the instructions that ran in between (f ran 2 of 3: 66 of 100 ticks).
func TestProfileSummary(t *testing.T) {
	p := &Profile{}
	runProfile(t, p, []profStep{
		{ip: 0x100, tsc: 100}, {ip: 0x101, class: call, tsc: 100}, {ip: 0x200, tsc: 100}, {ip: 0x201, class: ret, tsc: 200}, {ip: 0x102},
	})
	s := p.Summaries()
	if len(s) != 1 {
		t.Fatalf("%d summaries, want 1", len(s))
	}
	got := s[0]
	want := []FuncStat{{Name: "f", Insns: 3, Calls: 0, Ticks: 66}, {Name: "g", Insns: 2, Calls: 1, Ticks: 34}}
	if got.Insns != 5 || got.Calls != 1 || got.Ticks != 100 || len(got.Funcs) != 2 || got.Funcs[0] != want[0] || got.Funcs[1] != want[1] {
		t.Errorf("summary %+v, want 5 instructions, 1 call, 100 ticks, functions %+v", got, want)
	}
	if got.Versions["region 1 v1"] != 5 {
		t.Errorf("versions %v, want region 1 v1: 5", got.Versions)
	}
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	p.WriteSummary(w, func(t uint64) float64 { return float64(t) / 1000 })
	w.Flush()
	for _, l := range []string{"== thread 1: 5 instructions, 1 calls, 0.100000000 seconds", "             3          0      0.066000000  f", "             5  region 1 v1"} {
		if !strings.Contains(b.String(), l+"\n") {
			t.Errorf("summary text lacks %q:\n%s", l, b.String())
		}
	}
}

// TestProfileCallOut: a filtered trace in which f calls a function outside
// the traced code twice (tracing stops after the call and starts again at
// its return address: the call returned, f goes on) and that function
// once calls g back in the traced code (a root of its own: what ran
// outside is not known), then f calls g directly. f is entered once.
func TestProfileCallOut(t *testing.T) {
	p := &Profile{}
	got := runProfile(t, p, []profStep{
		{ip: 0x100, enable: true}, {ip: 0x101, class: call, disable: true},
		{ip: 0x102, enable: true}, {ip: 0x103, class: call, disable: true},
		{ip: 0x200, enable: true}, {ip: 0x201, class: ret, disable: true}, // g called from outside
		{ip: 0x104, enable: true}, {ip: 0x105, class: call}, {ip: 0x200}, {ip: 0x201, class: ret}, {ip: 0x106},
	})
	if want := "tid 1;f 7\ntid 1;f;g 2\ntid 1;g 2\n"; got != want {
		t.Errorf("folded:\n%s\nwant:\n%s", got, want)
	}
	calls := map[string]uint64{}
	for _, f := range p.Summaries()[0].Funcs {
		calls[f.Name] = f.Calls
	}
	if calls["f"] != 1 || calls["g"] != 2 {
		t.Errorf("calls %v, want f 1, g 2", calls)
	}
}

// TestPausedCallReturn: soft PT's filter pauses the flow (an asynchronous
// disable at the next instruction, then tracing resumed there) where a
// thread enters code that is hidden or was just rewritten — in java, a
// call site patched while its caller runs. A call or return just before
// such a pause still enters its target: f calls g, paused at g's first
// instruction, and g returns to f, paused at the return address. The
// stacks, calls and the calls format are those of the same flow without
// the pauses (before the fix the return was lost, and every later call
// of f's nested under g).
func TestPausedCallReturn(t *testing.T) {
	img := decode.NewImage()
	if err := img.AddVersion(0, make([]byte, 0x400), 0, 1000, "region 1 v1"); err != nil {
		t.Fatal(err)
	}
	sec := img.Sections()[0]
	flow := []struct {
		ip    uint64
		class x86.InsnClass
	}{{0x100, other}, {0x101, call}, {0x200, other}, {0x201, ret}, {0x102, call}, {0x200, other}, {0x201, ret}, {0x103, other}}
	paused := map[int]bool{2: true, 4: true} // before the instruction at these indexes
	feed := func(s decode.FlowSink, pauses bool) {
		s.Event(&decode.Event{Type: decode.EvEnabled, IP: 0x100}, 0)
		for i, in := range flow {
			if pauses && paused[i] {
				s.Event(&decode.Event{Type: decode.EvAsyncDisabled, From: in.ip, IP: in.ip}, 0)
				s.Event(&decode.Event{Type: decode.EvEnabled, IP: in.ip, Resumed: true}, 0)
			}
			s.Insn(&decode.FlowInsn{IP: in.ip, Size: 1, Class: in.class, Section: sec}, 0, 0)
		}
	}
	callsWant := ""
	for _, l := range []string{"  -> f", "    -> g", "    <- f", "    -> g", "    <- f", ""} {
		if l != "" {
			l = fmt.Sprintf("%16s", "0") + l
		}
		callsWant += l + "\n"
	}
	callsWant = strings.TrimSuffix(callsWant, "\n")
	for _, pauses := range []bool{false, true} {
		p := &Profile{}
		p.Thread("tid 1", "thread 1")
		p.Func = func(in *decode.FlowInsn, entry bool) string { return string(rune('f' + in.IP>>8 - 1)) }
		feed(p, pauses)
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		p.WriteFolded(w)
		w.Flush()
		if want := "tid 1;f 4\ntid 1;f;g 4\n"; b.String() != want {
			t.Errorf("pauses %v: folded:\n%s\nwant:\n%s", pauses, b.String(), want)
		}
		for _, f := range p.Summaries()[0].Funcs {
			if f.Name == "g" && f.Calls != 2 {
				t.Errorf("pauses %v: g called %d times, want 2", pauses, f.Calls)
			}
		}
		var c bytes.Buffer
		w = bufio.NewWriter(&c)
		feed(NewFlowSink("calls", w, nil, func(in *decode.FlowInsn) string { return string(rune('f' + in.IP>>8 - 1)) }, nil), pauses)
		w.Flush()
		var lines []string // without the events' lines
		for _, l := range strings.Split(c.String(), "\n") {
			if !strings.HasPrefix(strings.TrimSpace(l), "[") {
				lines = append(lines, l)
			}
		}
		if got := strings.Join(lines, "\n"); got != callsWant {
			t.Errorf("pauses %v: calls format:\n%s\nwant:\n%s", pauses, got, callsWant)
		}
	}
}
