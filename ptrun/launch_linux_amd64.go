package ptrun

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/ptjit/ptjit/tracker"
	"golang.org/x/sys/unix"
)

// StartError is a program that cannot be started; Code is the shell's
// status for it (127 not found, 126 found but not executable).
type StartError struct {
	Prog string
	Code int
	Err  error
}

func (e *StartError) Error() string { return e.Prog + ": " + e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

var errNotFound = errors.New("command not found")

// Resolve finds prog the way a shell does: a name with a slash is used as
// is, others are searched in $PATH (an empty entry is the current
// directory). It returns the path to execve.
func Resolve(prog string) (string, error) {
	if prog == "" {
		return "", &StartError{prog, 127, errNotFound}
	}
	if strings.Contains(prog, "/") {
		if err := checkExecutable(prog); err != nil {
			return "", err
		}
		return prog, nil
	}
	var firstErr error
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, prog)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		var se *StartError
		if errors.As(err, &se) && se.Code == 126 && firstErr == nil {
			firstErr = &StartError{prog, 126, se.Err}
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", &StartError{prog, 127, errNotFound}
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &StartError{p, 127, errors.New("no such file or directory")}
		}
		return &StartError{p, 126, unwrapPath(err)}
	}
	if st.IsDir() {
		return &StartError{p, 126, errors.New("is a directory")}
	}
	if err := unix.Access(p, unix.X_OK); err != nil {
		return &StartError{p, 126, err}
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Launcher returns the tracker.Launch that starts argv (argv[0] as the
// user typed it; path resolved) through the helper. stdio are the
// program's fds 0, 1, 2 (nil: ptjit's own).
func Launcher(path string, argv []string, stdio []uintptr) tracker.Launch {
	return LauncherEvents(path, argv, stdio, tracker.EventsSeccomp)
}

// LauncherEvents is Launcher with the launch filter for the tracker's
// events mode (tracker.LaunchRules).
func LauncherEvents(path string, argv []string, stdio []uintptr, events tracker.EventsMode) tracker.Launch {
	if stdio == nil {
		stdio = []uintptr{0, 1, 2}
	}
	return func() (int, func() error, error) {
		filter, err := filterMessage(events)
		if err != nil {
			return 0, nil, err
		}
		// /proc/self/exe, not its path: the binary may have been replaced
		// or removed since ptjit started (a rebuild during a long run).
		const self = "/proc/self/exe"
		// A socket pair for the handshake: the helper's end is inherited
		// at the same number (not close-on-exec); it is the only fd ptjit
		// passes besides 0-2 and the fds ptjit itself inherited.
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
		if err != nil {
			return 0, nil, fmt.Errorf("socketpair: %w", err)
		}
		unix.CloseOnExec(sp[0])
		args := helperArgs("ptjit", sp[1], path, argv)
		pid, err := syscall.ForkExec(self, args, &syscall.ProcAttr{
			Env:   os.Environ(),
			Files: stdio,
			Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
		})
		unix.Close(sp[1])
		if err != nil {
			unix.Close(sp[0])
			return 0, nil, fmt.Errorf("starting the launcher %s: %w", self, err)
		}
		// Wait until the helper runs (its own execve is over, so the
		// tracer never sees it), then let the tracer seize it.
		var b [1]byte
		if n, err := readRetry(sp[0], b[:]); n != 1 {
			unix.Close(sp[0])
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, 0, nil)
			return 0, nil, fmt.Errorf("the launcher died before starting the program (%v, %v)", err, ws)
		}
		release := func() error {
			defer unix.Close(sp[0])
			return writeAll(sp[0], filter)
		}
		return pid, release, nil
	}
}

// filterMessage is the release message the helper waits for: the seccomp
// filter (tracker.LaunchRules for the events mode, compiled) as a
// little-endian uint16 instruction count and the struct sock_filter array,
// in this machine's layout.
func filterMessage(events tracker.EventsMode) ([]byte, error) {
	prog, err := tracker.Compile(tracker.LaunchRules(events))
	if err != nil {
		return nil, err
	}
	if len(prog) == 0 || len(prog) > unix.BPF_MAXINSNS {
		return nil, fmt.Errorf("seccomp filter of %d instructions", len(prog))
	}
	return append(binary.LittleEndian.AppendUint16(nil, uint16(len(prog))), tracker.FilterBytes(prog)...), nil
}

// helperArgs is the command line that makes the ptjit binary (self) act as
// the launcher helper: the hand-shake fd, the standard fds to close before
// the exec ("-" for none; see closedStdio), the resolved path and argv.
func helperArgs(self string, fd int, path string, argv []string) []string {
	return append([]string{self, helperArg, strconv.Itoa(fd), closedStdio(), path}, argv...)
}

// closedStdio lists the standard fds (0-2) that were closed when ptjit
// started, comma-separated ("-": none). Go's runtime opens /dev/null
// read-write on any of them it finds closed, before main runs; a shell
// redirection opens /dev/null read-only (<) or write-only (>), so an fd
// 0-2 on /dev/null opened O_RDWR is one the runtime filled in. The helper
// closes those again right before the exec, so the program sees its
// standard streams as they were: `seq 3 >&-` fails under ptjit as alone.
// (A program started with <>/dev/null on a standard fd is the one case
// this reads as closed.)
func closedStdio() string {
	var null unix.Stat_t
	if unix.Stat("/dev/null", &null) != nil {
		return "-"
	}
	var closed []string
	for fd := 0; fd <= 2; fd++ {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != null.Rdev {
			continue
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
		if err == nil && fl&unix.O_ACCMODE == unix.O_RDWR {
			closed = append(closed, strconv.Itoa(fd))
		}
	}
	if len(closed) == 0 {
		return "-"
	}
	return strings.Join(closed, ",")
}

// writeAll writes b to fd whole.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

func readRetry(fd int, b []byte) (int, error) {
	for {
		n, err := unix.Read(fd, b)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}
