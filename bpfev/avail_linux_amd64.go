package bpfev

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is what Available's errors match (errors.Is): BPF
// events cannot run on this host, for the reason the error says.
var ErrUnavailable = errors.New("BPF events unavailable")

// UnavailableError says, in one line, why BPF events cannot run here.
type UnavailableError struct {
	Reason string // one line, no trailing period
	Err    error  // the failure underneath, if any
}

func (e *UnavailableError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + oneLine(e.Err.Error())
	}
	return e.Reason
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Capabilities (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// Available reports whether a Source can run here: nil, or an
// *UnavailableError saying why not (not privileged, no BTF, lockdown,
// or the programs fail to load or attach, with the kernel's words). It
// checks by opening a Source with a small ring and closing it (some
// tens of milliseconds); `--events=auto` calls it once.
func Available() error {
	if err := checkCaps(); err != nil {
		return err
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return &UnavailableError{Reason: "the kernel has no BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF)", Err: err}
	}
	if b, err := os.ReadFile("/sys/kernel/security/lockdown"); err == nil && strings.Contains(string(b), "[confidentiality]") {
		return &UnavailableError{Reason: "kernel lockdown is confidentiality: BPF may not read process memory"}
	}
	s, err := Open(Config{RingBytes: minRing})
	if err != nil {
		return &UnavailableError{Reason: "the BPF programs do not load here", Err: err}
	}
	if err := s.Close(); err != nil {
		return &UnavailableError{Reason: "closing the BPF programs failed", Err: err}
	}
	return nil
}

// checkCaps says whether this process may load tracing programs: it
// needs CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN (kernels before 5.8,
// and the same today).
func checkCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return &UnavailableError{Reason: "cannot read this process's capabilities", Err: err}
	}
	has := func(c uint) bool { return data[c/32].Effective&(1<<(c%32)) != 0 }
	if has(capSysAdmin) || has(capBPF) && has(capPerfmon) {
		return nil
	}
	if os.Geteuid() != 0 {
		return &UnavailableError{Reason: "not root and no CAP_BPF+CAP_PERFMON (run ptjit as root, or grant them: setcap cap_bpf,cap_perfmon,cap_sys_ptrace+ep)"}
	}
	return &UnavailableError{Reason: "root without CAP_BPF+CAP_PERFMON or CAP_SYS_ADMIN (a restricted container?)"}
}

// oneLine keeps the first line of a multi-line message (a verifier log)
// and says how much was left out.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return fmt.Sprintf("%s (and %d more lines)", s[:i], strings.Count(s[i:], "\n"))
	}
	return s
}
