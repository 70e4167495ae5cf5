package tracker

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"golang.org/x/sys/unix"
)

// Where the address-space calls' effects come from (Options.Events,
// ptjit run --events). With EventsSeccomp every call the launch filter
// (Rules) names stops the thread at its seccomp stop, and one that can
// change tracked memory again at its exit. With EventsBPF a bpfev.Source
// reports the calls at their exit, with the bytes a call made executable
// copied in the kernel, and the launch filter (LaunchRules) no longer
// stops the calls whose effect the tracker needs only at the exit and
// without acting in the thread: mprotect and pkey_mprotect adding
// PROT_EXEC to memory the program does not ask to be writable too, mmap
// of private memory that is not writable and executable, munmap. The
// rest stops as before:
//
//   - a call that asks for PROT_WRITE|PROT_EXEC together (mmap, mprotect,
//     pkey_mprotect): W^X rewrites the protection the kernel gets at the
//     seccomp stop (entryRewrites), which only a stop can do;
//   - MAP_SHARED mmaps (writable aliases: W^X's table is built at their
//     exit stop), PROT_GROWSDOWN/GROWSUP mprotects (their effect is read
//     from /proc/PID/maps, which must be read while nothing else changed
//     it), mremap (it may move memory ptjit manages: seenEffect and
//     wxMovedEffect act in the stopped thread), madvise, brk, shmat,
//     shmdt, remap_file_pages, process_vm_writev, the opens and ptrace:
//     none of them is a per-version call;
//   - every call the filters ptjit adds later stop (memory ptjit manages:
//     fullprotect_linux_amd64.go; kernel writes: kwrite_linux_amd64.go),
//     and, in a process where W^X tracks a shared file mapping (an
//     alias of code may exist), every mprotect, pkey_mprotect, munmap and
//     mmap over that mapping (AliasRangeRules, wx_alias_linux_amd64.go):
//     an alias must be write-protected before the program runs on. A
//     call elsewhere changes no alias and runs without a stop. Java maps
//     one shared file (hsperfdata) and makes about 250 mprotect calls
//     elsewhere in a run of testdata/Hot.java; when every mprotect of
//     such a process stopped, java stopped more under --events=bpf than
//     under seccomp (916 stops against 713, 2026-11-26).
//
// A call that stopped at ptjit's seccomp stop is handled there as in the
// seccomp mode; its ring event, which comes too, is dropped (the thread's
// mark, threadEvents). The ring's events are read, in order, at every
// ptrace stop of any tracee before the stop is handled (drainEvents):
// by bpfev's ordering invariant every call a thread completed before its
// stop is in the ring by then, so a stop never sees a Space older than
// the calls before it. Each event's effect is applied as at an exit stop
// (eventEffects), stamped with the event's time put on the TSC time base
// (bpfev.TSC), the version's bytes taken from the event. A version of the
// range an earlier event's version had (same address and size) is
// recorded as that version's pages but for those whose bytes may differ
// (bpfev's page numbers, Event.Gens: the kernel's page cache sends only
// the pages that changed, and numbers the others as before), so the
// database reads, hashes and compares only those (eventVersion,
// db.Recorder.AddVersionPages; Stats.Events.PagesSame counts the rest).
// An event the
// kernel could not copy (FlagFallback) is applied reading the range from
// the program, as the seccomp path does: its thread was sent SIGSTOP
// before it returned to user space and does not run until ptjit handles
// that stop (si_code SI_KERNEL, si_pid 0, which no process can send),
// where the signal is suppressed (eventStop). The range is read when the
// event is drained, before that stop: the thread runs none of its own
// code between its call and the stop (a signal dequeued before the
// SIGSTOP only gets its handler frame set up). A range --copy tracks is
// read from its written pages there as at a seccomp stop; the first such
// stop of a space makes its userfaultfd (pagesAtEventStop), which needs
// the stopped thread. --copy=auto tracks ranges of 1 MiB or more, all of
// them over the budget; --copy=changed, which would track ranges within
// it (whose bytes the events carry), is refused. A SIGSTOP of that kind with no event (the ring had
// no room for the call record) takes the call from the thread's registers
// at that stop.
//
// While no tracee stops, a doorbell child wakes the tracer to read the
// ring (below). A full ring makes the exec-adding calls fall back (they
// stop), and call records it drops are counted (Stats.Events.Lost).
// Not with --pt=soft (the soft filter rewrites every exec-adding call at
// its entry; an attached process, with no filter, may be stepped without
// it: attach_linux_amd64.go) nor --copy=changed (the pages it tracks are
// read at stops).

// EventsMode is --events: where the address-space calls' effects come
// from.
type EventsMode string

const (
	EventsSeccomp EventsMode = "seccomp"
	EventsBPF     EventsMode = "bpf"
	// EventsAuto is resolved by the launcher: bpf where bpfev.Available,
	// else seccomp.
	EventsAuto EventsMode = "auto"
)

// ParseEvents parses --events.
func ParseEvents(s string) (EventsMode, error) {
	switch EventsMode(s) {
	case EventsAuto, EventsBPF, EventsSeccomp:
		return EventsMode(s), nil
	}
	return "", fmt.Errorf("--events: %q is not auto, bpf or seccomp", s)
}

// LaunchRules is the launch filter for mode: Rules, and with EventsBPF
// without the stops the ring buffer replaces (see above).
func LaunchRules(mode EventsMode) []Rule {
	if mode != EventsBPF {
		return Rules
	}
	const wx = unix.PROT_WRITE | unix.PROT_EXEC
	out := make([]Rule, 0, len(Rules))
	for _, r := range Rules {
		switch r.Nr {
		case unix.SYS_MMAP:
			r.When = []Cond{{Arg: 2, AllBits: wx}, {Arg: 3, AnyBit: unix.MAP_SHARED}}
			r.Why = "with BPF events: PROT_WRITE|PROT_EXEC together (W^X rewrites the protection at the entry); " +
				"MAP_SHARED (writable aliases). Other mmaps come from the ring buffer"
		case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
			r.When = []Cond{{Arg: 2, AllBits: wx}, {Arg: 2, AnyBit: protGrowsdown | protGrowsup}}
			r.Why = "with BPF events: PROT_WRITE|PROT_EXEC together (W^X rewrites the protection at the entry); " +
				"PROT_GROWSDOWN/GROWSUP (the effect is read from /proc/PID/maps). Other calls come from the ring buffer"
		case unix.SYS_MUNMAP:
			continue // from the ring buffer
		}
		out = append(out, r)
	}
	return out
}

// eventCalls are the calls bpfev reports (its doc.go): a seccomp stop of
// one of them marks the thread, and the call's ring event is dropped.
var eventCalls = map[int]bool{
	unix.SYS_MMAP: true, unix.SYS_MPROTECT: true, unix.SYS_PKEY_MPROTECT: true, unix.SYS_MUNMAP: true,
	unix.SYS_MREMAP: true, unix.SYS_MADVISE: true, unix.SYS_BRK: true, unix.SYS_SHMAT: true,
	unix.SYS_SHMDT: true, unix.SYS_REMAP_FILE_PAGES: true,
}

// ringCalls are the calls whose effect may come from the ring buffer
// (those LaunchRules lets run without a stop).
var ringCalls = map[int]bool{
	unix.SYS_MMAP: true, unix.SYS_MPROTECT: true, unix.SYS_PKEY_MPROTECT: true, unix.SYS_MUNMAP: true,
}

// EventStats are the numbers of the BPF event source.
type EventStats struct {
	Mode      EventsMode
	Calls     int64 // events read
	Applied   int64 // of which applied from the ring (the others were ptjit's stops' or no change)
	Bytes     int64 // bytes of versions taken from events, not read from the program
	Fallbacks int64 // exec-adding calls the kernel could not copy (read at their SIGSTOP)
	Lost      int64
	// PagesSame: pages of versions from events recorded as their base
	// version's (the kernel found them unchanged), neither copied nor
	// hashed
	PagesSame int64
}

// eventState is the tracer's BPF event source (nil without EventsBPF).
type eventState struct {
	src         *bpfev.Source
	ev          bpfev.Event
	conv        tscConv    // this drain's conversion of event times
	bell        *eventBell // reads the ring while no tracee stops; nil: none
	failed      bool       // a read failed: warned once
	aliasWarned bool       // a call over a shared mapping did not stop: warned once
}

// threadEvents: mark is the last call of the thread ptjit stopped at its
// seccomp stop, whose ring event is the ptrace path's (kept until that
// event comes, or the call's fallback SIGSTOP with no event); signaled
// counts the fallback SIGSTOPs due to the thread.
type threadEvents struct {
	mark     callKey
	signaled int
}

// callKey names a call of a thread: its number, its first two arguments
// (address and length: the prot argument may be rewritten) and the
// address after its syscall instruction. The zero key is none.
type callKey struct {
	nr     int
	a0, a1 uint64
	ip     uint64
}

// openEvents starts the BPF event source for Options.Events.
func (t *Tracer) openEvents() error {
	t.result.Stats.Events.Mode = EventsSeccomp
	switch t.opts.Events {
	case "", EventsSeccomp:
		if t.opts.Source != nil {
			t.opts.Source.Close()
		}
		return nil
	case EventsBPF:
	default:
		return fmt.Errorf("tracker: events mode %q (want seccomp or bpf)", t.opts.Events)
	}
	src := t.opts.Source
	if t.opts.SoftPT != nil && (t.opts.SoftFilter || t.opts.Attach == 0) || t.opts.Copy == CopyChanged {
		if src != nil {
			src.Close()
		}
	}
	if t.opts.SoftPT != nil && (t.opts.SoftFilter || t.opts.Attach == 0) { // attached: plain soft PT (attach_linux_amd64.go)
		return errors.New("--events=bpf cannot run with --pt=soft (the soft filter rewrites every call that adds PROT_EXEC at its entry): use --events=seccomp")
	}
	if t.opts.Copy == CopyChanged {
		return errors.New("--events=bpf cannot run with --copy=changed (the ranges the kernel copies come from the events, not from changed pages): use --copy=auto or full, or --events=seccomp")
	}
	if src == nil {
		var err error
		if src, err = bpfev.Open(SourceConfig(t.opts.BPF)); err != nil {
			return err
		}
	}
	t.events = &eventState{src: src}
	t.result.Stats.Events.Mode = EventsBPF
	return nil
}

// SourceConfig is c with what every BPF source the tracker reads needs:
// the calls ptjit injects (InjectCookie in r9) not reported. Their
// events would be dropped (applyEvent), after the kernel had copied
// their pages (W^X injects an mprotect at most of its stops) or, where
// it could not, stopped the thread in the middle of an injection.
func SourceConfig(c bpfev.Config) bpfev.Config {
	c.Ignore = InjectCookie
	return c
}

// closeEvents reads what is left and closes the source.
func (t *Tracer) closeEvents() {
	if t.events == nil {
		return
	}
	t.stopBell()
	t.drainEvents()
	if n, err := t.events.src.Lost(); err == nil {
		t.result.Stats.Events.Lost = int64(n)
	}
	t.events.src.Close()
}

// eventsAdd and eventsRemove keep the source's process map.
func (t *Tracer) eventsAdd(pid int) {
	if t.events != nil {
		add := t.events.src.Add
		if t.att.on && t.wxOn() {
			add = t.events.src.AddStopping // attach_linux_amd64.go
		}
		if err := add(pid); err != nil {
			t.warnf("%v", err)
		}
	}
}

func (t *Tracer) eventsRemove(pid int) {
	if t.events != nil {
		if err := t.events.src.Remove(pid); err != nil {
			t.warnf("%v", err)
		}
	}
}

// eventsMark notes, at ptjit's seccomp stop of a call the source
// reports, that the call is the ptrace path's (regs: the stop's).
func (t *Tracer) eventsMark(th *thread, regs *unix.PtraceRegs) {
	if t.events != nil && eventCalls[int(regs.Orig_rax)] {
		th.ev.mark = callKey{int(regs.Orig_rax), regs.Rdi, regs.Rsi, regs.Rip}
	}
}

// drainEvents applies every event in the ring, in order.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) drainEvents() {
	es := t.events
	if es == nil || es.failed {
		return
	}
	es.conv = tscConv{}
	if es.bell != nil {
		es.bell.drained.Store(time.Now().UnixNano())
	}
	for {
		ok, err := es.src.TryNext(&es.ev)
		if err != nil {
			es.failed = true
			t.warnf("BPF events: %v (later calls are seen only where they stop)", err)
			return
		}
		if !ok {
			return
		}
		t.applyEvent(&es.ev)
	}
}

// applyEvent applies one event (see the top of this file).
func (t *Tracer) applyEvent(e *bpfev.Event) {
	st := &t.result.Stats.Events
	st.Calls++
	if e.Args[5] == InjectCookie {
		// a call ptjit injected, at one of its stops: only from a
		// Source opened without SourceConfig (a fallback SIGSTOP
		// then comes while ptjit waits for the call: eventSignal)
		return
	}
	th := t.threads[e.TID]
	if th != nil && e.Flags&(bpfev.FlagFallback|bpfev.FlagStop) != 0 && e.Flags&bpfev.FlagSignaled != 0 {
		th.ev.signaled++
		if e.Flags&bpfev.FlagStop != 0 {
			t.attachNoteStop(th, e) // attach_linux_amd64.go
		}
	}
	if th != nil && th.ev.mark == (callKey{e.Nr, e.Args[0], e.Args[1], e.IP}) {
		th.ev.mark = callKey{}
		return // handled at its stops
	}
	p := t.procs[e.TGID]
	if p == nil || p.helper || p.space == nil || !(ringCalls[e.Nr] || t.att.on && eventCalls[e.Nr]) {
		return
	}
	if e.Flags&bpfev.FlagFallback != 0 {
		st.Fallbacks++
	}
	op := &pendingOp{nr: e.Nr, args: e.Args, ip: e.IP - 2}
	op.rng = ival{op.args[0], op.args[0] + pageUp(op.args[1])}
	if op.nr == unix.SYS_MREMAP && op.args[3]&mremapFixed != 0 {
		op.to = ival{op.args[4], op.args[4] + pageUp(op.args[2])} // attached: no stop
	}
	var data *image
	if e.Complete() {
		data = &image{addr: e.Addr, b: e.Bytes, gens: e.Gens}
	}
	at := t.events.conv.stamp(e.Time)
	t.applyCall(th, p, op, uint64(e.Ret), Stamp{At: at, IP: op.ip, TID: e.TID, Via: e.TID}, data)
}

// applyCall applies a call that did not stop, from its event or (data
// nil) from the program's memory, if it can change tracked memory.
func (t *Tracer) applyCall(th *thread, p *process, op *pendingOp, ret uint64, st Stamp, data *image) {
	sp := p.space
	if !coreNeeds(sp, op) {
		return
	}
	x := &sysExit{th: th, op: op, ret: ret, p: p, sp: sp, cause: syscallName(op.nr), st: st, data: data, late: true}
	switch op.nr {
	case unix.SYS_MMAP:
		x.out = ival{ret, ret + pageUp(op.args[1])}
	case unix.SYS_MREMAP:
		x.out = ival{ret, ret + pageUp(op.args[2])}
	}
	if int64(ret) < 0 && int64(ret) >= -4095 {
		if th != nil && unix.Errno(-int64(ret)) == unix.ENOMEM {
			t.exitFailed(x, unix.ENOMEM)
		}
		return
	}
	t.result.Stats.Events.Applied++
	for _, effect := range eventEffects {
		effect.fn(t, x)
	}
	if es := t.events; !es.aliasWarned && (sp.aliasTouches(op.rng.s, op.rng.e) || op.nr == unix.SYS_MMAP && sp.aliasTouches(x.out.s, x.out.e)) {
		// AliasRangeRules makes such calls stop; one that did not (the
		// filter could not be added) is a blind spot
		es.aliasWarned = true
		t.warnf("pid %d: a %s of a shared mapping ran without a stop: writable aliases of code there are not followed", p.pid, x.cause)
	}
}

// eventEffects are the exitEffects a call from the ring buffer runs: the
// ones that only change ptjit's state (the thread is not stopped, so
// nothing can be injected in it). The calls that need the others stop
// (LaunchRules, AliasRangeRules), so the rest has nothing to do here.
var eventEffects = []exitEffect{
	{"wxClearEffect", (*Tracer).wxClearEffect, "as in exitEffects: W^X forgets its batch pages in the range"},
	{"pagesEffect", (*Tracer).pagesEffect, "as in exitEffects"},
	{"coreEffect", (*Tracer).coreEffect, "the Space takes the call's effect, versions with the event's bytes"},
	{"wxTCBEffect", (*Tracer).wxTCBEffect, "after coreEffect: memory unmapped or mapped anew is no thread's stack or control block any more"},
}

// tscConv puts events' CLOCK_MONOTONIC times on the trace's time base:
// one reference stamp and TSC frequency (measured since ptjit started)
// for every event of a drain, so that their order is kept (a reference
// per event, each with its own error, could swap two events microseconds
// apart).
type tscConv struct {
	ref clock.Stamp
	hz  uint64
}

// stamp converts mono, taking the reference at the drain's first event.
func (c *tscConv) stamp(mono int64) clock.Stamp {
	if c.hz == 0 {
		c.ref = refStamp()
		c.hz = clock.HzBetween(clock.ProcessStart(), c.ref)
	}
	if c.hz == 0 {
		return clock.Stamp{TSC: c.ref.TSC, MonoNS: mono}
	}
	return clock.Stamp{TSC: bpfev.TSC(mono, c.ref, c.hz), MonoNS: mono}
}

// refStamp is a TSC read between two CLOCK_MONOTONIC reads, the closest
// of a few tries: a pair read back to back once is off by however long
// the thread was preempted between the reads (on a loaded machine, a
// millisecond and more), and every converted time with it.
func refStamp() clock.Stamp {
	var best clock.Stamp
	gap := int64(-1)
	for range 5 {
		m0 := clock.Mono()
		tsc := clock.RDTSC()
		m1 := clock.Mono()
		if d := m1 - m0; gap < 0 || d < gap {
			gap, best = d, clock.Stamp{TSC: tsc, MonoNS: m0 + d/2}
		}
	}
	return best
}

// siKernel is si_code for a signal the kernel sent (SI_KERNEL).
const siKernel = 0x80

// eventStop handles a SIGSTOP signal-delivery-stop that the BPF program
// sent (si_code SI_KERNEL, si_pid 0): suppressed. Its call's event was
// applied when the ring was read before this stop; a stop with none (the
// ring had no room for the call record) takes the call from the
// registers, which hold it as it returned. It reports false for any other
// stop.
//
// Precondition: on the locked tracer thread; th is in a
// signal-delivery-stop of sig.
func (t *Tracer) eventStop(th *thread, sig int) bool {
	if !t.eventSignal(th, sig) {
		return false
	}
	regs, err := getRegs(th.tid)
	if th.ev.signaled > 0 {
		th.ev.signaled--
		if err == nil {
			t.pagesAtEventStop(th, &regs)
		}
		return true
	}
	if err != nil || th.proc.space == nil || th.proc.helper || !ringCalls[int(regs.Orig_rax)] {
		return true
	}
	if th.ev.mark == (callKey{int(regs.Orig_rax), regs.Rdi, regs.Rsi, regs.Rip}) {
		th.ev.mark = callKey{}
		return true // a call ptjit stopped: handled at its stops
	}
	t.pagesAtEventStop(th, &regs)
	op := &pendingOp{nr: int(regs.Orig_rax), args: [6]uint64{regs.Rdi, regs.Rsi, regs.Rdx, regs.R10, regs.R8, regs.R9}, ip: regs.Rip - 2}
	op.rng = ival{op.args[0], op.args[0] + pageUp(op.args[1])}
	t.result.Stats.Events.Fallbacks++
	t.applyCall(th, th.proc, op, regs.Rax, stampAt(th, op.ip, clock.Now()), nil)
	return true
}

// eventSignal reports whether th's signal-delivery-stop of sig is a
// fallback SIGSTOP of the BPF program (also one that comes while ptjit
// acts in the thread: hold drops it).
func (t *Tracer) eventSignal(th *thread, sig int) bool {
	if t.events == nil || sig != int(unix.SIGSTOP) {
		return false
	}
	si, err := getSiginfo(th.tid)
	return err == nil && si.Code == siKernel && int32(si.Addr) == 0
}

// eventVersion records v with its bytes from an event's copy. When an
// earlier version from an event covered the same range, only the pages
// whose bytes may differ from it (another page number, image.gens) are
// given to the database, which takes the others' from that version
// unread, unhashed and uncompared (db.Recorder.AddVersionPages).
func (t *Tracer) eventVersion(sp *space, v db.Version, data *image) int64 {
	st := &t.result.Stats.Events
	st.Bytes += int64(v.Size)
	gens := data.pageGens(v.Addr, v.Addr+v.Size)
	if b := sp.evBase[v.Addr]; b != nil && gens != nil && b.size == v.Size {
		var runs []db.PageRun
		for i, g := range gens {
			if g == b.gens[i] {
				continue
			}
			addr := v.Addr + uint64(i)*pageSize
			if n := len(runs); n > 0 && runs[n-1].Addr+uint64(len(runs[n-1].Data)) == addr && len(runs[n-1].Data) < db.ChunkSize {
				runs[n-1].Data = append(runs[n-1].Data, data.b[addr-data.addr:addr-data.addr+pageSize]...)
				continue
			}
			buf := db.Buffer(pageSize)
			data.read(addr, buf)
			runs = append(runs, db.PageRun{Addr: addr, Data: buf})
		}
		id, _ := t.rec.AddVersionPages(v, b.id, runs)
		st.PagesSame += int64(len(gens))
		for _, r := range runs {
			st.PagesSame -= int64(len(r.Data) / pageSize)
		}
		b.id, b.gens = id, append(b.gens[:0], gens...)
		return id
	}
	var id int64
	if v.Size > db.ChunkSize {
		var err error
		id, _, err = t.rec.AddVersionRead(v, data.read)
		if err != nil {
			t.warnf("%v", err)
		}
	} else {
		v.Data = db.Buffer(int(v.Size))
		data.read(v.Addr, v.Data)
		id, _ = t.rec.AddVersion(v)
	}
	if gens != nil {
		if sp.evBase == nil {
			sp.evBase = map[uint64]*evBase{}
		}
		sp.evBase[v.Addr] = &evBase{size: v.Size, id: id, gens: append([]uint64(nil), gens...)}
	}
	return id
}

// evBase is the last version recorded from an event at an address, and
// its pages' numbers (eventVersion).
type evBase struct {
	size uint64
	id   int64
	gens []uint64
}

// Reading the ring while no tracee stops. The tracer thread waits in
// wait4 for its tracees' stops; a program that makes few stops would
// leave its events in the ring until the next one and then stop for all
// of them at once (a LuaJIT run: 72 stops, 12,000 events, half a second
// in stops). So ptjit keeps a doorbell: a child of the tracer thread,
// traced by it, that does nothing (a fork of ptjit running only raw
// system calls: its file descriptors closed, pause(2) for ever, killed
// with ptjit); a watcher goroutine sends it SIGUSR1 when the ring holds
// records and it has not rung since the last drain, every bellEvery at
// most; its signal-delivery-stop wakes the tracer's wait4, which drains
// the ring and resumes it without the signal. The program never stops
// for it, and it is no tracee of the recording (no stop counted). The
// tracer reads the ring at every stop too: while stops come at least
// every bellEvery (a program whose calls stop anyway: in W^X's managed
// memory every mprotect stops, and the mprotects ptjit injects there put
// their events in the ring too), the bell does not ring (due).

// bellEvery is how often the watcher looks at the ring; it rings at
// least every bellIdle even when the ring is empty (waitThread looks at
// the thread it waits for then).
const (
	bellEvery = 2 * time.Millisecond
	bellIdle  = 100 * time.Millisecond
)

// eventBell is the doorbell child and its watcher.
type eventBell struct {
	pid     int
	rung    atomic.Bool
	drained atomic.Int64 // when the tracer last read the ring (Unix ns)
	stop    chan struct{}
	done    chan struct{}
}

// startBell forks the doorbell and starts its watcher; without one (the
// fork failed), the ring is read at the tracees' stops only.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) startBell() {
	if t.events == nil {
		return
	}
	pid, err := forkPause()
	if err != nil {
		t.warnf("BPF events: no doorbell child (%v): events are read at the program's stops only", err)
		return
	}
	if _, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, unix.PTRACE_O_EXITKILL, 0, 0); e != 0 {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		t.warnf("BPF events: no doorbell child (PTRACE_SEIZE: %v): events are read at the program's stops only", e)
		return
	}
	b := &eventBell{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	t.events.bell = b
	go b.watch(t.events.src)
}

// watch rings the bell when the ring holds records.
func (b *eventBell) watch(src *bpfev.Source) {
	defer close(b.done)
	tick := time.NewTicker(bellEvery)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-b.stop:
			return
		case now := <-tick.C:
			if b.due(src, now, last) && b.rung.CompareAndSwap(false, true) {
				last = now
				unix.Kill(b.pid, unix.SIGUSR1)
			}
		}
	}
}

// due: the ring holds records the tracer has not read for bellEvery (it
// reads the ring at every stop, so a run of stops needs no bell), or
// bellIdle passed since the last ring.
func (b *eventBell) due(src *bpfev.Source, now, last time.Time) bool {
	if now.Sub(last) >= bellIdle {
		return true
	}
	return src.Pending() > 0 && now.UnixNano()-b.drained.Load() >= int64(bellEvery)
}

// bellStop handles a stop of the doorbell (and reports true), or reports
// false for any other tid.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) bellStop(tid int, ws unix.WaitStatus) bool {
	if t.events == nil || t.events.bell == nil || tid != t.events.bell.pid {
		return false
	}
	b := t.events.bell
	if ws.Exited() || ws.Signaled() {
		t.bellGone()
		return true
	}
	t.drainEvents()
	b.rung.Store(false)
	unix.PtraceCont(tid, 0)
	return true
}

// bellWhileWaiting handles a stop of the doorbell that came while ptjit
// waited for one thread (waitThread): resumed at once, the ring left for
// the main loop (and reports true); false for any other tid.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) bellWhileWaiting(tid int, ws unix.WaitStatus) bool {
	if t.events == nil || t.events.bell == nil || tid != t.events.bell.pid {
		return false
	}
	if ws.Exited() || ws.Signaled() {
		t.bellGone()
		return true
	}
	t.events.bell.rung.Store(false)
	unix.PtraceCont(tid, 0)
	return true
}

// bellGone forgets a doorbell that died: the ring is read at the
// program's stops from now on.
func (t *Tracer) bellGone() {
	b := t.events.bell
	t.events.bell = nil
	close(b.stop)
	<-b.done
}

// stopBell ends the doorbell.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) stopBell() {
	b := t.events.bell
	if b == nil {
		return
	}
	t.events.bell = nil
	close(b.stop)
	<-b.done
	unix.Kill(b.pid, unix.SIGKILL)
	var ws unix.WaitStatus
	for {
		if _, err := unix.Wait4(b.pid, &ws, unix.WALL, nil); !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// forkPause forks a child of the calling thread that closes every file
// descriptor, asks to be killed when that thread exits, and pauses for
// ever. The child is a copy of ptjit with one thread: it runs nothing but
// raw system calls (no Go runtime, no memory allocation).
//
// Precondition: on the locked tracer thread (the child's parent).
func forkPause() (int, error) {
	pid, _, e := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	if pid == 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_CLOSE_RANGE, 0, ^uintptr(0), 0); e != 0 {
			for fd := uintptr(0); fd < 1<<16; fd++ { // before Linux 5.9
				unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
			}
		}
		unix.RawSyscall(unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0)
		for {
			unix.RawSyscall(unix.SYS_PAUSE, 0, 0, 0)
		}
	}
	return int(pid), nil
}
