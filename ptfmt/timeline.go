package ptfmt

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"
)

// TraceEventWriter writes the Chrome Trace Event Format (JSON), which
// ui.perfetto.dev and chrome://tracing open: {"traceEvents":[...],
// "displayTimeUnit":"ns","otherData":{...}}. It streams: each event is
// written when it is given, one per line; Close ends the array and writes
// otherData. Times are TSC values, written as microseconds ("ts") through
// Micros.
//
// Slices are B/E pairs (duration events), written in the order they begin
// and end on their thread: their times never decrease along a thread, and
// a child begins after its parent, also at the same time, so that a
// reader that sorts by time stably (as the format asks: events at the
// same time keep their file order) nests them as the flow did.
type TraceEventWriter struct {
	w      *bufio.Writer
	micros func(tsc uint64) float64
	n      uint64 // events written
	buf    []byte
	names  map[string][]byte // a name's JSON string
	err    error
}

// NewTraceEventWriter starts the JSON document on w.
func NewTraceEventWriter(w io.Writer, micros func(tsc uint64) float64) *TraceEventWriter {
	t := &TraceEventWriter{w: bufio.NewWriterSize(w, 1<<16), micros: micros, names: map[string][]byte{}}
	t.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	return t
}

// Events returns how many events were written.
func (t *TraceEventWriter) Events() uint64 { return t.n }

// start begins an event: the separator and {"ph":PH,"pid":P,"tid":T.
func (t *TraceEventWriter) start(ph string, pid, tid int) []byte {
	b := t.buf[:0]
	if t.n > 0 {
		b = append(b, ',')
	}
	b = append(b, "\n{\"ph\":\""...)
	b = append(b, ph...)
	b = append(b, "\",\"pid\":"...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, ",\"tid\":"...)
	b = strconv.AppendInt(b, int64(tid), 10)
	return b
}

func (t *TraceEventWriter) ts(b []byte, tsc uint64) []byte {
	b = append(b, ",\"ts\":"...)
	return strconv.AppendFloat(b, t.micros(tsc), 'f', 3, 64)
}

// name appends ,"name":NAME, the name JSON-escaped (memoized).
func (t *TraceEventWriter) name(b []byte, name string) []byte {
	q, ok := t.names[name]
	if !ok {
		q, _ = json.Marshal(name) // a string always marshals
		if len(t.names) < 1<<16 {
			t.names[name] = q
		}
	}
	b = append(b, ",\"name\":"...)
	return append(b, q...)
}

func (t *TraceEventWriter) end(b []byte) {
	b = append(b, '}')
	if _, err := t.w.Write(b); err != nil && t.err == nil {
		t.err = err
	}
	t.buf = b
	t.n++
}

// Begin writes a slice's start (ph B).
func (t *TraceEventWriter) Begin(pid, tid int, tsc uint64, name string) {
	b := t.start("B", pid, tid)
	b = t.ts(b, tsc)
	t.end(t.name(b, name))
}

// End writes the end of the thread's innermost slice (ph E); args, if not
// nil, are added to the slice's.
func (t *TraceEventWriter) End(pid, tid int, tsc uint64, args any) {
	b := t.start("E", pid, tid)
	b = t.ts(b, tsc)
	t.end(t.args(b, args))
}

func (t *TraceEventWriter) args(b []byte, args any) []byte {
	if args == nil {
		return b
	}
	j, err := json.Marshal(args)
	if err != nil {
		j = []byte(`{}`)
	}
	b = append(b, ",\"args\":"...)
	return append(b, j...)
}

// Instant writes an instant event on the thread's track (ph i, scope t)
// in category cat, with args (any value encoding/json takes).
func (t *TraceEventWriter) Instant(pid, tid int, tsc uint64, cat, name string, args any) {
	b := t.start("i", pid, tid)
	b = append(b, ",\"s\":\"t\",\"cat\":"...)
	b = strconv.AppendQuote(b, cat) // cat is ours: plain ASCII
	b = t.ts(b, tsc)
	b = t.name(b, name)
	t.end(t.args(b, args))
}

// Meta writes a metadata event (ph M): what is "process_name",
// "thread_name" (args {"name": value}) or "process_sort_index",
// "thread_sort_index" (args {"sort_index": value}).
func (t *TraceEventWriter) Meta(pid, tid int, what string, value any) {
	b := t.start("M", pid, tid)
	b = t.name(b, what)
	key := "name"
	if what == "process_sort_index" || what == "thread_sort_index" {
		key = "sort_index"
	}
	t.end(t.args(b, map[string]any{key: value}))
}

// Close ends the document with otherData (nil: none) and flushes it.
func (t *TraceEventWriter) Close(otherData any) error {
	b := append(t.buf[:0], "\n]"...)
	if otherData != nil {
		j, err := json.Marshal(otherData)
		if err != nil {
			return err
		}
		b = append(b, ",\"otherData\":"...)
		b = append(b, j...)
	}
	b = append(b, "}\n"...)
	if _, err := t.w.Write(b); err != nil && t.err == nil {
		t.err = err
	}
	if err := t.w.Flush(); err != nil && t.err == nil {
		t.err = err
	}
	return t.err
}

// Timeline is a StackSink writing one thread's calls as slices: a slice
// from the time a function was entered to the time it was left, nested as
// the calls were. Times come from the trace and may be coarse (the last
// timing update before an instruction): a slice can last 0 µs, which
// viewers show as a thin mark at its place. A time of 0 (none yet) or
// earlier than the thread's last (never: the decoder's times only grow)
// is taken as the last.
//
// To keep a long trace loadable:
//   - MinDur (TSC ticks): a slice shorter than it is left out, and its
//     parent's E event counts it ("args":{"short_calls":N}); a slice is
//     written once it has lasted MinDur, so the output still streams and
//     the times still never decrease.
//   - MaxSlices: after that many slices the thread's timeline stops: the
//     open slices end at the time the next one would have begun (Cut,
//     CutAt say when), and nothing after it is written.
type Timeline struct {
	W         *TraceEventWriter
	PID, TID  int
	MinDur    uint64 // ticks (0: every slice)
	MaxSlices uint64 // 0: no limit
	// Start is the time taken for slices before the trace gave one.
	Start uint64

	Slices uint64 // slices written
	Short  uint64 // slices left out, shorter than MinDur
	Cut    bool   // MaxSlices reached
	CutAt  uint64 // when

	stack   []tlFrame
	emitted int // stack[:emitted] are written (their B)
	last    uint64
}

type tlFrame struct {
	name  string
	start uint64
	short uint64 // callees left out (shorter than MinDur)
}

// at returns the time of a change at tsc.
func (t *Timeline) at(tsc uint64) uint64 {
	if t.last == 0 {
		t.last = t.Start
	}
	if tsc > t.last {
		t.last = tsc
	}
	return t.last
}

// advance writes the B events of the open frames that have lasted MinDur
// at time now, outermost first.
func (t *Timeline) advance(now uint64) {
	for t.emitted < len(t.stack) && now-t.stack[t.emitted].start >= t.MinDur {
		f := &t.stack[t.emitted]
		if t.MaxSlices > 0 && t.Slices >= t.MaxSlices {
			t.cut(f.start)
			return
		}
		t.W.Begin(t.PID, t.TID, f.start, f.name)
		t.emitted++
		t.Slices++
	}
}

// cut ends the timeline at tsc: the written slices end there.
func (t *Timeline) cut(tsc uint64) {
	for ; t.emitted > 0; t.emitted-- {
		t.W.End(t.PID, t.TID, tsc, map[string]any{"cut": true})
	}
	t.Cut, t.CutAt = true, tsc
	t.stack = t.stack[:0]
}

// Push implements StackSink.
func (t *Timeline) Push(name string, tsc uint64) {
	if t.Cut {
		return
	}
	now := t.at(tsc)
	t.stack = append(t.stack, tlFrame{name: name, start: now})
	t.advance(now)
}

// Pop implements StackSink.
func (t *Timeline) Pop(tsc uint64) {
	if t.Cut || len(t.stack) == 0 {
		return
	}
	now := t.at(tsc)
	t.advance(now)
	if t.Cut {
		return
	}
	top := len(t.stack) - 1
	f := t.stack[top]
	t.stack = t.stack[:top]
	if t.emitted > top {
		t.emitted = top
		var args any
		if f.short > 0 {
			args = map[string]uint64{"short_calls": f.short}
		}
		t.W.End(t.PID, t.TID, now, args)
		return
	}
	t.Short++
	if top > 0 {
		t.stack[top-1].short++
	}
}
