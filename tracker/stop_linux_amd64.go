package tracker

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// StopKind is what a wait4 report means. Classify is the one place that
// decides it; the event loop switches on the result.
type StopKind uint8

const (
	StopExited      StopKind = iota // the thread exited (WIFEXITED)
	StopKilled                      // the thread was killed by a signal (WIFSIGNALED)
	StopSignal                      // signal-delivery-stop: inject the signal
	StopGroup                       // group-stop (PTRACE_EVENT_STOP, stop signal): PTRACE_LISTEN
	StopTrap                        // PTRACE_EVENT_STOP with SIGTRAP: attach stop of a new tracee, or the wake-up after LISTEN
	StopSeccomp                     // PTRACE_EVENT_SECCOMP: a filtered syscall's entry
	StopSyscallExit                 // syscall-exit-stop (SIGTRAP|0x80, TRACESYSGOOD)
	StopClone                       // PTRACE_EVENT_CLONE
	StopFork                        // PTRACE_EVENT_FORK
	StopVfork                       // PTRACE_EVENT_VFORK
	StopExec                        // PTRACE_EVENT_EXEC
	StopExit                        // PTRACE_EVENT_EXIT: about to exit, still inspectable
	StopOther                       // an event we did not ask for; resume it
)

var stopNames = [...]string{"exited", "killed", "signal", "group-stop", "trap", "seccomp",
	"syscall-exit", "clone", "fork", "vfork", "exec", "exit", "other"}

func (k StopKind) String() string {
	if int(k) < len(stopNames) {
		return stopNames[k]
	}
	return fmt.Sprintf("StopKind(%d)", k)
}

// Classify decodes a wait status (wait4 with __WALL on a PTRACE_SEIZE'd
// tracee). sig is the exit code for StopExited, the signal for StopKilled,
// StopSignal and StopGroup, else 0.
func Classify(ws unix.WaitStatus) (kind StopKind, sig int) {
	switch {
	case ws.Exited():
		return StopExited, ws.ExitStatus()
	case ws.Signaled():
		return StopKilled, int(ws.Signal())
	case !ws.Stopped():
		return StopOther, 0
	}
	stopsig := int(ws>>8) & 0xff
	event := int(ws >> 16)
	switch event {
	case 0:
		if stopsig == int(unix.SIGTRAP)|0x80 {
			return StopSyscallExit, 0
		}
		return StopSignal, stopsig
	case unix.PTRACE_EVENT_STOP:
		switch unix.Signal(stopsig) {
		case unix.SIGSTOP, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU:
			return StopGroup, stopsig
		}
		return StopTrap, 0
	case unix.PTRACE_EVENT_SECCOMP:
		return StopSeccomp, 0
	case unix.PTRACE_EVENT_CLONE:
		return StopClone, 0
	case unix.PTRACE_EVENT_FORK:
		return StopFork, 0
	case unix.PTRACE_EVENT_VFORK:
		return StopVfork, 0
	case unix.PTRACE_EVENT_EXEC:
		return StopExec, 0
	case unix.PTRACE_EVENT_EXIT:
		return StopExit, 0
	}
	return StopOther, 0
}
