package softpt

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"

	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/x86"
)

// flushAt is the size at which a thread's trace bytes are written to
// perf.data as one AUXTRACE buffer.
const flushAt = 64 << 10

// Session is one software PT recording: a Thread per traced thread, their
// packets written to a perf.data in the layout perf uses for a per-thread
// intel_pt//u recording, and optionally the ground truth (every instruction
// actually executed, "TID 0xIP" per line, in execution order per thread).
//
// Its methods are called from the tracker's goroutine only.
type Session struct {
	cfg     Config
	w       *perf.PerfDataWriter
	gtFile  *os.File
	gt      *bufio.Writer
	threads map[int]*sessionThread
	steps   uint64
	mtc     uint64 // MTC bytes of threads that ended
	lastTSC uint64 // latest time any call carried
	bytes   uint64
	closed  bool
	gtPath  string
	onErr   func(error) // Options.OnError
	gtErr   error       // the ground truth's first write error

	// Per-cpu layout (Options.Layout == LayoutPerCPU).
	perCPU   bool
	cpus     []*vcpu
	cpuRd    *cpuReader // real placement; nil for the deterministic one
	workload int        // the first thread's pid: every AUXTRACE record's tid, as perf writes it
	nthreads int        // threads started so far (placement order)
	quantum  uint64     // placeQuantum (tests make it small)
}

type sessionThread struct {
	pid int
	th  *Thread

	// Per-cpu layout only.
	ord       int    // start order, for the deterministic placement
	cpu       int    // the CPU the thread is on, -1 when on none
	nextIP    uint64 // where the thread resumes (the FUP of a preemption)
	preempted bool   // a switch stopped its tracing: it resumes with TIP.PGE at its next instruction
}

// vcpu is one virtual CPU of a per-cpu recording: its AUX queue's pending
// bytes and the task it runs.
type vcpu struct {
	buf      []byte
	pid, tid int  // the task on the CPU; 0, 0 for one not traced (idle)
	started  bool // ITRACE_START written
}

// Layout is how a Session lays out its perf.data.
type Layout string

// The layouts of ptjit run --soft-layout.
const (
	// LayoutPerThread: one AUX queue per thread (cpu -1), what perf
	// record --per-thread writes. Each queue holds one thread's trace.
	LayoutPerThread Layout = "per-thread"
	// LayoutPerCPU: one AUX queue per CPU, what perf record -e
	// intel_pt//u -- PROGRAM writes on hardware: the threads that ran on a
	// CPU share its queue, and context-switch records tell them apart.
	LayoutPerCPU Layout = "per-cpu"
)

// ParseLayout parses --soft-layout.
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case LayoutPerThread, LayoutPerCPU:
		return l, nil
	}
	return "", fmt.Errorf("--soft-layout: %q is not per-thread or per-cpu", s)
}

// placeQuantum is how many instructions (of all threads) a thread stays on
// a CPU under the deterministic placement before all threads move on by
// one CPU.
const placeQuantum = 3000

// Options name the files of a Session.
type Options struct {
	PerfData    string   // path of the perf.data to write
	GroundTruth string   // path of the ground-truth file, or ""
	Cmdline     []string // the traced command, for perf.data's cmdline feature
	// OnError, when set, is called once per file at its first write error
	// (disk full, I/O error), when it happens; the session then writes
	// nothing more to that file and Close returns the error.
	OnError func(error)
	// Layout is the perf.data layout (LayoutPerThread when "").
	Layout Layout
	// CPUs, with LayoutPerCPU: 0 places each thread, at each step, on the
	// CPU it really ran on (/proc/TID/stat), of runtime.NumCPU(); N > 0
	// places threads on N virtual CPUs deterministically: thread number k
	// (in start order) runs on CPU (k + n/3000) mod N after n instructions
	// of all threads, so that threads share CPUs and migrate in every
	// run. A thread whose real CPU cannot be read is placed by the same
	// rule.
	CPUs int
}

// PerfConfig returns the perf.data configuration that describes traces
// generated with cfg.
func PerfConfig(cfg Config, cmdline []string) perf.PerfDataConfig {
	return perf.PerfDataConfig{
		MTC:       cfg.MTC,
		MTCPeriod: cfg.MTCFreq,
		NoRetComp: !cfg.RetCompression,
		TSCCTCN:   uint32(max(cfg.CTCRatio, 1)),
		TSCCTCD:   1,
		Cmdline:   cmdline,
	}
}

// NewSession creates the session's files.
func NewSession(cfg Config, opts Options) (*Session, error) {
	if cfg.PSBPeriod <= 0 {
		cfg.PSBPeriod = 4096
	}
	if cfg.CTCRatio == 0 {
		cfg.CTCRatio = 1
	}
	pcfg := PerfConfig(cfg, opts.Cmdline)
	perCPU := opts.Layout == LayoutPerCPU
	var cpus *cpuReader
	if perCPU {
		if opts.CPUs <= 0 {
			opts.CPUs = runtime.NumCPU()
			cpus = newCPUReader()
		}
		pcfg.PerCPU, pcfg.NrCPUs = true, opts.CPUs
	}
	w, err := perf.CreatePerfData(opts.PerfData, pcfg)
	if err != nil {
		return nil, err
	}
	w.SetOnError(opts.OnError)
	s := &Session{cfg: cfg, w: w, threads: make(map[int]*sessionThread), gtPath: opts.GroundTruth, onErr: opts.OnError,
		perCPU: perCPU, cpuRd: cpus, quantum: placeQuantum}
	if perCPU {
		for range opts.CPUs {
			s.cpus = append(s.cpus, &vcpu{})
		}
	}
	if opts.GroundTruth != "" {
		f, err := os.Create(opts.GroundTruth)
		if err != nil {
			w.Close()
			return nil, err
		}
		s.gtFile, s.gt = f, bufio.NewWriterSize(f, 1<<20)
	}
	return s, nil
}

// Comm records a thread's name; exec marks the name change of an exec.
func (s *Session) Comm(pid, tid int, name string, exec bool, tsc uint64) {
	s.onCPUOf(tid)
	s.w.Comm(pid, tid, name, exec, tsc)
}

// Mmap records a file-backed executable mapping.
func (s *Session) Mmap(m *perf.PerfMmap, tsc uint64) { s.w.Mmap2(m, tsc) }

// StartThread begins tracing a thread (tracing stays disabled until
// Enable: the thread is in the kernel).
func (s *Session) StartThread(pid, tid int, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	if _, ok := s.threads[tid]; ok {
		return
	}
	s.threads[tid] = &sessionThread{pid: pid, th: NewThread(s.cfg), ord: s.nthreads, cpu: -1}
	if s.nthreads == 0 {
		s.workload = pid
	}
	s.nthreads++
	if !s.perCPU {
		// Per-cpu: one ITRACE_START per CPU, when a thread first runs
		// there (place).
		s.w.ItraceStart(pid, tid, tsc)
	}
}

func (s *Session) thread(tid int) *Thread {
	st := s.threads[tid]
	if st == nil {
		return nil
	}
	return st.th
}

// Enabled reports whether tid is traced and enabled.
func (s *Session) Enabled(tid int) bool {
	th := s.thread(tid)
	return th != nil && th.Enabled()
}

// Enable resumes tracing of tid at ip (TIP.PGE).
func (s *Session) Enable(tid int, ip, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	if st := s.threads[tid]; st != nil {
		s.place(tid, st, ip, tsc)
		st.preempted = false
		st.th.Enable(ip, tsc)
		st.nextIP = ip
	}
}

// Interrupt records that tid entered the kernel before the instruction at
// ip (FUP, TIP.PGD).
func (s *Session) Interrupt(tid int, ip, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	if st := s.threads[tid]; st != nil {
		st.preempted = false // now stopped by the kernel entry itself
		if st.th.Enabled() {
			s.place(tid, st, ip, tsc)
		}
		st.th.Interrupt(ip, tsc)
		s.maybeFlush(tid, st.th)
	}
}

// Sync writes a PSB+ into tid's trace before the instruction at ip, if
// tid is traced: its TSC gives the decoder the time from here on. The
// tracker calls it where the code tid runs changed since its last step
// (another thread's store into code, recorded as a version): the
// instruction about to run may run that change, and without a timing
// event the decoder would still look code up at the time of the thread's
// last branch, before the change.
func (s *Session) Sync(tid int, ip, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	st := s.threads[tid]
	if st == nil || !st.th.Enabled() {
		return
	}
	th := s.resume(tid, ip, tsc)
	if th == nil {
		return
	}
	th.psbPlus(ip, tsc)
	s.maybeFlush(tid, th)
}

// Disable records that tid entered the kernel for good (TIP.PGD).
func (s *Session) Disable(tid int, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	if st := s.threads[tid]; st != nil {
		st.preempted = false
		if st.th.Enabled() {
			s.place(tid, st, st.nextIP, tsc)
		}
		st.stop(tsc)
	}
}

// stop ends the thread's tracing for good where it is: before the
// instruction at nextIP, which it never executes (FUP there and TIP.PGD,
// as a CPU reports the interrupt that takes a thread away), or with a
// bare TIP.PGD when that is not known. Without the FUP a decoder would run
// on from the last IP to the next branch, showing instructions the thread
// never executed (a thread killed, or killed by a fault, mid-step).
func (st *sessionThread) stop(tsc uint64) {
	if st.nextIP != 0 {
		st.th.Interrupt(st.nextIP, tsc)
		return
	}
	st.th.Disable(tsc)
}

// Step records that in retired on tid and execution went on at next.
func (s *Session) Step(tid int, in *x86.Insn, next, tsc uint64) {
	s.retire(tid, in, next, tsc, func(th *Thread) { th.Step(in, next, tsc) })
}

// Leave records that in retired on tid and execution left the traced
// range at next (TIP.PGD; see Thread.Leave).
func (s *Session) Leave(tid int, in *x86.Insn, next, tsc uint64) {
	s.retire(tid, in, next, tsc, func(th *Thread) { th.Leave(in, next, tsc) })
}

// retire counts an instruction that retired on a traced, enabled thread,
// writes its ground-truth line and lets emit make its packets.
func (s *Session) retire(tid int, in *x86.Insn, next, tsc uint64, emit func(*Thread)) {
	s.lastTSC = max(s.lastTSC, tsc)
	th := s.resume(tid, in.IP, tsc)
	if th == nil {
		return
	}
	s.steps++
	s.truth(tid, in.IP)
	emit(th)
	s.threads[tid].nextIP = next
	s.maybeFlush(tid, th)
}

// StepExit records that in, a syscall that does not return to the
// instruction after it (exit, exit_group, execve), retired on tid.
func (s *Session) StepExit(tid int, in *x86.Insn, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	th := s.resume(tid, in.IP, tsc)
	if th == nil {
		return
	}
	s.steps++
	s.truth(tid, in.IP)
	th.StepExit(in, tsc)
}

func (s *Session) truth(tid int, ip uint64) {
	if s.gt == nil {
		return
	}
	var line [48]byte
	b := strconv.AppendInt(line[:0], int64(tid), 10)
	b = append(b, " 0x"...)
	b = strconv.AppendUint(b, ip, 16)
	b = append(b, '\n')
	if _, err := s.gt.Write(b); err != nil && s.gtErr == nil {
		s.gtErr = fmt.Errorf("%s: %w", s.gtPath, err)
		if s.onErr != nil {
			s.onErr(s.gtErr)
		}
	}
}

func (s *Session) maybeFlush(tid int, th *Thread) {
	if len(th.buf) >= flushAt {
		s.flushThread(tid, th)
	}
}

// flushThread writes the thread's pending bytes: per-thread, to its queue;
// per-cpu, to the pending bytes of the CPU it is on, written to that CPU's
// queue when they are many.
func (s *Session) flushThread(tid int, th *Thread) {
	if s.perCPU {
		if st := s.threads[tid]; st != nil && st.cpu >= 0 {
			s.takeInto(st.cpu, th)
			if len(s.cpus[st.cpu].buf) >= flushAt {
				s.flushCPU(st.cpu)
			}
		}
		return
	}
	s.auxTrace(tid, -1, th.Take())
}

func (s *Session) auxTrace(tid, cpu int, b []byte) {
	if len(b) == 0 {
		return
	}
	s.w.AuxTrace(tid, cpu, s.lastTSC, b)
	if s.w.Err() == nil {
		s.bytes += uint64(len(b)) // what the file holds, or its buffer
	}
}

// EndThread ends a thread whose parent is not known to the caller (an
// exit, or a thread that vanished in an exec).
func (s *Session) EndThread(pid, tid int, tsc uint64) {
	s.ExitThread(tid, pid, pid, tsc)
}

// Fork records a new process (a fork or vfork child).
func (s *Session) Fork(pid, ppid, ptid int, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	s.w.Fork(pid, ppid, pid, ptid, tsc)
}

// ExitThread ends a thread: tracing is disabled, its remaining bytes are
// written, and an EXIT record follows.
func (s *Session) ExitThread(tid, ppid, ptid int, tsc uint64) {
	s.lastTSC = max(s.lastTSC, tsc)
	st := s.threads[tid]
	if st == nil {
		return
	}
	if st.th.Enabled() {
		s.place(tid, st, st.nextIP, tsc)
	}
	st.stop(tsc)
	s.flushThread(tid, st.th)
	s.onCPUOf(tid)
	s.w.Exit(st.pid, ppid, tid, ptid, tsc)
	if s.perCPU && st.cpu >= 0 {
		// The kernel switches a dead thread out after its EXIT.
		s.switchOut(st.cpu, tid, st, 0, 0, tsc)
	}
	s.mtc += st.th.MTCBytes()
	delete(s.threads, tid)
	if s.cpuRd != nil {
		s.cpuRd.forget(tid)
	}
}

// Flush writes every thread's pending bytes and the ground truth to disk,
// so that a crash loses nothing recorded so far.
func (s *Session) Flush() error {
	for tid, st := range s.threads {
		s.flushThread(tid, st.th)
	}
	for c := range s.cpus {
		s.flushCPU(c)
	}
	s.w.FinishedRound()
	if err := s.w.Flush(); err != nil {
		return err
	}
	if s.gt != nil {
		if err := s.gt.Flush(); err != nil {
			return fmt.Errorf("ground truth: %w", err)
		}
	}
	return nil
}

// Stats returns the instructions stepped, the trace bytes written, and how
// many of those bytes are MTC packets, so far.
func (s *Session) Stats() (steps, bytes, mtc uint64) {
	mtc = s.mtc
	for _, st := range s.threads {
		mtc += st.th.MTCBytes()
	}
	return s.steps, s.bytes, mtc
}

// Close disables every thread still traced at tsc, writes everything and
// closes the files.
func (s *Session) Close(tsc uint64) error {
	s.lastTSC = max(s.lastTSC, tsc)
	if s.closed {
		return nil
	}
	s.closed = true
	for tid, st := range s.threads {
		if st.th.Enabled() {
			s.place(tid, st, st.nextIP, tsc)
		}
		st.stop(tsc)
		s.flushThread(tid, st.th)
	}
	for c := range s.cpus {
		s.flushCPU(c)
	}
	err := s.w.Close()
	if s.cpuRd != nil {
		s.cpuRd.close()
	}
	if s.gt != nil {
		if e := s.gt.Flush(); e != nil && err == nil {
			err = fmt.Errorf("ground truth: %w", e)
		}
		if e := s.gtFile.Close(); e != nil && err == nil {
			err = e
		}
	}
	return err
}
