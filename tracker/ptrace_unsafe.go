//go:build linux && amd64

package tracker

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// siginfo holds the fields of a SIGSEGV siginfo_t the tracker needs
// (must match the kernel's siginfo_t layout on x86-64: si_signo at 0,
// si_errno at 4, si_code at 8, si_addr at 16).
// Addr's low 32 bits are si_pid for a signal sent by kill, tgkill or
// sigqueue. Its size is the kernel's (128 bytes), so that it can be
// written back whole with PTRACE_SETSIGINFO.
type siginfo struct {
	Signo, Errno, Code int32
	_                  int32
	Addr               uint64
	_                  [104]byte
}

// setSiginfo replaces the siginfo of a thread in signal-delivery-stop.
//
// Precondition: on the locked tracer thread; tid is stopped.
func setSiginfo(tid int, si *siginfo) error {
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_SETSIGINFO, uintptr(tid), 0, uintptr(unsafe.Pointer(si)), 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// getSiginfo reads the siginfo of a thread in signal-delivery-stop.
//
// Precondition: on the locked tracer thread; tid is stopped.
func getSiginfo(tid int) (siginfo, error) {
	var si siginfo
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(tid), 0, uintptr(unsafe.Pointer(&si)), 0, 0)
	if e != 0 {
		return si, e
	}
	return si, nil
}

// fxsave mirrors struct user_fpregs_struct (the FXSAVE area): XMM0-15 at
// byte 160.
type fxsave [512]byte

// getXMM returns the 16 XMM registers of a stopped thread.
//
// Precondition: on the locked tracer thread; tid is stopped.
func getXMM(tid int) (*fxsave, error) {
	var fx fxsave
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETFPREGS, uintptr(tid), 0, uintptr(unsafe.Pointer(&fx)), 0, 0)
	if e != 0 {
		return nil, e
	}
	return &fx, nil
}

// ntX86XState is NT_X86_XSTATE, the regset of the XSAVE area.
const ntX86XState = 0x202

// xsaveYMMHigh is where the standard (not compacted) XSAVE format ptrace
// hands out keeps the upper halves of YMM0-15 (the YMM_Hi128 component,
// state bit 2; CPUID 0xD gives 576 on every CPU with AVX), and
// xsaveBV where its header's XSTATE_BV is.
const (
	xsaveYMMHigh = 576
	xsaveBV      = 512
)

// getYMMHigh returns the upper 16 bytes of YMM0-15 of the stopped thread
// tid, 16 bytes a register (zeros where the component is in its initial
// state).
func getYMMHigh(tid int) ([]byte, error) {
	buf := make([]byte, 16<<10) // the largest XSAVE area (AMX) is under 12 KiB
	iov := unix.Iovec{Base: &buf[0]}
	iov.SetLen(len(buf))
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(tid), ntX86XState, uintptr(unsafe.Pointer(&iov)), 0, 0)
	if e != 0 {
		return nil, e
	}
	if iov.Len < xsaveYMMHigh+256 {
		return nil, unix.EINVAL // no AVX state
	}
	out := make([]byte, 256)
	if buf[xsaveBV]&4 != 0 {
		copy(out, buf[xsaveYMMHigh:xsaveYMMHigh+256])
	}
	return out, nil
}

// ptraceGetRseqConfiguration is PTRACE_GET_RSEQ_CONFIGURATION (Linux 5.13).
const ptraceGetRseqConfiguration = 0x420f

// rseqConfig is struct ptrace_rseq_configuration.
type rseqConfig struct {
	Pointer   uint64 // the registered struct rseq, or 0
	Size      uint32
	Signature uint32
	Flags     uint32
	_         uint32
}

// getRseq returns the rseq area tid registered (Pointer 0: none).
//
// Precondition: on the locked tracer thread; tid is stopped.
func getRseq(tid int) (rseqConfig, error) {
	var c rseqConfig
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, ptraceGetRseqConfiguration, uintptr(tid), unsafe.Sizeof(c), uintptr(unsafe.Pointer(&c)), 0, 0)
	if e != 0 {
		return c, e
	}
	return c, nil
}

// prstatusSize returns the size of tid's general registers as
// PTRACE_GETREGSET (NT_PRSTATUS) gives them, in the tracee's own view: 216
// bytes (struct user_regs_struct) for a 64-bit task, 68 (the i386 one) for
// a task in compatibility mode, as strace tells them apart. regs is the
// buffer, large enough for the 64-bit set.
//
// Precondition: on the locked tracer thread; tid is stopped.
func prstatusSize(tid int) (int, error) {
	var regs unix.PtraceRegs
	iov := unix.Iovec{Base: (*byte)(unsafe.Pointer(&regs))}
	iov.SetLen(int(unsafe.Sizeof(regs)))
	_, _, e := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETREGSET, uintptr(tid), uintptr(elfNTPRStatus), uintptr(unsafe.Pointer(&iov)), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(iov.Len), nil
}

// elfNTPRStatus is NT_PRSTATUS, the general registers' regset.
const elfNTPRStatus = 1

// getCPU returns the CPU the calling thread runs on (getcpu(2)).
func getCPU() (int, bool) {
	var cpu, node uint32
	_, _, e := unix.RawSyscall(unix.SYS_GETCPU, uintptr(unsafe.Pointer(&cpu)), uintptr(unsafe.Pointer(&node)), 0)
	return int(cpu), e == 0
}

// rawWait4 is wait4(pid, ws, flags) without the Go runtime's syscall
// bookkeeping: for a wait known to be short (a step of ptjit's own on
// the tracer's CPU), where handing the P to another thread would cost a
// wake-up of another CPU.
func rawWait4(pid int, ws *unix.WaitStatus, flags int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_WAIT4, uintptr(pid), uintptr(unsafe.Pointer(ws)), uintptr(flags), 0, 0, 0)
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}
