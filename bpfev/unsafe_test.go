package bpfev

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

// siginfoCode returns the si_code of the signal that stopped tid
// (PTRACE_GETSIGINFO).
func siginfoCode(tid int) (int32, error) {
	var si [128]byte
	_, _, errno := unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_GETSIGINFO, uintptr(tid), 0, uintptr(unsafe.Pointer(&si[0])), 0, 0)
	if errno != 0 {
		return 0, errno
	}
	return *(*int32)(unsafe.Pointer(&si[8])), nil
}
