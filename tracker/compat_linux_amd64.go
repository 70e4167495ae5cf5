package tracker

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strconv"
)

// 32-bit programs are refused.
//
// A process that execs an i386 program runs in compatibility mode: its
// code is 32-bit (the decoder, software PT and the store emulator read
// 64-bit code), its syscalls come through int 0x80 with i386 numbers and
// layouts (mmap2, mprotect and munmap are other numbers there, and ptjit
// reads their arguments from other registers), so its code would be
// recorded wrongly or not at all. An x32 program (64-bit mode, 32-bit
// pointers) makes its syscalls with the x32 bit set, which ptjit's filter
// does not take for the calls it records either. Rather than a recording
// that silently lacks the program's code, ptjit refuses the run at the
// first exec of such a program, in any process of the tree (a 64-bit
// program's child too): the exec event is where the new image is known
// and nothing of it has run yet. The process is left stopped there,
// every traced process is killed (SIGKILL: the program cannot finish
// half-recorded), the run ends with a RefusedError and code.db's state
// says so (db.Recorder.Refuse).

// RefusedError reports a program ptjit refused to record: every traced
// process was killed at its exec.
type RefusedError struct {
	PID  int
	Path string
	Kind string // "a 32-bit (compat-mode) program", "an x32 program"
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("pid %d: %s is %s: ptjit records 64-bit processes only", e.PID, e.Path, e.Kind)
}

// i386RegsSize is the size of the i386 struct user_regs_struct, the
// general registers PTRACE_GETREGSET gives for a task in compatibility
// mode (the 64-bit one is 216 bytes).
const i386RegsSize = 17 * 4

// compatKind says what kind of program pid runs after its exec when ptjit
// cannot record it ("" when it can): from its thread tid's register set
// (the i386 one: the task runs in compatibility mode; PTRACE_GETREGS is
// no help there, it gave zeros for every register of such a task, CS
// included, on this project's 6.18 kernel), and from the ELF header of
// its executable (ELFCLASS32: i386 or x32). Either alone is enough.
func compatKind(pid, tid int) string {
	if n, err := prstatusSize(tid); err == nil && n == i386RegsSize {
		return "a 32-bit (compat-mode) program"
	}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return ""
	}
	defer f.Close()
	return elfKind(f)
}

// elfKind reads the ELF header at the start of r: "" for a 64-bit ELF or
// anything that is not ELF, else what compatKind says.
func elfKind(r io.ReaderAt) string {
	var h [20]byte
	if n, _ := r.ReadAt(h[:], 0); n < len(h) || string(h[:4]) != elf.ELFMAG || elf.Class(h[elf.EI_CLASS]) != elf.ELFCLASS32 {
		return ""
	}
	if elf.Data(h[elf.EI_DATA]) == elf.ELFDATA2LSB && elf.Machine(binary.LittleEndian.Uint16(h[18:])) == elf.EM_X86_64 {
		return "an x32 program"
	}
	return "a 32-bit (compat-mode) program"
}

// refuseExec refuses th's process when the program it just exec'd cannot
// be recorded (compatKind): the first refusal is kept for the result, and
// every traced process is killed. th is left in its exec stop (the kill
// ends it). It reports whether it refused.
//
// Precondition: on the locked tracer thread; th is in its exec event stop.
func (t *Tracer) refuseExec(th *thread, path string) bool {
	kind := compatKind(th.proc.pid, th.tid)
	if kind == "" {
		return false
	}
	if t.root.refused == nil {
		t.root.refused = &RefusedError{PID: th.proc.pid, Path: path, Kind: kind}
	}
	t.Kill()
	return true
}
