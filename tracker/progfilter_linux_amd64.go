package tracker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The program's seccomp filters, read and run before ptjit injects a call
// (tracker/doc.go, "Seccomp filters of the program's"). A call ptjit
// injects into a thread passes through every filter that thread runs
// under. Where those include filters ptjit did not install — the
// program's own (process.ownFilter), or any in an attach (Tracer.att)
// — a call the filters would kill, trap or fail is not
// run at all: the kernel's verdict is computed here, from the filters
// PTRACE_SECCOMP_GET_FILTER hands the tracer, in golang.org/x/net/bpf's
// classic BPF machine, on the exact seccomp_data the kernel would build
// (the call's number, AUDIT_ARCH_X86_64, the address after the syscall
// instruction, the six arguments). Found by trying it as a user would: a
// process whose filter kills mprotect, attached, died of SIGSYS at
// ptjit's first protection change.
//
// A thread's filters are read once and read again only when it has more
// (filters are never removed: a probe of the index one past the last
// read says whether one was added). Where they cannot be read (ptjit
// itself runs under a filter, or lacks CAP_SYS_ADMIN: EACCES; a kernel
// without CONFIG_CHECKPOINT_RESTORE: EINVAL), ptjit injects as it would
// without the check, and the README says so.

// threadFilters is what a thread's filters were when last read
// (thread.filters).
type threadFilters struct {
	read  bool
	progs []*bpf.VM // index 0 the newest, as the kernel numbers them
	err   error     // why they could not be read (then progs is nil)
}

// ptraceSeccompGetFilter is PTRACE_SECCOMP_GET_FILTER (linux/ptrace.h).
const ptraceSeccompGetFilter = 0x420c

// FilterRefusedError: the program's seccomp filter would not let an
// injected call run as asked; ptjit did not run it.
type FilterRefusedError struct {
	Nr     int
	Action uint32 // the filters' combined return value
}

func (e *FilterRefusedError) Error() string {
	return fmt.Sprintf("the program's seccomp filter would answer %s with %s: not run", callName(e.Nr), actionName(e.Action))
}

// callName names syscall nr as the rules do ("syscall N" for one they
// do not watch).
func callName(nr int) string {
	if n := syscallName(nr); n != "syscall" {
		return n
	}
	return fmt.Sprintf("syscall %d", nr)
}

// actionName names a seccomp return value's action (its data too for
// SECCOMP_RET_ERRNO).
func actionName(ret uint32) string {
	switch ret & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_KILL_PROCESS:
		return "SECCOMP_RET_KILL_PROCESS"
	case unix.SECCOMP_RET_KILL_THREAD:
		return "SECCOMP_RET_KILL_THREAD"
	case unix.SECCOMP_RET_TRAP:
		return "SECCOMP_RET_TRAP"
	case unix.SECCOMP_RET_ERRNO:
		return fmt.Sprintf("SECCOMP_RET_ERRNO(%s)", unix.ErrnoName(unix.Errno(ret&0xffff)))
	case unix.SECCOMP_RET_USER_NOTIF:
		return "SECCOMP_RET_USER_NOTIF"
	case unix.SECCOMP_RET_TRACE:
		return "SECCOMP_RET_TRACE"
	case unix.SECCOMP_RET_LOG:
		return "SECCOMP_RET_LOG"
	case unix.SECCOMP_RET_ALLOW:
		return "SECCOMP_RET_ALLOW"
	}
	return fmt.Sprintf("%#x (an unknown action: the kernel kills)", ret)
}

// actionRank orders actions as the kernel does when filters disagree:
// the lowest wins (the action part as a signed 32-bit number, so
// KILL_PROCESS first and ALLOW last).
func actionRank(ret uint32) int32 { return int32(ret & unix.SECCOMP_RET_ACTION_FULL) }

// runsAsAsked reports whether a call the filters answer with ret runs as
// ptjit asked: allowed, logged, or traced (a seccomp stop of ptjit's own,
// which inject passes).
func runsAsAsked(ret uint32) bool {
	switch ret & unix.SECCOMP_RET_ACTION_FULL {
	case unix.SECCOMP_RET_ALLOW, unix.SECCOMP_RET_LOG, unix.SECCOMP_RET_TRACE:
		return true
	}
	return false
}

// filterChecked reports whether calls injected into th's process are run
// through its filters first: those of a process whose filters include
// some ptjit did not install, and every process of an attach (it may
// have had filters before the attach, or add one while attached).
func (t *Tracer) filterChecked(th *thread) bool {
	return th.proc.ownFilter || t.att.on
}

// refusedBy returns a *FilterRefusedError where th's seccomp filters
// would not let syscall nr(args), run from the syscall instruction at
// insn, run as asked; nil where they would, or where they cannot be read
// (see above).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) refusedBy(th *thread, insn uint64, nr int, args [6]uint64) error {
	err := t.verdict(th, insn, nr, args)
	var ref *FilterRefusedError
	if errors.As(err, &ref) && t.att.on && th.proc.space != nil && th.proc.space.WritesSeen {
		t.lateFilter(th, ref)
	}
	return err
}

// lateFilter handles the first call its filters refuse in an attached
// process whose memory W^X keeps: a filter the program installed while
// attached (one there at the attach turns W^X off before it protects
// anything: wxAttachAllowed). ptjit cannot hold such an install (no filter
// of its own in the process, and BPF cannot delay a call on a kernel
// without error injection), and from then on may not be able to change
// protections at all, those that give the program its own back at the
// detach included. So W^X goes precise in the process (a store into code
// is emulated and written through /proc/PID/mem: no protection change),
// and ptjit stays attached until the process exits rather than leave its
// code without the protection it asked for; it says so once, and the
// refusals that follow are not told one by one (warnOp).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) lateFilter(th *thread, ref *FilterRefusedError) {
	p := th.proc
	if p.lateFilter {
		return
	}
	p.lateFilter, p.ownFilter = true, true
	t.att.stay = true
	t.warnf("pid %d: a seccomp filter it installed while attached answers %s with %s: W^X emulates its stores from now on, and ptjit stays attached until the process exits (a detach would leave its code without the protection it asked for)",
		p.pid, callName(ref.Nr), actionName(ref.Action))
}

// verdict is refusedBy without lateFilter: the filters' answer alone.
func (t *Tracer) verdict(th *thread, insn uint64, nr int, args [6]uint64) error {
	if !t.filterChecked(th) {
		return nil
	}
	progs, err := th.filtersNow()
	if err != nil {
		return nil
	}
	ret := uint32(unix.SECCOMP_RET_ALLOW)
	data := seccompData(nr, auditArchX8664, insn+2, args)
	for i, vm := range progs {
		r, err := vm.Run(data[:])
		if err != nil {
			// not a program the kernel took: count it as the
			// kernel counts an unknown action
			t.warnf("tid %d: the program's seccomp filter %d cannot be run here: %v", th.tid, i, err)
			r = unix.SECCOMP_RET_KILL_PROCESS
		}
		if actionRank(uint32(r)) < actionRank(ret) {
			ret = uint32(r)
		}
	}
	if runsAsAsked(ret) {
		return nil
	}
	return &FilterRefusedError{Nr: nr, Action: ret}
}

// filtersNow returns th's filters, read again where it has more than
// when last read.
func (th *thread) filtersNow() ([]*bpf.VM, error) {
	f := &th.filters
	if f.read && f.err != nil {
		return nil, f.err
	}
	if f.read {
		// one past the last read: ENOENT while no filter was added;
		// EINVAL while a thread with none still has none
		_, err := ptraceGetFilter(th.tid, len(f.progs), nil)
		if errors.Is(err, unix.ENOENT) || len(f.progs) == 0 && errors.Is(err, unix.EINVAL) {
			return f.progs, nil
		}
	}
	f.read = true
	f.progs, f.err = readFilters(th.tid)
	return f.progs, f.err
}

// readFilters reads every seccomp filter of the stopped tracee tid, the
// newest first, into classic BPF machines. A task with no filter (not
// in filter mode: EINVAL) has none.
func readFilters(tid int) ([]*bpf.VM, error) {
	var progs []*bpf.VM
	for i := 0; ; i++ {
		n, err := ptraceGetFilter(tid, i, nil)
		if errors.Is(err, unix.ENOENT) {
			return progs, nil
		}
		if errors.Is(err, unix.EINVAL) && i == 0 && seccompMode(tid) == 0 {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading seccomp filter %d of tid %d: %w", i, tid, err)
		}
		insns := make([]unix.SockFilter, n)
		if _, err := ptraceGetFilter(tid, i, insns); err != nil {
			return nil, fmt.Errorf("reading seccomp filter %d of tid %d: %w", i, tid, err)
		}
		vm, err := filterVM(insns)
		if err != nil {
			return nil, fmt.Errorf("seccomp filter %d of tid %d: %w", i, tid, err)
		}
		progs = append(progs, vm)
	}
}

// ptraceGetFilter is PTRACE_SECCOMP_GET_FILTER for filter index of tid:
// its instruction count, and with buf (of that many) its instructions.
func ptraceGetFilter(tid, index int, buf []unix.SockFilter) (int, error) {
	var data uintptr
	if len(buf) > 0 {
		data = uintptr(unsafe.Pointer(&buf[0]))
	}
	n, _, errno := unix.Syscall6(unix.SYS_PTRACE, ptraceSeccompGetFilter, uintptr(tid), uintptr(index), data, 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// seccompMode is the Seccomp field of /proc/TID/status: 0 none, 1
// strict, 2 filter; -1 where it cannot be read.
func seccompMode(tid int) int {
	v, _ := statusField("/proc/"+strconv.Itoa(tid), "Seccomp")
	if n, err := strconv.Atoi(v); err == nil {
		return n
	}
	return -1
}

// filterVM makes a classic BPF program, as the kernel holds a seccomp
// filter, runnable: golang.org/x/net/bpf's machine.
func filterVM(prog []unix.SockFilter) (*bpf.VM, error) {
	raw := make([]bpf.RawInstruction, len(prog))
	for i, in := range prog {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		for i, in := range insns {
			if r, unknown := in.(bpf.RawInstruction); unknown {
				return nil, fmt.Errorf("pc %d: opcode %#x is not one this machine runs", i, r.Op)
			}
		}
	}
	return bpf.NewVM(insns)
}

// seccompData is struct seccomp_data (int nr; u32 arch; u64
// instruction_pointer; u64 args[6]) as filterVM's machine reads it. The
// kernel's 32-bit loads read it in host order (little-endian: a 64-bit
// field's low word at its offset, the high word 4 bytes on); the
// machine's loads read network order, so each 32-bit word is stored
// big-endian at the offset where the kernel would find it.
func seccompData(nr int, arch uint32, ip uint64, args [6]uint64) [64]byte {
	var data [64]byte
	word := func(off int, v uint32) { binary.BigEndian.PutUint32(data[off:], v) }
	word(offNr, uint32(nr))
	word(offArch, arch)
	word(offIP, uint32(ip))
	word(offIP+4, uint32(ip>>32))
	for i, a := range args {
		word(offArgs+8*i, uint32(a))
		word(offArgs+8*i+4, uint32(a>>32))
	}
	return data
}

// protString is prot as /proc/PID/maps writes it: "r-x".
func protString(prot int) string {
	b := []byte("---")
	if prot&unix.PROT_READ != 0 {
		b[0] = 'r'
	}
	if prot&unix.PROT_WRITE != 0 {
		b[1] = 'w'
	}
	if prot&unix.PROT_EXEC != 0 {
		b[2] = 'x'
	}
	return string(b)
}
