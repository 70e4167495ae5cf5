//go:build linux && amd64

package tracker

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Every ptrace stop of a tracee sends the tracer's process a SIGCHLD
// (CLD_TRAPPED), which the Go runtime's handler takes on whichever ptjit
// thread the kernel picks — often an idle one it must wake, on another CPU
// — only to ignore it: the tracer learns of stops from wait4, which the
// kernel wakes on its own. SA_NOCLDSTOP on the handler the runtime
// installed stops those signals and keeps the ones for exits, so nothing
// else changes (exec.Cmd waits with wait4 too). Measured on stepbench under
// --pt=soft, one stop per instruction: see BENCHMARKS.md.

// kernelSigaction is struct sigaction as rt_sigaction(2) takes it on
// x86-64.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

const saNoCldStop = 0x1

var quietOnce sync.Once

// quietStops sets SA_NOCLDSTOP on the process's SIGCHLD handler, once.
func quietStops() {
	quietOnce.Do(func() {
		var sa kernelSigaction
		if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), 0, uintptr(unsafe.Pointer(&sa)), 8, 0, 0); e != 0 {
			return
		}
		if sa.handler == 0 || sa.handler == 1 || sa.flags&saNoCldStop != 0 {
			return // SIG_DFL or SIG_IGN: no signal is delivered for stops anyway
		}
		sa.flags |= saNoCldStop
		unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGCHLD), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0)
	})
}
