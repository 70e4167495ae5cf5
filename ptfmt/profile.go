package ptfmt

import (
	"bufio"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/x86"
)

// Profile aggregates decoded flows into call stacks, for `ptjit decode
// --folded` (flame graphs) and `--summary` (per thread and function). It
// is a decode.BlockSink and must see a thread's flow in order, as
// WriteFlow hands it with FlowOptions.Profile: the decoding runs in
// parallel chunks, the stack carries from chunk to chunk.
//
// The stack is built from calls and returns as `--calls` prints them (a
// syscall is a call, a sysret a return). A frame is named by the
// function entered (Func with entry set: the call's target). Every
// instruction counts for the stack on top when it ran; the call
// instruction for the caller, the return for the callee; a jump into
// another function stays in the frame that made it.
//
// What the trace does not show is said, never guessed:
//   - A trace that starts mid-stack starts with the function it is in
//     as the root; a return past the bottom of the known stack makes the
//     function returned to the caller of everything seen since (the
//     stacks already counted get it prepended).
//   - After a decode error the stack is unknown: it restarts, as a new
//     root, with the function decoding resumes in (Resets counts these).
//     Tracing that starts anew (enabled, not resumed: a filtered trace's
//     entries into the traced code) also starts a new root.
//   - Stacks deeper than MaxDepth frames end in a frame "[depth > N]"
//     that takes everything deeper.
//   - A filtered trace stops at a call out of the traced code; when it
//     starts again at that call's return address, the call returned:
//     the stack goes on (what ran outside is not in it).
//
// Time: the instructions between two timing updates share the time
// between them in proportion to their number (the trace says no more);
// time while tracing is off, or across a decode error, counts for no one.
type Profile struct {
	// Func names the function of an instruction
	// (recording.Symbolizer.Func); set it before each thread.
	Func func(in *decode.FlowInsn, entry bool) string
	// MaxDepth caps the stack (0: DefaultMaxDepth).
	MaxDepth int
	// Resets counts the stacks restarted after decode errors.
	Resets uint64
	// Stack, if not nil, follows the stack as it changes, with the time
	// of each change (a Timeline: the calls as slices); EndThread ends
	// its thread.
	Stack StackSink

	names   map[string]int32
	frames  []string
	memo    *[whereSlots]funcSlot
	nodes   []profNode
	child   map[[2]int32]int32
	threads []*profThread
	cur     *profThread

	stack      []int32 // nodes, the innermost last
	over       int     // calls made beyond MaxDepth not yet returned from
	call, ret  bool    // the previous instruction was a call, a return
	fresh      bool    // the next instruction starts a new root
	enterFresh bool    // ... entered (tracing started), not resumed after an error
	first      decode.FlowInsn

	lastTSC uint64    // the last timing update (0: none since a gap)
	pending []pending // instructions since lastTSC, by node

	seen uint64 // the latest time seen (for Stack)
	stop uint64 // when the flow stopped (disabled, overflow, error); 0: running

	retAddr uint64 // the address after the last call
	// outCalls: the calls after which tracing stopped (calls out of the
	// traced code), the last one last
	outCalls []outCall
	rawNames map[int32]string // frames whose folded name was escaped
}

// outCall is a call after which tracing stopped: where it returns to, and
// the stack it was made from.
type outCall struct {
	ret   uint64
	stack []int32
	over  int
}

// StackSink follows a Profile's stack: each frame entered and left, in
// order, with the time (TSC) of the change; 0 when the trace has given
// no time yet. The times are the trace's: the last timing update before
// the instruction that entered or left.
type StackSink interface {
	// Push: the function name was entered (called, or where a trace or
	// a stack after an error starts).
	Push(name string, tsc uint64)
	// Pop: the innermost frame was left.
	Pop(tsc uint64)
}

// frameEscape keeps a name one frame of a folded stack: frames are
// separated by ';' (JVM signatures have them) and stacks by lines.
var frameEscape = strings.NewReplacer(";", ":", "\n", " ")

// DefaultMaxDepth is Profile's stack cap.
const DefaultMaxDepth = 512

type funcSlot struct {
	sec   *decode.Section
	ip    uint64
	entry bool
	id    int32
	ok    bool
	name  string // Func's name, unescaped (for Stack)
}

// profNode is a stack: a frame over its parent's stack.
type profNode struct {
	parent int32 // -1 for a thread's node
	frame  int32
	insns  uint64 // instructions run with this stack
	ticks  uint64 // TSC ticks attributed to it
}

type pending struct {
	node int32
	n    uint64
}

// profThread is one thread's flow.
type profThread struct {
	title    string // as the summary's heading
	node     int32  // the thread's node: the folded stacks' first frame
	calls    map[int32]uint64
	versions map[string]uint64 // instructions per code version (section tag)
	insns    uint64
	ticks    uint64
	resets   uint64
}

// Thread starts a thread's flow: prefix is the first frame of its folded
// stacks ("tid 123"), title the summary's heading for it.
func (p *Profile) Thread(prefix, title string) {
	if p.names == nil {
		p.names = map[string]int32{}
		p.child = map[[2]int32]int32{}
	}
	p.memo = nil // Func may name another image's sections
	t := &profThread{title: title, node: p.newNode(-1, p.intern(prefix)), calls: map[int32]uint64{}, versions: map[string]uint64{}}
	p.threads = append(p.threads, t)
	p.cur = t
	p.stack, p.over = p.stack[:0], 0
	p.call, p.ret, p.fresh, p.enterFresh = false, false, true, false
	p.seen, p.stop, p.outCalls = 0, 0, p.outCalls[:0]
	p.gap()
}

func (p *Profile) intern(name string) int32 {
	if id, ok := p.names[name]; ok {
		return id
	}
	id := int32(len(p.frames))
	p.names[name] = id
	p.frames = append(p.frames, name)
	return id
}

func (p *Profile) newNode(parent, frame int32) int32 {
	p.nodes = append(p.nodes, profNode{parent: parent, frame: frame})
	return int32(len(p.nodes) - 1)
}

// childOf returns the node of frame over parent's stack.
func (p *Profile) childOf(parent, frame int32) int32 {
	k := [2]int32{parent, frame}
	if n, ok := p.child[k]; ok {
		return n
	}
	n := p.newNode(parent, frame)
	p.child[k] = n
	return n
}

// frame returns the frame naming in's function (memoized by address),
// and Func's name for it, unescaped.
func (p *Profile) frame(in *decode.FlowInsn, entry bool) (int32, string) {
	if p.memo == nil {
		p.memo = new([whereSlots]funcSlot)
	}
	e := &p.memo[(in.IP^in.IP>>12)&(whereSlots-1)]
	if !e.ok || e.sec != in.Section || e.ip != in.IP || e.entry != entry {
		name := "?"
		if p.Func != nil {
			name = p.Func(in, entry)
		}
		// folded stacks separate frames with ';' and lines with '\n'
		esc := frameEscape.Replace(name)
		*e = funcSlot{in.Section, in.IP, entry, p.intern(esc), true, name}
		if esc != name {
			if p.rawNames == nil {
				p.rawNames = map[int32]string{}
			}
			p.rawNames[e.id] = name
		}
	}
	return e.id, e.name
}

func (p *Profile) maxDepth() int {
	if p.MaxDepth > 0 {
		return p.MaxDepth
	}
	return DefaultMaxDepth
}

// enter moves the stack for in, the instruction after a call, a return
// or a reset.
func (p *Profile) enter(in *decode.FlowInsn) {
	switch {
	case p.fresh:
		f, name := p.frame(in, p.enterFresh)
		if p.enterFresh {
			p.cur.calls[f]++
		}
		if p.Stack != nil {
			t := p.stop
			if t == 0 {
				t = p.seen
			}
			p.popAll(t)
			p.Stack.Push(name, in.TSC)
		}
		p.stack = append(p.stack[:0], p.newNode(p.cur.node, f)) // a root of its own (see pop)
		p.over, p.fresh, p.stop = 0, false, 0
	case p.call:
		f, name := p.frame(in, true)
		p.cur.calls[f]++
		if len(p.stack) >= p.maxDepth() {
			p.over++
			if p.over == 1 {
				deep := "[depth > " + strconv.Itoa(p.maxDepth()) + "]"
				p.stack = append(p.stack, p.childOf(p.top(), p.intern(deep)))
				if p.Stack != nil {
					p.Stack.Push(deep, in.TSC)
				}
			}
			return
		}
		p.stack = append(p.stack, p.childOf(p.top(), f))
		if p.Stack != nil {
			p.Stack.Push(name, in.TSC)
		}
	case p.ret:
		p.pop(in)
	}
}

func (p *Profile) top() int32 { return p.stack[len(p.stack)-1] }

// popAll tells Stack that every frame was left at tsc.
func (p *Profile) popAll(tsc uint64) {
	for range p.stack {
		p.Stack.Pop(tsc)
	}
}

// EndThread tells Stack that the frames still on the stack were left when
// the thread's flow ended (the last time seen). Call it after a thread's
// flow, before the next Thread.
func (p *Profile) EndThread() {
	if p.Stack != nil {
		p.popAll(p.seen)
	}
	p.stack, p.over, p.fresh = p.stack[:0], 0, true
}

// pop returns to in.
func (p *Profile) pop(in *decode.FlowInsn) {
	if p.over > 0 {
		p.over--
		if p.over == 0 {
			p.stack = p.stack[:len(p.stack)-1]
			if p.Stack != nil {
				p.Stack.Pop(in.TSC)
			}
		}
		return
	}
	if len(p.stack) > 1 {
		p.stack = p.stack[:len(p.stack)-1]
		if p.Stack != nil {
			p.Stack.Pop(in.TSC)
		}
		return
	}
	// Past the bottom: in's function called everything seen since the
	// root was made. The root is not in p.child (each is made anew), so
	// it can take a parent. A timeline (Stack) cannot put a frame under
	// slices it already has: there the root ends and the caller starts
	// now.
	root := p.stack[0]
	f, name := p.frame(in, false)
	if p.Stack != nil {
		p.Stack.Pop(in.TSC)
		p.Stack.Push(name, in.TSC)
	}
	c := p.newNode(p.cur.node, f)
	p.nodes[root].parent = c
	p.child[[2]int32{c, p.nodes[root].frame}] = root
	p.stack[0] = c
}

// count adds n instructions of sec, run at tsc, to the stack on top.
func (p *Profile) count(sec *decode.Section, n uint64, tsc uint64) {
	top := p.top()
	p.nodes[top].insns += n
	p.cur.insns += n
	if sec != nil && !sec.IsFile() {
		p.cur.versions[sec.Tag] += n
	}
	if tsc != 0 {
		p.seen = max(p.seen, tsc)
		p.tick(tsc)
		if l := len(p.pending); l > 0 && p.pending[l-1].node == top {
			p.pending[l-1].n += n
		} else {
			p.pending = append(p.pending, pending{top, n})
		}
	}
}

// tick shares the time since the last timing update among the
// instructions run since.
func (p *Profile) tick(tsc uint64) {
	if tsc <= p.lastTSC {
		return
	}
	if p.lastTSC != 0 && len(p.pending) > 0 {
		d := tsc - p.lastTSC
		var total uint64
		for _, q := range p.pending {
			total += q.n
		}
		left := d
		for i, q := range p.pending {
			share := uint64(float64(d) * float64(q.n) / float64(total))
			if i == len(p.pending)-1 || share > left {
				share = left
			}
			p.nodes[q.node].ticks += share
			left -= share
		}
		p.cur.ticks += d
	}
	p.lastTSC, p.pending = tsc, p.pending[:0]
}

// gap forgets the time: what ran since the last update is not timed.
func (p *Profile) gap() { p.lastTSC, p.pending = 0, p.pending[:0] }

func (p *Profile) setEnd(c x86.InsnClass) {
	p.call = c.IsCall() || c == x86.ClassFarCall || c == x86.ClassSyscall
	p.ret = c == x86.ClassRet || c == x86.ClassFarRet || c == x86.ClassSysret
}

func (p *Profile) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if p.call || p.ret || p.fresh {
		p.enter(in)
	}
	p.count(in.Section, 1, in.TSC)
	p.setEnd(in.Class)
	if p.call {
		p.retAddr = in.IP + uint64(in.Size)
	}
}

// Block implements decode.BlockSink: only a block's first instruction can
// follow a call or return, and only its last one can be one.
func (p *Profile) Block(b *decode.FlowBlock, off, tsc uint64) {
	if p.call || p.ret || p.fresh {
		p.first = b.First()
		p.enter(&p.first)
	}
	p.count(b.Section, uint64(b.N), b.TSC)
	p.setEnd(b.EndClass)
	if p.call {
		p.retAddr = b.End
	}
}

// Event follows the call/return state as the calls format does.
func (p *Profile) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	if ev.HasTSC {
		if ev.Type == decode.EvDisabled || ev.Type == decode.EvOverflow {
			p.seen = max(p.seen, ev.TSC) // the flow stops then
		}
		p.tick(ev.TSC)
	}
	switch ev.Type {
	case decode.EvExecMode, decode.EvIflags:
		// state, not flow
	case decode.EvEnabled:
		if l := len(p.outCalls); ev.Resumed && l > 0 && p.outCalls[l-1].ret == ev.IP {
			p.outCalls = p.outCalls[:l-1] // a syscall returning
		}
		returned := !ev.Resumed && p.returnFromOut(ev)
		if !ev.Resumed && !returned {
			p.fresh, p.enterFresh = true, true
		} else {
			p.stop = 0
		}
		if !ev.Resumed {
			// tracing resumed where it paused (see EvAsyncDisabled
			// below) keeps the call or return before the pause
			p.call, p.ret = false, false
		}
		p.gap()
	default:
		if ev.Type == decode.EvDisabled && p.call && !p.fresh && len(p.stack) > 0 {
			// a call out of the traced code
			if len(p.outCalls) == maxOutCalls {
				p.outCalls = append(p.outCalls[:0], p.outCalls[1:]...)
			}
			p.outCalls = append(p.outCalls, outCall{p.retAddr, append([]int32(nil), p.stack...), p.over})
		}
		if ev.Type == decode.EvOverflow {
			p.outCalls = p.outCalls[:0]
		}
		if ev.Type != decode.EvAsyncDisabled {
			// An asynchronous disable stops the flow at ev.From, the
			// target of the last instruction, not yet run (soft PT's
			// filter: a fault entering JIT code hidden or just
			// rewritten, java's freshly patched call sites). A call or
			// return before it stays pending: tracing that resumes
			// there enters the callee or returns to the caller.
			p.call, p.ret = false, false
		}
		if ev.Type == decode.EvDisabled || ev.Type == decode.EvOverflow {
			p.gap()
			p.stop = p.seen
		}
	}
	if ev.HasTSC {
		p.seen = max(p.seen, ev.TSC)
	}
}

// returnFromOut reports whether tracing that starts at ev.IP is a call
// out of the traced code returning — also after the code outside called
// back into the traced code, a stack of its own — and if so takes the
// caller's stack back (a timeline sees the callback's frames left and the
// caller's entered again).
func (p *Profile) returnFromOut(ev *decode.Event) bool {
	if ev.IPSuppressed {
		return false
	}
	for i := len(p.outCalls) - 1; i >= 0; i-- {
		c := &p.outCalls[i]
		if c.ret != ev.IP {
			continue
		}
		if p.Stack != nil && !slices.Equal(c.stack, p.stack) {
			t := p.stop
			if t == 0 {
				t = p.seen
			}
			p.popAll(t)
			at := p.seen
			if ev.HasTSC {
				at = max(at, ev.TSC)
			}
			for _, n := range c.stack {
				f := p.nodes[n].frame
				name, ok := p.rawNames[f]
				if !ok {
					name = p.frames[f]
				}
				p.Stack.Push(name, at)
			}
		}
		p.stack, p.over, p.fresh = append(p.stack[:0], c.stack...), c.over, false
		p.outCalls = p.outCalls[:i]
		return true
	}
	return false
}

func (p *Profile) Error(e *decode.FlowError, kind decode.ErrorKind) {
	p.call, p.ret = false, false
	if !p.fresh && len(p.stack) > 0 {
		p.Resets++
		p.cur.resets++
	}
	p.fresh, p.enterFresh, p.outCalls = true, false, p.outCalls[:0]
	if p.stop == 0 {
		p.stop = p.seen
	}
	p.gap()
}

// path returns node's folded stack.
func (p *Profile) path(n int32, memo map[int32]string) string {
	if s, ok := memo[n]; ok {
		return s
	}
	nd := &p.nodes[n]
	s := p.frames[nd.frame]
	if nd.parent >= 0 {
		s = p.path(nd.parent, memo) + ";" + s
	}
	memo[n] = s
	return s
}

// WriteFolded writes the folded stacks, "frame;frame;... COUNT" (COUNT
// instructions), one line per stack, sorted.
func (p *Profile) WriteFolded(w *bufio.Writer) {
	memo := map[int32]string{}
	sum := map[string]uint64{}
	for i := range p.nodes {
		if n := p.nodes[i].insns; n > 0 {
			sum[p.path(int32(i), memo)] += n
		}
	}
	keys := make([]string, 0, len(sum))
	for k := range sum {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "%s %d\n", k, sum[k])
	}
}

// FuncStat is a function's share of a thread's flow.
type FuncStat struct {
	Name         string
	Insns, Calls uint64 // instructions run in it (not in its callees); calls into it
	Ticks        uint64 // TSC ticks attributed to it (not to its callees)
}

// ThreadSummary is a thread's summary.
type ThreadSummary struct {
	Title         string
	Insns, Calls  uint64
	Ticks, Resets uint64
	Funcs         []FuncStat        // by instructions, most first
	Versions      map[string]uint64 // instructions per code version ("region R vN")
}

// Summaries returns each thread's summary, in the order of Thread calls.
func (p *Profile) Summaries() []ThreadSummary {
	var out []ThreadSummary
	for ti, t := range p.threads {
		end := int32(len(p.nodes))
		if ti+1 < len(p.threads) {
			end = p.threads[ti+1].node
		}
		by := map[int32]*FuncStat{}
		get := func(f int32) *FuncStat {
			s := by[f]
			if s == nil {
				s = &FuncStat{Name: p.frames[f]}
				by[f] = s
			}
			return s
		}
		for i := t.node + 1; i < end; i++ {
			nd := &p.nodes[i]
			if nd.insns > 0 || nd.ticks > 0 {
				s := get(nd.frame)
				s.Insns += nd.insns
				s.Ticks += nd.ticks
			}
		}
		s := ThreadSummary{Title: t.title, Insns: t.insns, Ticks: t.ticks, Resets: t.resets, Versions: t.versions}
		for f, n := range t.calls {
			get(f).Calls += n
			s.Calls += n
		}
		for _, f := range by {
			s.Funcs = append(s.Funcs, *f)
		}
		sort.Slice(s.Funcs, func(i, j int) bool {
			a, b := s.Funcs[i], s.Funcs[j]
			if a.Insns != b.Insns {
				return a.Insns > b.Insns
			}
			return a.Name < b.Name
		})
		out = append(out, s)
	}
	return out
}

// WriteSummary writes each thread's summary: its totals, its functions
// (instructions, calls, time; most instructions first) and the code
// versions that ran (instructions each). seconds converts TSC ticks to
// seconds (nil: times are printed as ticks).
func (p *Profile) WriteSummary(w *bufio.Writer, seconds func(ticks uint64) float64) {
	unit := "seconds"
	tm := func(t uint64) string { return strconv.FormatFloat(seconds(t), 'f', 9, 64) }
	if seconds == nil {
		unit, tm = "tsc ticks", func(t uint64) string { return strconv.FormatUint(t, 10) }
	}
	for _, s := range p.Summaries() {
		fmt.Fprintf(w, "== %s: %d instructions, %d calls, %s %s", s.Title, s.Insns, s.Calls, tm(s.Ticks), unit)
		if s.Resets > 0 {
			fmt.Fprintf(w, ", %d stack resets after decode errors", s.Resets)
		}
		fmt.Fprintf(w, "\n%14s %10s %16s  %s\n", "instructions", "calls", unit, "function")
		for _, f := range s.Funcs {
			fmt.Fprintf(w, "%14d %10d %16s  %s\n", f.Insns, f.Calls, tm(f.Ticks), f.Name)
		}
		if len(s.Versions) > 0 {
			fmt.Fprintf(w, "%14s  %s\n", "instructions", "code version")
			for _, v := range sortVersions(s.Versions) {
				fmt.Fprintf(w, "%14d  %s\n", s.Versions[v], v)
			}
		}
	}
}

// sortVersions returns the tags in order of region, then version.
func sortVersions(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	num := func(s string) (int64, int64, bool) {
		var r, v int64
		_, err := fmt.Sscanf(s, "region %d v%d", &r, &v)
		return r, v, err == nil
	}
	sort.Slice(keys, func(i, j int) bool {
		ri, vi, oki := num(keys[i])
		rj, vj, okj := num(keys[j])
		if oki && okj && (ri != rj || vi != vj) {
			if ri != rj {
				return ri < rj
			}
			return vi < vj
		}
		return keys[i] < keys[j]
	})
	return keys
}
