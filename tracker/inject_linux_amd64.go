package tracker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Acting in the tracee: syscalls ptjit runs in a stopped thread (W^X,
// writable aliases, the soft filter and the mem filter of procmem use them)
// and writes through /proc/PID/mem. An injected syscall executes a syscall
// instruction already in the process (found in the vdso), never injected
// code.

// injectState is what one address space keeps for acting in it
// (space.inj).
type injectState struct {
	sysAddr uint64   // address of a syscall instruction (in the vdso)
	mem     *os.File // /proc/PID/mem, read-write
}

// close releases the space's /proc/PID/mem.
func (s *injectState) close() {
	if s.mem != nil {
		s.mem.Close()
		s.mem = nil
	}
}

// InjectError is a syscall ptjit could not run in the tracee.
type InjectError struct {
	TID int
	Nr  int
	Err error
}

func (e *InjectError) Error() string {
	return fmt.Sprintf("tid %d: injecting syscall %d: %v", e.TID, e.Nr, e.Err)
}
func (e *InjectError) Unwrap() error { return e.Err }

var errNoSyscallInsn = errors.New("no syscall instruction found in the vdso")

// syscallInsn finds a syscall instruction (0f 05) in the space's vdso: the
// injected syscalls execute code already in the process, never injected
// code.
func (t *Tracer) syscallInsn(th *thread) (uint64, error) {
	sp := th.proc.space
	if sp.inj.sysAddr != 0 {
		return sp.inj.sysAddr, nil
	}
	lo, hi := sp.vdso[0], sp.vdso[1]
	if hi <= lo {
		return 0, errNoSyscallInsn
	}
	b := make([]byte, hi-lo)
	if err := snapshot.ReadMem(th.tid, lo, b); err != nil {
		return 0, err
	}
	i := bytes.Index(b, []byte{0x0f, 0x05})
	if i < 0 {
		return 0, errNoSyscallInsn
	}
	sp.inj.sysAddr = lo + uint64(i)
	return sp.inj.sysAddr, nil
}

// inject makes th run syscall nr(args), at most five arguments, and
// returns its result. th must be
// stopped in a signal-delivery-stop, a syscall-exit-stop or, for a new
// thread, its first stop (the attach PTRACE_EVENT_STOP: wxTCB); its registers
// are restored afterwards. Signals that arrive meanwhile are held and
// sent again, with their siginfo, when th resumes (signals_linux_amd64.go). When th dies meanwhile (or is dying, or
// vanishes with its group) the error matches ErrThreadGone
// (waitstop_linux_amd64.go); on any other failure th's registers are
// restored, so that a failed injection never runs on in the program. A
// call the program's own seccomp filters would kill, trap or fail is not
// run (refusedBy): the error is a *FilterRefusedError.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) inject(th *thread, nr int, args ...uint64) (int64, error) {
	if len(args) > 5 {
		return 0, &InjectError{th.tid, nr, errors.New("more than five arguments (the sixth carries InjectCookie)")}
	}
	if th.dying || t.threads[th.tid] != th {
		return 0, &InjectError{th.tid, nr, &ThreadGoneError{th.tid, "exiting"}}
	}
	addr, err := t.syscallInsn(th)
	if err != nil {
		return 0, &InjectError{th.tid, nr, goneErr(th.tid, err)}
	}
	var a6 [6]uint64
	copy(a6[:], args)
	a6[5] = InjectCookie
	if err := t.refusedBy(th, addr, nr, a6); err != nil {
		return 0, &InjectError{th.tid, nr, err}
	}
	saved, err := getRegs(th.tid)
	if err != nil {
		return 0, &InjectError{th.tid, nr, goneErr(th.tid, err)}
	}
	fail := func(err error) (int64, error) {
		err = goneErr(th.tid, err)
		if !errors.Is(err, ErrThreadGone) {
			unix.PtraceSetRegs(th.tid, &saved)
		}
		return 0, &InjectError{th.tid, nr, err}
	}
	r := callRegs(saved, addr, nr, args)
	if err := unix.PtraceSetRegs(th.tid, &r); err != nil {
		return 0, &InjectError{th.tid, nr, goneErr(th.tid, err)}
	}
	t.result.Stats.Injected++
	// One PTRACE_SINGLESTEP over the syscall instruction: ptjit's filters
	// let the call run (InjectCookie), and the step's trap comes when it
	// returns, with RIP past the instruction. A signal that arrives first
	// is held and the step retried; a seccomp stop (a filter of the
	// program's own that traces the call) is passed.
	var res unix.PtraceRegs
	for res.Rip != addr+2 {
		if err := unix.PtraceSingleStep(th.tid); err != nil {
			return fail(err)
		}
		kind, sig, err := t.waitThread(th)
		if err != nil {
			return 0, &InjectError{th.tid, nr, err}
		}
		if kind != stopSignal {
			continue // a seccomp stop, a trap or group stop
		}
		if si, err := getSiginfo(th.tid); sig != int(unix.SIGTRAP) || err != nil || si.Code != trapTrace && si.Code != trapBrkpt {
			t.hold(th, sig) // not the step's own trap: SI_USER, SI_TKILL, another signal
			if sig != int(unix.SIGTRAP) && kernelFault(sig, si, err) {
				// The kernel faults the thread before it runs
				// anything (an rseq area it cannot write): the
				// step would fault again for ever. The signal
				// is the program's, delivered on resume.
				return fail(fmt.Errorf("the thread takes signal %d (si_code %d) before it can run the call", sig, si.Code))
			}
			continue
		}
		// The step's trap: done once the call ran (RIP past it).
		if res, err = getRegs(th.tid); err != nil {
			return fail(err)
		}
	}
	if err := unix.PtraceSetRegs(th.tid, &saved); err != nil {
		return 0, &InjectError{th.tid, nr, goneErr(th.tid, err)}
	}
	ret := int64(res.Rax)
	if ret < 0 && ret >= -4095 {
		return ret, &InjectError{th.tid, nr, unix.Errno(-ret)}
	}
	return ret, nil
}

// callRegs is base made ready to run syscall nr(args) at the syscall
// instruction at addr: arguments in their registers, r9 (the sixth)
// InjectCookie, orig_rax -1 (no restart of an interrupted call).
func callRegs(base unix.PtraceRegs, addr uint64, nr int, args []uint64) unix.PtraceRegs {
	r := base
	r.Rip = addr
	r.Rax = uint64(nr)
	r.Orig_rax = ^uint64(0)
	dst := []*uint64{&r.Rdi, &r.Rsi, &r.Rdx, &r.R10, &r.R8}
	for i, a := range args {
		*dst[i] = a
	}
	r.R9 = InjectCookie
	return r
}

// kernelFault reports whether sig with siginfo si (err: none read) is a
// synchronous fault the kernel raised (SIGSEGV, SIGBUS, SIGILL, SIGFPE with
// si_code > 0, SI_KERNEL included), not a signal someone sent.
func kernelFault(sig int, si siginfo, err error) bool {
	switch unix.Signal(sig) {
	case unix.SIGSEGV, unix.SIGBUS, unix.SIGILL, unix.SIGFPE:
		return err == nil && si.Code > 0
	}
	return false
}

// protect changes the tracee's actual protection of [start, end) by an
// injected mprotect and records it. The process gets a filter that stops
// every mprotect of that memory first (ptjit manages it from now on).
func (t *Tracer) protect(th *thread, start, end uint64, prot int, reason string) error {
	t.ensureProtectSeen(th, start, end)
	th.proc.space.wx.gen++ // (threadWX.staleAgain) also when the call failed: it may have changed a prefix
	if err := t.mprotectIn(th, start, end, prot); err != nil {
		return err
	}
	t.rec.ProtChange(db.ProtChange{PID: th.proc.space.owner, At: clock.Now(), Addr: start, Size: end - start,
		Prot: prot, Reason: reason})
	return nil
}

// mprotectIn runs mprotect(start, end-start, prot) in th's process: in
// its space's proxy or injected into th, whichever --proxy and the costs
// measured so far say (proxypick.go).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) mprotectIn(th *thread, start, end uint64, prot int) error {
	sp := th.proc.space
	if t.viaProxy(th) {
		t0 := clock.Mono()
		if ret, ok := t.proxyCall(th, unix.SYS_MPROTECT, start, end-start, uint64(prot)); ok {
			if !th.proc.ownFilter { // not auto's choice
				t.pick.observe(true, time.Duration(clock.Mono()-t0))
			}
			if ret < 0 && ret >= -4095 {
				return &InjectError{th.tid, unix.SYS_MPROTECT, unix.Errno(-ret)}
			}
			return nil
		}
	}
	if sp.proxy.pid != 0 && t.pick.gaveUp {
		t.proxyClose(sp) // injections were the cheaper (proxypick.go)
	}
	timed := sp.proxy.pid != 0 // a choice auto still makes
	t0 := clock.Mono()
	_, err := t.inject(th, unix.SYS_MPROTECT, start, end-start, uint64(prot))
	if timed {
		t.pick.observe(false, time.Duration(clock.Mono()-t0))
	}
	return err
}

// memWrite writes data at addr of th's memory through /proc/PID/mem,
// which writes through the page protection of private memory. The kernel
// does not force a write into a shared mapping that is not writable (an
// RWX MAP_SHARED view W^X keeps executable-only: EIO); there the bytes go
// to the mapped file instead (sharedWrite).
func (t *Tracer) memWrite(th *thread, addr uint64, data []byte) error {
	w := &th.proc.space.inj
	if w.mem == nil {
		f, err := os.OpenFile("/proc/"+strconv.Itoa(th.tid)+"/mem", os.O_RDWR, 0)
		if err != nil {
			return err
		}
		w.mem = f
	}
	_, err := w.mem.WriteAt(data, int64(addr))
	if err != nil && !errors.Is(goneErr(th.tid, err), ErrThreadGone) {
		if serr := sharedWrite(th.proc.pid, addr, data); serr == nil {
			return nil
		}
	}
	return err
}

// sharedWrite writes data at addr of process pid, which lies in one
// shared file mapping, through the file: the mapping's entry in
// /proc/PID/map_files (which takes CAP_SYS_ADMIN), at the file offset of
// addr. The mapping sees the bytes at once (the same page cache pages).
func sharedWrite(pid int, addr uint64, data []byte) error {
	m, ok := mapAt(pid, addr)
	if !ok {
		return errors.New("not mapped")
	}
	if !m.Shared || m.Inode == 0 || addr+uint64(len(data)) > m.End {
		return errors.New("not within one shared file mapping")
	}
	f, err := os.OpenFile(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End), os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(data, int64(m.Offset+addr-m.Start))
	return err
}
