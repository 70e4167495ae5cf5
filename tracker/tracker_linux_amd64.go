package tracker

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/snapshot"
	"github.com/ptjit/ptjit/softpt"
	"golang.org/x/sys/unix"
)

// PinMode says whether the tracer thread and the tracees share a CPU.
type PinMode string

const (
	PinAuto PinMode = "auto" // see doc.go for the measured choice
	PinOn   PinMode = "on"   // tracer and every tracee on one CPU
	PinOff  PinMode = "off"  // leave scheduling alone
)

// ParsePin parses --pin.
func ParsePin(s string) (PinMode, error) {
	switch PinMode(s) {
	case PinAuto, PinOn, PinOff:
		return PinMode(s), nil
	}
	return "", fmt.Errorf("--pin: %q is not auto, on or off", s)
}

// StopInfo describes one seccomp stop, for Options.OnSeccomp.
type StopInfo struct {
	PID, TID int
	Nr       int
	Args     [6]uint64
	IP       uint64
}

// Options configure a trace.
type Options struct {
	Recorder *db.Recorder
	Pin      PinMode
	// Warnf reports a problem that does not stop the trace (a page that
	// could not be read, a blind-spot syscall). Nil: discarded.
	Warnf func(format string, args ...any)
	// WX is --wx: W^X write tracking (off when empty).
	WX WXMode
	// OnStart, if set, is called with the program's pid once it is
	// traced (before it runs).
	OnStart func(pid int)
	// OnSeccomp, if set, is called on the tracer thread for every
	// seccomp stop (tests use it to see what the filter lets through).
	OnSeccomp func(StopInfo)
	// SoftPT, when set, single-steps every thread of the program and
	// reports each instruction to the session (ptjit run --pt=soft; see
	// softpt_linux_amd64.go).
	SoftPT *softpt.Session
	// SoftFilter, with SoftPT, steps and traces only JIT code (ptjit run
	// --soft-filter=jit; see softfilter_linux_amd64.go).
	SoftFilter bool
	// Copy is --copy: how later versions of a JIT range are read ("" is
	// auto; pages_linux_amd64.go).
	Copy CopyMode
	// Events is --events: EventsBPF reads the address-space calls from
	// a bpfev.Source configured by BPF (tests make its budget or ring
	// small to force fallbacks); "" or EventsSeccomp stops them
	// (events_linux_amd64.go). The launch filter must be
	// LaunchRules(Events). Source, if set, is the source to read (the
	// tracer closes it), already opened by the caller; else the tracer
	// opens one.
	Events EventsMode
	BPF    bpfev.Config
	Source *bpfev.Source
	// Attach, if not 0, is the pid of a running process to attach to
	// instead of launching a program (the Launch is not used); it needs
	// EventsBPF. Tracer.Detach ends such a trace (attach_linux_amd64.go).
	Attach int
	// Proxy is --proxy: where W^X's protection changes run (the
	// protection proxy or an injection; "" is auto: proxypick.go)
	Proxy ProxyMode
}

// Launch starts the program on the tracer thread. It returns the pid of a
// child that is running the launcher (not yet the program) and a release
// function; the tracer seizes the pid and then calls release, after which
// the child installs the seccomp filter and execs the program.
type Launch func() (pid int, release func() error, err error)

// Result is the outcome of a trace.
type Result struct {
	// Status is the first program's exit code, or 128+N if signal N
	// killed it.
	Status int
	Stats  Stats
	// Refused: the program ptjit refused to record (a 32-bit one,
	// compat_linux_amd64.go); every process was killed at its exec
	Refused *RefusedError
	// Detached: the trace of an attached process ended with Detach; the
	// process runs on (Status is 0); AttachedAt and DetachedAt are when
	// ptjit attached (Options.Attach) and detached (zero when it did not)
	Detached               bool
	AttachedAt, DetachedAt clock.Stamp
}

// StartError reports a program that could not be started under ptrace.
type StartError struct {
	Op  string
	Err error
}

func (e *StartError) Error() string { return e.Op + ": " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

// Tracer follows one program and all its threads and children.
type Tracer struct {
	opts  Options
	rec   *db.Recorder
	warnf func(string, ...any)

	// the tracees: every thread and process, and the ones whose first
	// stop and parent's event have not both been seen
	threads map[int]*thread
	procs   map[int]*process
	pending map[int]unix.WaitStatus // new tids stopped before their parent's event
	newborn map[int]birth           // tids announced by a parent's event, not yet seen
	proxies map[int]bool            // the protection proxies' pids (proxy_linux_amd64.go)
	pick    proxyPick               // the proxy or an injection, by their costs (proxypick.go)
	selfPID int
	result  Result // the trace's outcome (Stats counted as it goes)

	root  rootState // the launched program
	later stopQueue // stops seen while waiting for one thread (waitstop_linux_amd64.go)
	// how long a wait polls before it sleeps (spin.go): the main loop's,
	// and waitThread's for a thread ptjit resumed for its own step
	spin, spinStep spinWait
	spinLoad       spinLoad    // the machine's runnable threads, last counted
	shared         sharedState // what other goroutines read or change (Kill, Signal, ptrun)
	soft           *softState  // --pt=soft (softpt_linux_amd64.go); nil otherwise
	events         *eventState // --events=bpf (events_linux_amd64.go); nil otherwise
	att            attachState // Options.Attach (attach_linux_amd64.go)

	done chan struct{}
	err  error
}

// rootState: the launched program.
type rootState struct {
	pid  int
	done bool // its exit was seen: Tracer.result.Status is final
	// ptraceWarned: the program was told once that it cannot ptrace
	// (ptraceEntry).
	ptraceWarned bool
	// refused: the first program refused (refuseExec)
	refused *RefusedError
}

// stopQueue: stops of other threads seen while ptjit waited for one
// thread (waitThread), in order, for the main loop; per counts them per
// tid (such a thread is not resumed before they are handled).
type stopQueue struct {
	stops []queuedStop
	per   map[int]int
}

// sharedState is read and changed from other goroutines.
type sharedState struct {
	mu      sync.Mutex // guards live and killing (Kill runs on another goroutine)
	live    map[int]bool
	killing bool
	// Read from ptrun's signal handling: when each signal last reached
	// a tracee (unix ns), and whether the program runs (its first exec
	// happened).
	sigSeen [65]atomic.Int64
	running atomic.Bool
	attach  attachShared // Detach's request (attach_linux_amd64.go)
}

type thread struct {
	tid      int
	proc     *process
	op       *pendingOp // seccomp stop that asked for the exit stop
	recorded bool
	helper   bool // a thread of the launcher's Go runtime: dies in the exec
	// dying: seen at PTRACE_EVENT_EXIT while ptjit acted in it; nothing
	// more can be injected or stepped there.
	dying bool
	// each feature's state
	sig     threadSignals    // signals held while ptjit acts (signals_linux_amd64.go)
	wx      threadWX         // W^X faults retried as stale (wx_linux_amd64.go)
	filter  threadFilter     // --soft-filter (softfilter_linux_amd64.go)
	step    *stepState       // --pt=soft: single-stepping (softpt_linux_amd64.go); nil before the first step
	ev      threadEvents     // --events=bpf (events_linux_amd64.go)
	att     []attachStopCall // attached: calls whose stop is due (attach_linux_amd64.go)
	kw      threadKW         // a kernel copy into code in flight (kwrite_linux_amd64.go)
	filters threadFilters    // its seccomp filters, where injected calls are checked (progfilter_linux_amd64.go)
}

// threadSignals: signals that arrived while ptjit ran an injected syscall
// or a step (held); those sent to the thread again, whose siginfo is put
// back when they arrive (reraised).
type threadSignals struct {
	held, reraised []heldSignal
}

// threadWX: lastStale is the (RIP, address) of the last W^X fault retried
// as stale, so the same fault twice is handled for real; staleFetches
// counts the fetch faults retried again at that key (wxFault). staleGen
// is the space's protection generation (wxState.gen) at that retry, and
// staleRepeats how often the same key was retried as stale again because
// the protections changed meanwhile (staleAgain).
type threadWX struct {
	lastStale    [2]uint64
	staleFetches int
	staleGen     uint64
	staleRepeats int
}

// maxStaleRepeats bounds the stale retries of one fault across changes of
// the protections (staleAgain).
const maxStaleRepeats = 1024

// staleAgain reports whether a fault at key, the space's protections now
// at generation gen, may be retried as stale (again): a different fault
// than the last one retried, or the same one after ptjit changed
// protections in the space, at most maxStaleRepeats times. A thread that
// calls one function over and over while another thread's batch cycles
// toggle its page faults at the same key each time, and each of those
// faults is stale by the time ptjit sees it (found by the new-user
// trial: testdata/alias-threads); the same fault with no change between
// is the program's.
func (w *threadWX) staleAgain(key [2]uint64, gen uint64) bool {
	return w.lastStale != key || w.staleGen != gen && w.staleRepeats < maxStaleRepeats
}

// retried notes that the fault at key was retried as stale at gen.
func (w *threadWX) retried(key [2]uint64, gen uint64) {
	if w.lastStale == key {
		w.staleRepeats++
	} else {
		w.staleRepeats = 0
	}
	w.lastStale, w.staleFetches, w.staleGen = key, 0, gen
}

// threadFilter: --soft-filter's view of a thread: resumed with
// PTRACE_CONT (not stepped) since its last stop (free); at JIT code when
// last seen (inJIT).
type threadFilter struct {
	free  bool
	inJIT bool
	// vfork: a vfork parent waiting for its child (from its vfork event
	// to its vfork-done stop): it runs no code of its own meanwhile and
	// cannot be interrupted (softfilter_linux_amd64.go, filterVfork)
	vfork bool
}

type process struct {
	pid, ppid int
	helper    bool // still the launcher, before the first exec
	space     *space
	threads   map[int]*thread
	recorded  bool
	full      fullProtectState // the filter that stops every mprotect (fullprotect_linux_amd64.go)
	ownFilter bool             // it installed a seccomp filter of its own (ownfilter_linux_amd64.go)
	// lateFilter: attached, it installed a filter that refuses ptjit's
	// calls (progfilter_linux_amd64.go)
	lateFilter bool
}

// space is a Space plus what the tracker keeps about it.
type space struct {
	*Space
	evBase map[uint64]*evBase // by address: the last version from an event there (eventVersion)
	owner  int                // pid records are filed under
	refs   int
	vdso   [2]uint64
	sink   *sink
	// brkMax: at least the program break, page-rounded (0: not known
	// yet); see brkNeedsExit
	brkMax uint64
	// each feature's state, declared in its file
	inj    injectState // acting in the tracee (inject_linux_amd64.go)
	proxy  proxyState  // the protection proxy (proxy_linux_amd64.go)
	wx     wxState     // W^X (wx_linux_amd64.go)
	alias  aliasState  // writable aliases (wx_alias_linux_amd64.go)
	filter filterState // --soft-filter=jit (softfilter_linux_amd64.go)
	names  nameState   // the perf map's lines read so far (names_linux_amd64.go)
	pages  pageState   // changed-page tracking (pages_linux_amd64.go)
}

type birth struct {
	parent  *thread
	thread  bool // CLONE_THREAD
	shareVM bool // CLONE_VM without CLONE_THREAD (vfork, posix_spawn)
	helper  bool // born in the launcher, before the exec
	words   cloneWords
	held    bool // the parent waits in its clone event stop for adopt (wxHoldParent)
}

type pendingOp struct {
	nr   int
	args [6]uint64
	ip   uint64
	rsp  uint64 // the calling thread's stack pointer
	// rng is the range the call names, decoded once at the entry:
	// [args[0], args[0]+pageUp(args[1])) (mprotect, munmap, madvise,
	// remap_file_pages, an mremap's old range; not an mmap's, whose
	// start is its result); to: an mremap's MREMAP_FIXED target
	// [args[4], args[4]+pageUp(args[2]))
	rng, to ival
	// each feature's part
	rewrite rewriteOp // the protection the kernel got instead (entryRewrites)
	wx      wxOp      // W^X (wx_linux_amd64.go, wx_tcb_linux_amd64.go)
	mem     memOp     // writes into another process's memory (procmem_linux_amd64.go)
	munmap  munmapOp  // an munmap's exit among other threads' calls (unmapFirstEffect, noteLater)
}

// rewriteOp: the prot argument was rewritten to kprot (W^X: without
// PROT_WRITE; --soft-filter: without PROT_EXEC), for reason.
type rewriteOp struct {
	done   bool
	kprot  uint64
	reason string
}

// wxOp: a fresh mapping that starts as batch pages (fresh,
// wxFreshEffect); an mprotect over kernel-written memory, run as asked
// (kw: wxKWEntry, wxTCBEffect).
type wxOp struct {
	fresh bool
	kw    bool
}

// memOp: the target of process_vm_writev or of a write to a
// /proc/PID/mem descriptor, and its remote ranges.
type memOp struct {
	target *process
	ranges []ival
}

// munmapOp: ranges other threads' calls mapped or protected while this
// munmap was in flight (later, noteLater): the kernel gave them out after
// this call freed them, so its exit must not unmap them; unmapped:
// another thread's call mapped addresses in this one's range before its
// exit stop, so the Space took it then (unmapFirstEffect).
type munmapOp struct {
	later    []ival
	unmapped bool
}

// Start launches the program through launch on a new OS thread that will
// own every ptrace call of the trace, and returns once the program runs
// (or could not be started).
func Start(opts Options, launch Launch) (*Tracer, error) {
	t := &Tracer{
		opts:    opts,
		rec:     opts.Recorder,
		warnf:   opts.Warnf,
		threads: map[int]*thread{},
		procs:   map[int]*process{},
		pending: map[int]unix.WaitStatus{},
		newborn: map[int]birth{},
		proxies: map[int]bool{},
		done:    make(chan struct{}),
		selfPID: os.Getpid(),
	}
	t.shared.live = map[int]bool{}
	if t.warnf == nil {
		t.warnf = func(string, ...any) {}
	}
	if opts.SoftPT != nil {
		t.soft = newSoftState(opts.SoftPT)
	}
	if err := t.openEvents(); err != nil {
		return nil, err
	}
	t.result.Stats.Copy.Mode = t.copyMode()
	quietStops()
	started := make(chan error, 1)
	go func() {
		// The OS thread stays locked for the whole trace and is never
		// unlocked: ptrace requests must come from the tracer thread, and
		// the launched child's PR_SET_PDEATHSIG fires when this thread
		// exits.
		runtime.LockOSThread()
		start := func() error { return t.start(launch) }
		if opts.Attach != 0 {
			start = func() error { return t.attachTo(opts.Attach) }
		}
		if err := start(); err != nil {
			t.closeEvents()
			started <- err
			close(t.done)
			return
		}
		started <- nil
		t.spin.off = spinOff() // after --pin=on pinned this thread
		t.spinStep.off = t.spin.off
		if t.events == nil || t.events.bell == nil {
			t.startBell() // attachTo started it
		}
		t.err = t.loop()
		t.closeEvents()
		close(t.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return t, nil
}

// Wait waits for every tracee to exit and returns the result.
func (t *Tracer) Wait() (Result, error) {
	<-t.done
	t.result.Refused = t.root.refused
	n, d := t.rec.Waited()
	t.result.Stats.WriterWaits, t.result.Stats.WriterWaitNS = n, d.Nanoseconds()
	return t.result, t.err
}

// Kill sends SIGKILL to every traced process (ptjit itself is being
// stopped: SIGTERM/SIGINT). Safe from any goroutine; Wait returns once the
// tracees are gone. Children born meanwhile are killed as they appear.
func (t *Tracer) Kill() {
	t.shared.mu.Lock()
	defer t.shared.mu.Unlock()
	t.shared.killing = true
	for pid := range t.shared.live {
		unix.Kill(pid, unix.SIGKILL)
	}
}

func (t *Tracer) setLive(pid int, on bool) {
	t.shared.mu.Lock()
	defer t.shared.mu.Unlock()
	if on {
		t.shared.live[pid] = true
		if t.shared.killing {
			unix.Kill(pid, unix.SIGKILL)
		}
	} else {
		delete(t.shared.live, pid)
	}
}

const ptraceOptions = unix.PTRACE_O_TRACESYSGOOD | unix.PTRACE_O_TRACECLONE | unix.PTRACE_O_TRACEFORK |
	unix.PTRACE_O_TRACEVFORK | unix.PTRACE_O_TRACEEXEC | unix.PTRACE_O_TRACESECCOMP |
	unix.PTRACE_O_TRACEEXIT | unix.PTRACE_O_EXITKILL

// ptraceOpts is opts with PTRACE_O_TRACEVFORKDONE under --soft-filter,
// which must know when a vfork parent runs again (filterVforkDone).
func (t *Tracer) ptraceOpts(opts int) int {
	if t.opts.SoftFilter && t.opts.SoftPT != nil {
		opts |= unix.PTRACE_O_TRACEVFORKDONE
	}
	return opts
}

// start runs launch and seizes the child.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) start(launch Launch) error {
	pinned := false
	if t.opts.Pin == PinOn {
		pinned = pinSelf() == nil // the child inherits the affinity
	}
	pid, release, err := launch()
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SEIZE, uintptr(pid), 0, uintptr(t.ptraceOpts(ptraceOptions)), 0, 0)
	if e != 0 {
		unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		unix.Wait4(pid, &ws, 0, nil)
		return &StartError{"PTRACE_SEIZE", e}
	}
	t.root.pid = pid
	t.eventsAdd(pid)
	t.result.Stats.Pinned = pinned
	p := &process{pid: pid, ppid: t.selfPID, helper: true, threads: map[int]*thread{}}
	p.space = t.newSpace(pid)
	th := &thread{tid: pid, proc: p}
	p.threads[pid] = th
	t.threads[pid] = th
	t.procs[pid] = p
	t.setLive(pid, true)
	if err := release(); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		return &StartError{"starting the program", err}
	}
	if t.opts.OnStart != nil {
		t.opts.OnStart(pid)
	}
	return nil
}

func (t *Tracer) newSpace(owner int) *space {
	sp := &space{owner: owner, refs: 1}
	sp.sink = &sink{t: t, sp: sp}
	sp.Space = NewSpace(sp.sink)
	sp.filter.on = t.soft != nil && t.opts.SoftFilter
	// Under W^X every store into code is seen: a store re-records the
	// pages it changed, and the rest of a large mapping keeps its bytes.
	sp.Space.WritesSeen = t.wxOn()
	// Until the process has the filter that stops every mprotect, a
	// call that takes PROT_EXEC away runs unseen.
	p := t.procs[owner]
	// a process with a seccomp filter of its own (a fork child, an exec)
	// hides no JIT code (ownfilter_linux_amd64.go)
	sp.filter.stepAll = sp.filter.on && p != nil && p.ownFilter
	sp.Space.RemovalUnseen = p == nil || !p.full.on
	if p != nil {
		sp.Space.Seen = append([]ival(nil), p.full.ranges...)
	}
	sp.namesStart()
	return sp
}

// loop is the event loop: one wait4 for every stop of every tracee.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) loop() error {
	for len(t.threads) > 0 || len(t.pending) > 0 || len(t.later.stops) > 0 {
		t.attachPoll()
		if len(t.threads) == 0 && len(t.pending) == 0 {
			break // detached
		}
		if q, ok := t.nextQueued(); ok {
			if t.bellStop(q.tid, q.ws) {
				continue
			}
			t0 := clock.Mono()
			t.handle(q.tid, q.ws)
			t.result.Stats.Stops++
			t.result.Stats.StopNS += clock.Mono() - t0
			continue
		}
		if len(t.threads) == 0 && len(t.later.stops) == 0 && t.prunePending() {
			break // nothing traced is left
		}
		var ws unix.WaitStatus
		// __WNOTHREAD: only this thread's tracees and children. perf
		// record (--pt=intel) is a child of another thread of ptjit and
		// must be reaped by its own exec.Cmd, not here.
		tid, err := t.waitStop(&t.spin, unix.WALL|unix.WNOTHREAD, &ws)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if errors.Is(err, unix.ECHILD) {
				break
			}
			return fmt.Errorf("wait4: %w", err)
		}
		if t.bellStop(tid, ws) {
			continue
		}
		t0 := clock.Mono()
		t.handle(tid, ws)
		t.result.Stats.Stops++
		t.result.Stats.StopNS += clock.Mono() - t0
	}
	// Anything still open (a tracee that vanished without an exit report)
	// ends now.
	at := clock.Now()
	for _, p := range t.procs {
		t.endProcess(p, -1, at)
	}
	t.proxyReapAll()
	return nil
}

// handle classifies one stop (classify, stop_linux_amd64.go) and
// dispatches on its kind; the thread is resumed, or left stopped on
// purpose (a group-stop, a thread waiting for the soft filter to open).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) handle(tid int, ws unix.WaitStatus) {
	defer t.detachReady() // attach_linux_amd64.go: detach once all are stopped
	if t.detachPark(tid, ws) {
		return // stopped for the detach
	}
	// every call a tracee completed before this stop is in the ring:
	// the Space takes them first (events_linux_amd64.go)
	t.drainEvents()
	th := t.threads[tid]
	if th == nil {
		if t.proxyStop(tid, ws) {
			return
		}
		t.unknownStop(tid, ws)
		return
	}
	th.filter.free = false
	opening := th.proc.space
	if !opening.filterOn() || !opening.filter.opening {
		opening = nil
	}
	kind, sig, s := t.classify(th, ws)
	t.dispatch(th, kind, sig, s)
	if opening != nil {
		// a thread of an opening space stopped: once none runs free,
		// the space opens (after this stop is handled)
		t.filterTryOpen(opening)
	}
}

// unknownStop handles a stop of a tid the tracer does not know yet.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) unknownStop(tid int, ws unix.WaitStatus) {
	kind, sig := classifyStatus(ws)
	if kind == stopExited || kind == stopKilled {
		if b, ok := t.newborn[tid]; ok && b.held {
			t.resume(b.parent.tid, 0)
		}
		delete(t.pending, tid)
		delete(t.newborn, tid)
		return
	}
	if b, ok := t.newborn[tid]; ok {
		delete(t.newborn, tid)
		t.adopt(tid, b, kind, sig)
		return
	}
	// A new tracee stopped before its parent's clone/fork event was
	// reported: hold it until then.
	t.pending[tid] = ws
}

// prunePending forgets the held new tracees (pending) that are gone
// without an exit report the loop saw, and reports whether none is left.
// Where the BPF events' doorbell is a child of the tracer, wait4 never
// fails with ECHILD, so a held tid whose process was killed before its
// parent's clone event (found: an attached process its own seccomp
// filter killed) would keep the loop waiting for ever.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) prunePending() bool {
	for tid := range t.pending {
		if s := procState(tid); s == 0 || s == 'X' {
			delete(t.pending, tid)
			delete(t.newborn, tid)
		}
	}
	return len(t.pending) == 0
}

// dispatch runs the handling of one kind of stop. Software PT sees the
// stop first (the soft* calls), then the tracker and its features.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) dispatch(th *thread, kind stopKind, sig int, s signalStop) {
	tid := th.tid
	switch kind {
	case stopExited, stopKilled:
		t.threadGone(th, kind, sig)
	case stopStepTrap:
		t.softStepTrap(th)
	case stopFilterFault:
		t.softSignal(th)
		t.filterFault(th, s.si.Addr)
	case stopWXFault, stopAliasFault:
		if kind == stopWXFault {
			var regs *unix.PtraceRegs
			if s.haveRIP {
				regs = &s.regs // read by classify in this stop: nothing ran since
			}
			t.wxFault(th, s.si.Addr, regs)
		} else {
			t.aliasFault(th, s.si.Addr)
		}
		t.softFaultDone(th)
		if t.threads[tid] != nil {
			t.resume(th.tid, 0) // ptjit's own protection: consumed
		}
	case stopSignal:
		if t.eventStop(th, sig) {
			t.attachStopped(th) // attached: W^X after an RWX call (attach_linux_amd64.go)
			t.resume(tid, 0)    // the BPF program's fallback stop: suppressed
			break
		}
		t.restoreSiginfo(th, sig, s.si)
		if sig > 0 && sig < len(t.shared.sigSeen) {
			t.shared.sigSeen[sig].Store(time.Now().UnixNano())
		}
		t.softSignal(th)
		if t.threads[tid] != nil {
			t.resume(th.tid, sig)
		}
	case stopGroup:
		listen(tid)
	case stopTrap, stopOther:
		t.resume(tid, 0)
	case stopVforkDone:
		t.filterVforkDone(th)
	case stopSeccomp:
		t.seccompEntry(th)
	case stopProgramTrace:
		t.programTrace(th)
	case stopSyscallExit:
		t.softSyscallExit(th)
		t.syscallExit(th)
	case stopClone, stopFork, stopVfork:
		t.cloneEvent(th, kind)
	case stopExec:
		t.softExec(th)
		t.execEvent(th)
	case stopExit:
		t.exitStop(th)
	}
}

// exitStop handles a PTRACE_EVENT_EXIT stop: the thread's name is
// recorded, its trace ends, and it is resumed to exit.
//
// Precondition: on the locked tracer thread; th is in its exit stop.
func (t *Tracer) exitStop(th *thread) {
	t.softExit(th)
	if th.recorded {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(th.proc.pid) + "/task/" + strconv.Itoa(th.tid) + "/comm"); err == nil {
			t.rec.ThreadName(th.tid, strings.TrimSuffix(string(b), "\n"))
		}
	}
	t.resume(th.tid, 0)
}

// resume continues a stopped thread, delivering sig; signals held while
// ptjit used the thread are sent to it again (resendHeld). ESRCH means it
// died meanwhile (SIGKILL); its exit report follows. A thread with a stop
// queued for the main loop (waitThread) stays stopped: the loop resumes it
// when it handles that stop.
func (t *Tracer) resume(tid, sig int) {
	if t.later.per[tid] > 0 {
		return
	}
	th := t.threads[tid]
	if th != nil && len(th.sig.held) > 0 {
		t.resendHeld(th)
	}
	if t.soft != nil && t.softEligible(th) {
		t.softResume(th, sig)
		return
	}
	t.cont(tid, sig)
}

// resumeCont continues a stopped thread with PTRACE_CONT (no stepping),
// delivering sig, as resume does.
func (t *Tracer) resumeCont(tid, sig int) {
	if t.later.per[tid] > 0 {
		return
	}
	if th := t.threads[tid]; th != nil && len(th.sig.held) > 0 {
		t.resendHeld(th)
	}
	t.cont(tid, sig)
}

// cont is PTRACE_CONT with sig; ESRCH (the thread died) is not worth a
// warning.
func (t *Tracer) cont(tid, sig int) {
	if err := unix.PtraceCont(tid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
		t.warnf("PTRACE_CONT %d: %v", tid, err)
	}
}

// listen leaves a group-stopped thread stopped but lets the kernel report
// the next event (SIGCONT, SIGKILL) — the PTRACE_SEIZE way of keeping
// SIGSTOP semantics.
func listen(tid int) {
	unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_LISTEN, uintptr(tid), 0, 0, 0, 0)
}

func (t *Tracer) threadGone(th *thread, kind stopKind, sig int) {
	at := clock.Now()
	p := th.proc
	delete(t.threads, th.tid)
	delete(p.threads, th.tid)
	if th.recorded {
		t.rec.ThreadExit(th.tid, at)
	}
	t.softGone(th, p.pid)
	t.filterThreadGone(p.space)
	t.kernelWriteGone(th)
	status := sig
	if kind == stopKilled {
		status = 128 + sig
	}
	if th.tid == p.pid {
		t.endProcess(p, status, at)
	}
}

// endProcess records a process's end; status < 0 means unknown.
func (t *Tracer) endProcess(p *process, status int, at clock.Stamp) {
	if _, ok := t.procs[p.pid]; !ok {
		return
	}
	delete(t.procs, p.pid)
	t.eventsRemove(p.pid)
	t.setLive(p.pid, false)
	for tid, th := range p.threads {
		// A leader's exit report comes last, but a thread whose report is
		// lost (it vanished in an exec) must not stay open.
		if th.recorded {
			t.rec.ThreadExit(tid, at)
		}
		t.softGone(th, p.pid)
		delete(t.threads, tid)
	}
	if p.recorded {
		if status < 0 {
			status = 128 + int(unix.SIGKILL)
		}
		t.rec.ProcessExit(p.pid, status, at)
	}
	t.dropSpace(p, at)
	if p.pid == t.root.pid && !t.root.done {
		t.root.done = true
		if status < 0 {
			status = 128 + int(unix.SIGKILL)
		}
		t.result.Status = status
	}
}

func (t *Tracer) dropSpace(p *process, at clock.Stamp) {
	sp := p.space
	p.space = nil
	if sp == nil {
		return
	}
	sp.refs--
	if sp.refs == 0 {
		t.pollNames(sp, at)
		sp.Clear(Stamp{At: at}.because("exit"))
		sp.namesClose()
		sp.inj.close()
		t.proxyClose(sp)
		sp.alias.close()
		sp.pages.close()
	}
}

// recordProcess records p (and its threads) once it runs the program.
func (t *Tracer) recordProcess(p *process, at clock.Stamp) {
	if p.recorded {
		return
	}
	p.recorded = true
	t.rec.ProcessStart(p.pid, p.ppid, at)
	t.result.Stats.Processes++
	for _, th := range p.threads {
		t.recordThread(th, at)
	}
}

func (t *Tracer) recordThread(th *thread, at clock.Stamp) {
	if th.recorded || !th.proc.recorded || th.helper {
		return
	}
	th.recorded = true
	t.rec.ThreadStart(th.tid, th.proc.pid, at)
	t.result.Stats.Threads++
}

func getRegs(tid int) (unix.PtraceRegs, error) {
	var r unix.PtraceRegs
	err := unix.PtraceGetRegs(tid, &r)
	return r, err
}

// cloneEvent: th created a thread or process. The child's own first stop
// may come before or after this report.
func (t *Tracer) cloneEvent(th *thread, kind stopKind) {
	msg, err := unix.PtraceGetEventMsg(th.tid)
	if err != nil {
		t.resume(th.tid, 0)
		return
	}
	child := int(msg)
	b := birth{parent: th, helper: th.proc.helper}
	flags := uint64(unix.SIGCHLD)
	if regs, err := getRegs(th.tid); err == nil {
		switch regs.Orig_rax {
		case unix.SYS_CLONE, unix.SYS_CLONE3:
			flags, b.words = cloneArgs(th, regs)
			t.wxCloneTID(th, b.words, child)
		case unix.SYS_VFORK:
			flags = unix.CLONE_VM | unix.CLONE_VFORK
		}
	}
	if kind == stopVfork {
		flags |= unix.CLONE_VM
		t.filterVfork(th)
	}
	b.thread = flags&unix.CLONE_THREAD != 0
	b.shareVM = !b.thread && flags&unix.CLONE_VM != 0
	if ws, ok := t.pending[child]; ok {
		delete(t.pending, child)
		k, sig := classifyStatus(ws)
		t.adopt(child, b, k, sig)
	} else {
		// The parent waits in this stop for the child's first when
		// W^X must make the child's control block writable first
		// (wx_tcb_linux_amd64.go): it could wait on its tid word.
		b.held = t.wxHoldParent(th, b)
		t.newborn[child] = b
		if b.held {
			return
		}
	}
	t.resume(th.tid, 0)
}

// adopt sets up a new tracee at its first stop and resumes it.
func (t *Tracer) adopt(tid int, b birth, kind stopKind, sig int) {
	at := clock.Now()
	parent := b.parent.proc
	th := &thread{tid: tid, helper: b.helper}
	t.threads[tid] = th
	if b.thread {
		th.proc = parent
		parent.threads[tid] = th
		t.recordThread(th, at)
	} else {
		// a fork copies the forking thread's filters (all threads of a
		// process with the full filter have it: TSYNC)
		p := &process{pid: tid, ppid: parent.pid, helper: parent.helper, threads: map[int]*thread{tid: th}, full: parent.full.clone(),
			ownFilter: parent.ownFilter}
		th.proc = p
		t.procs[tid] = p
		t.eventsAdd(tid)
		t.setLive(tid, true)
		if !p.helper {
			t.softFork(tid, parent.pid, b.parent.tid)
			t.recordProcess(p, at)
		}
		if b.shareVM && parent.space != nil {
			p.space = parent.space
			p.space.refs++
			if p.recorded {
				// Its code is the owner's until it execs (decoders look there).
				t.rec.SharesVM(tid, p.space.owner)
			}
		} else {
			p.space = t.newSpace(tid)
			// shared anonymous memory is the child's and the
			// parent's now: changed pages are no longer seen in
			// either alone (pagesRegister)
			p.space.pages.forked = true
			if parent.space != nil {
				parent.space.pages.forkedShared()
			}
			if !p.helper {
				// A fork copies the address space: record the copy's
				// executable memory as the child's own.
				if parent.space != nil && parent.space.filter.shown {
					// the kernel copied the parent's protections
					p.space.filter.shown = true
					p.space.filter.open = append([]ival(nil), parent.space.filter.open...)
				}
				fork := stampAt(th, 0, at).because("fork")
				t.syncSpaceView(p, parent.space, fork)
				if t.wxOn() && parent.space != nil {
					t.forkView(parent.space, p.space, fork)
				}
				if kind != stopExited && kind != stopKilled {
					t.filterForkChild(th, p.space)
				}
			}
		}
	}
	switch kind {
	case stopGroup:
		listen(tid)
	case stopExited, stopKilled:
		t.threadGone(th, kind, sig)
	default:
		if (kind == stopSignal || kind == stopTrap) && !th.helper {
			t.wxTCB(th, b.words, b.thread || b.shareVM)
		}
		t.resume(tid, 0)
	}
	if b.held {
		t.resume(b.parent.tid, 0)
	}
}

// execEvent: th's process runs a new program.
func (t *Tracer) execEvent(th *thread) {
	at := clock.Now()
	p := th.proc
	if msg, err := unix.PtraceGetEventMsg(th.tid); err == nil && int(msg) != th.tid {
		// A non-leader thread exec'd: it now has the leader's tid
		// (th.tid == p.pid); the old tid is gone without an exit report.
		if old := t.threads[int(msg)]; old != nil {
			delete(t.threads, old.tid)
			delete(p.threads, old.tid)
			if old.recorded {
				t.rec.ThreadExit(old.tid, at)
			}
		}
	}
	// Every other thread died in the exec; their exit reports, if any,
	// arrive for tids we no longer know and are ignored.
	for tid, o := range p.threads {
		if tid == th.tid {
			continue
		}
		delete(t.threads, tid)
		delete(p.threads, tid)
		if o.recorded {
			t.rec.ThreadExit(tid, at)
		}
	}
	pidStr := strconv.Itoa(p.pid)
	path, _ := os.Readlink("/proc/" + pidStr + "/exe")
	var argv []string
	if b, err := os.ReadFile("/proc/" + pidStr + "/cmdline"); err == nil {
		argv = strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	p.helper = false
	if p.pid == t.root.pid {
		t.shared.running.Store(true)
	}
	t.recordProcess(p, at)
	t.recordThread(th, at)
	t.rec.Exec(p.pid, path, argv, at)
	// The old image is gone (a vfork parent keeps the shared one).
	if p.space != nil {
		t.dropSpace(p, at)
	}
	p.space = t.newSpace(p.pid)
	if t.refuseExec(th, path) {
		return // killed in its exec stop: nothing of it ran or is recorded
	}
	t.syncSpace(p, stampAt(th, 0, at).because("exec"))
	t.proxyExec(th)
}

// syncSpace brings p's space in line with /proc/PID/maps.
func (t *Tracer) syncSpace(p *process, c Change) {
	t.syncSpaceView(p, p.space, c)
}

// syncSpaceView is syncSpace where view holds the program's view of the
// protections ptjit changed (a fork child's is its parent's).
func (t *Tracer) syncSpaceView(p *process, view *space, c Change) {
	if maps, ok := t.readView(p, view); ok {
		p.space.Sync(maps, fileReadable, c)
	}
}

// readView reads p's /proc/PID/maps and translates it into the program's
// view (see syncSpaceView); false when the process is gone.
func (t *Tracer) readView(p *process, view *space) ([]snapshot.Mapping, bool) {
	maps, err := snapshot.ReadMaps(p.pid)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			t.warnf("pid %d: %v", p.pid, err)
		}
		return nil, false
	}
	for _, m := range maps {
		if m.Path == "[vdso]" {
			p.space.vdso = [2]uint64{m.Start, m.End}
		}
	}
	if view != nil && (t.wxOn() || view.filter.on) {
		maps = view.viewMaps(maps)
	}
	return maps, true
}

// viewMaps translates /proc/PID/maps, which shows what ptjit enforces,
// into the program's view: W^X pages the kernel has RX (or RW in batch
// mode) are RWX to the program; JIT code the soft filter hides is
// executable to it. Each mapping is walked with the pieces it overlaps
// (found by binary search), and neighbouring parts with one protection
// stay one entry: the cost is in the mappings and pieces, never their
// product (a large mapping split into many versions).
func (sp *space) viewMaps(maps []snapshot.Mapping) []snapshot.Mapping {
	var out []snapshot.Mapping
	changed := func(p Piece) bool { return isWX(p.Prot) || sp.filter.on && sp.jitPiece(p) }
	for _, m := range maps {
		n := len(out)
		emit := func(s, e uint64, prot int) {
			if k := len(out) - 1; k >= n && out[k].End == s && out[k].Prot == prot {
				out[k].End = e
				return
			}
			seg := m
			seg.Start, seg.End, seg.Prot = s, e, prot
			if m.Inode != 0 {
				seg.Offset = m.Offset + (s - m.Start)
			}
			out = append(out, seg)
		}
		at := m.Start
		for k := sp.first(m.Start); k < len(sp.pieces) && sp.pieces[k].Start < m.End; k++ {
			p := sp.pieces[k]
			s, e := max(p.Start, m.Start), min(p.End, m.End)
			if at < s {
				emit(at, s, m.Prot)
			}
			prot := m.Prot
			if changed(p) || sp.aliasTwinBatch(s) {
				batch := sp.wx.batch.has(s &^ (pageSize - 1))
				hid := sp.filter.on && m.Prot == sp.wxProt(p.Prot)&^unix.PROT_EXEC
				if m.Prot == sp.wxProt(p.Prot) || hid || batch && m.Prot == p.Prot&^unix.PROT_EXEC {
					prot = p.Prot
				}
			}
			emit(s, e, prot)
			at = e
		}
		if at < m.End {
			emit(at, m.End, m.Prot)
		}
	}
	return out
}

// fileReadable: the decoder can read this executable mapping from its
// file — a regular file still there under that name, mapped read-only.
// A name ending in " (deleted)" is the kernel's mark of a removed file,
// or a live file's own name: the file at that name, if it is the mapped
// inode, tells which (found by the new-user trial: a file named so was
// recorded as copied code).
func fileReadable(m snapshot.Mapping) bool {
	if !m.IsFile() && !(strings.HasPrefix(m.Path, "/") && strings.HasSuffix(m.Path, " (deleted)")) || m.Prot&unix.PROT_WRITE != 0 {
		return false
	}
	var st unix.Stat_t
	if unix.Stat(m.Path, &st) != nil || st.Ino != m.Inode || st.Dev != m.Dev {
		return false
	}
	return st.Mode&unix.S_IFMT == unix.S_IFREG
}

// sink records for one space, each record stamped with the Change the
// Space passes, and reads new versions' bytes.
type sink struct {
	t  *Tracer
	sp *space
}

func (s *sink) NewRegion(start, end uint64, c Change) int64 {
	s.t.pollNames(s.sp, c.At)
	s.t.result.Stats.Regions++
	s.sp.pages.overlapping(start, end)
	return s.t.rec.NewRegion(s.sp.owner, start, end-start, c.At)
}

func (s *sink) EndRegion(id int64, c Change) {
	s.t.pollNames(s.sp, c.At)
	s.sp.pages.forget(id)
	s.t.rec.EndRegion(id, c.At)
}

func (s *sink) AddVersion(region int64, start, end uint64, prot int, c Change) int64 {
	s.t.pollNames(s.sp, c.At)
	t := s.t
	// Read through a stopped thread of the space when there is one.
	pid := s.sp.owner
	if th := t.threads[c.Via]; th != nil && th.proc != nil && th.proc.space == s.sp {
		pid = th.tid
	}
	t.result.Stats.Versions++
	v := db.Version{Region: region, PID: s.sp.owner, TID: c.TID, Addr: start, Size: end - start,
		At: c.At, Cause: c.Cause, IP: c.IP, ByPtjit: false}
	if c.data.covers(start, end) {
		return t.eventVersion(s.sp, v, c.data)
	}
	if c.zero.s < c.zero.e && c.zero.s <= start && end <= c.zero.e {
		id, _, _ := t.rec.AddVersionSparse(v, nil, nil) // fresh memory: zeros (Change.zero)
		return id
	}
	if id, ok := t.pagesVersion(s.sp, pid, v, prot, func() int64 { return t.readVersion(pid, v) }); ok {
		return id
	}
	return t.readVersion(pid, v)
}

// readVersion records v with all its bytes, read through pid.
func (t *Tracer) readVersion(pid int, v db.Version) int64 {
	t.result.Stats.Bytes += int64(v.Size)
	if v.Size > db.ChunkSize || v.Size >= fileSparseMin {
		// a large mapping is read and queued a chunk at a time, never
		// held whole, and a version of fileSparseMin or more may be a
		// shared file's with holes, which are not read (versionRuns)
		read := func(addr uint64, b []byte) error { return snapshot.ReadMem(pid, addr, b) }
		var id int64
		var err error
		if pop, ok := versionRuns(pid, v.Addr, v.Addr+v.Size); ok {
			// the pages never written are zeros: neither read nor hashed
			t.result.Stats.Bytes -= int64(v.Size - pop.bytes())
			runs := make([]db.AddrRun, len(pop))
			for i, r := range pop {
				runs[i] = db.AddrRun{Addr: r.s, Size: r.e - r.s}
			}
			id, _, err = t.rec.AddVersionSparse(v, runs, read)
		} else {
			id, _, err = t.rec.AddVersionRead(v, read)
		}
		if err != nil {
			t.result.Stats.ReadErrors++
			t.warnf("%v (recorded as zeros)", err)
		}
		return id
	}
	v.Data = db.Buffer(int(v.Size))
	if err := snapshot.ReadMem(pid, v.Addr, v.Data); err != nil {
		t.result.Stats.ReadErrors++
		t.warnf("%v (recorded as zeros)", err)
	}
	id, _ := t.rec.AddVersion(v)
	return id
}

func (s *sink) SplitVersion(region, from int64, fromStart, start, end uint64, prot int, c Change) int64 {
	s.t.pollNames(s.sp, c.At)
	t := s.t
	t.result.Stats.Versions++
	id, _ := t.rec.SplitVersion(db.Version{Region: region, PID: s.sp.owner, TID: c.TID, Addr: start, Size: end - start,
		At: c.At, Cause: c.Cause, IP: c.IP, ByPtjit: false}, from, fromStart)
	return id
}

func (s *sink) EndVersion(id int64, inexact bool, c Change) {
	s.t.pollNames(s.sp, c.At)
	if inexact {
		s.t.rec.EndVersionInexact(id, c.At)
		return
	}
	s.t.rec.EndVersion(id, c.At)
}

func (s *sink) AddFile(start, end uint64, prot int, f FileInfo, c Change) int64 {
	t := s.t
	t.result.Stats.FileMaps++
	t.softMmap(s.sp.owner, c.TID, start, end, prot, f)
	return t.rec.FileMap(db.FileMapping{PID: s.sp.owner, TID: c.TID, Addr: start, Size: end - start, Offset: f.Offset,
		Prot: prot, Path: f.Path, Dev: f.Dev, Inode: f.Inode, BuildID: snapshot.BuildID(f.Path, f.Dev, f.Inode),
		At: c.At, Cause: c.Cause, IP: c.IP})
}

func (s *sink) EndFile(id int64, c Change) {
	s.t.softInvalidate()
	s.t.rec.FileUnmap(id, c.At)
}

// stampAt is the Stamp of a record th makes at ip, at: th is recorded
// and read through.
func stampAt(th *thread, ip uint64, at clock.Stamp) Stamp {
	return Stamp{At: at, IP: ip, TID: th.tid, Via: th.tid}
}

// PID returns the pid of the launched program.
func (t *Tracer) PID() int { return t.root.pid }

// SignalSeen reports whether sig reached a tracee (a signal-delivery-stop
// of the program's own signal) at or after since. Safe from any goroutine.
func (t *Tracer) SignalSeen(sig syscall.Signal, since time.Time) bool {
	if sig <= 0 || int(sig) >= len(t.shared.sigSeen) {
		return false
	}
	return t.shared.sigSeen[sig].Load() >= since.UnixNano()
}

// Signal sends sig to the launched program's process, as kill(1) of its
// pid would, and reports whether it did: not before the program runs (the
// launcher is ptjit's own; Kill is the way to stop it). Safe from any
// goroutine.
func (t *Tracer) Signal(sig syscall.Signal) bool {
	if !t.shared.running.Load() {
		return false
	}
	t.shared.mu.Lock()
	defer t.shared.mu.Unlock()
	if !t.shared.live[t.root.pid] || t.shared.killing {
		return false
	}
	return unix.Kill(t.root.pid, sig) == nil
}

// forkView gives a forked child's space the parent's view of W^X pages:
// /proc/PID/maps shows what ptjit enforces (RX, or RW for batch pages),
// the program believes RWX.
func (t *Tracer) forkView(parent, child *space, fork Change) {
	for _, pc := range parent.Pieces() {
		if isWX(pc.Prot) {
			child.Protect(pc.Start, pc.End, pc.Prot, fork)
		}
	}
	if len(parent.alias.shared) > 0 {
		// shared mappings stay shared (and write-protected) in the child
		child.alias.shared = append([]sharedMap(nil), parent.alias.shared...)
	}
	if len(parent.wx.kw) > 0 {
		w := child.wxs()
		w.kw = append([]ival(nil), parent.wx.kw...)
		w.words = append([]ival(nil), parent.wx.words...)
		for page := range parent.wx.opened {
			w.opened[page] = true
		}
	}
	if !parent.wx.batch.empty() {
		w := child.wxs()
		w.batch = parent.wx.batch.clone()
		for page, bp := range parent.wx.batch.pages {
			if !bp.alias {
				child.Protect(page, page+pageSize, protRWX, fork)
			}
		}
	}
	if len(parent.alias.open) > 0 {
		// the child's alias pages are writable and its twins not
		// executable, as the parent's
		child.alias.open = maps.Clone(parent.alias.open)
	}
}
