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
