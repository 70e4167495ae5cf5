package tracker

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestElfKind checks the ELF-class half of compatKind on headers: a
// 64-bit x86-64 ELF (this test binary) and anything not ELF are
// recordable; ELFCLASS32 is refused, as i386 or as x32 (EM_X86_64).
func TestElfKind(t *testing.T) {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	header := func(class elf.Class, m elf.Machine) []byte {
		h := make([]byte, 64)
		copy(h, elf.ELFMAG)
		h[elf.EI_CLASS], h[elf.EI_DATA] = byte(class), byte(elf.ELFDATA2LSB)
		binary.LittleEndian.PutUint16(h[18:], uint16(m))
		return h
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"this 64-bit test binary", self[:64], ""},
		{"ELFCLASS64 x86-64", header(elf.ELFCLASS64, elf.EM_X86_64), ""},
		{"ELFCLASS32 i386", header(elf.ELFCLASS32, elf.EM_386), "a 32-bit (compat-mode) program"},
		{"ELFCLASS32 x86-64 (x32)", header(elf.ELFCLASS32, elf.EM_X86_64), "an x32 program"},
		{"a script", []byte("#!/bin/sh\necho hello, this is long enough\n"), ""},
		{"short", []byte("\x7fELF\x01"), ""},
	} {
		if got := elfKind(bytes.NewReader(c.b)); got != c.want {
			t.Errorf("%s: elfKind = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestPrstatusSize checks the register half of compatKind on real
// processes stopped at their exec (PTRACE_TRACEME): testdata/jit32.c
// built with gcc -m32 has the i386 register set (68 bytes), /bin/true the
// 64-bit one. Without gcc -m32 (gcc-multilib) it skips, except under
// CI=true, where it fails.
func TestPrstatusSize(t *testing.T) {
	prog := filepath.Join(t.TempDir(), "jit32")
	if out, err := exec.Command(testenv.Tool(t, "gcc", "gcc"), "-m32", "-O2", "-o", prog, "../testdata/jit32.c").CombinedOutput(); err != nil {
		testenv.Missing(t, "gcc -m32 fails here (Debian: apt-get install gcc-multilib; .ci/run installs it): %v\n%s", err, out)
	}
	// ptrace requests must come from the thread that forked the tracee
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for _, c := range []struct {
		prog string
		want int
	}{{prog, i386RegsSize}, {"/bin/true", 27 * 8}} { // 64-bit: struct user_regs_struct, 27 registers
		cmd := exec.Command(c.prog)
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(cmd.Process.Pid, &ws, 0, nil); err != nil || !ws.Stopped() {
			t.Fatalf("%s: wait4: %v, status %#x, want its exec's SIGTRAP stop", c.prog, err, ws)
		}
		n, err := prstatusSize(cmd.Process.Pid)
		kind := compatKind(cmd.Process.Pid, cmd.Process.Pid)
		cmd.Process.Kill()
		cmd.Wait()
		if err != nil || n != c.want {
			t.Errorf("%s: register set of %d bytes (%v), want %d", c.prog, n, err, c.want)
		}
		if want := map[bool]string{true: "a 32-bit (compat-mode) program", false: ""}[c.prog == prog]; kind != want {
			t.Errorf("%s: compatKind = %q, want %q", c.prog, kind, want)
		}
	}
}
