//go:build linux && amd64

package tracker

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// InstallFilter compiles Rules and installs them as the calling thread's
// seccomp filter. Without CAP_SYS_ADMIN the kernel demands no_new_privs
// first; it is only set in that case, so a root-run program keeps its
// set-uid semantics.
//
// Precondition: the calling goroutine is locked to its OS thread and that
// thread is the one that will execve (the filter is per thread and
// survives execve; other threads die at execve).
//
// After it returns, every syscall the filter traps fails with ENOSYS unless
// a ptrace tracer is attached: attach first.
func InstallFilter() error {
	prog, err := Compile(Rules)
	if err != nil {
		return err
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	err = unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	if errors.Is(err, unix.EACCES) {
		if err = unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		err = unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0)
	}
	if err != nil {
		return fmt.Errorf("installing seccomp filter: %w", err)
	}
	return nil
}
