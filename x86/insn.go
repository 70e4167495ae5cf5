package x86

import (
	"errors"
	"fmt"
)

// ExecMode is the execution mode an instruction is decoded in. It mirrors
// libipt's pt_exec_mode: PT reports it in the MODE.Exec packet (CS.L, CS.D).
type ExecMode uint8

const (
	ModeUnknown ExecMode = iota // no MODE.Exec seen yet; DecodeInsn refuses it
	Mode16                      // 16-bit code (CS.D = 0, CS.L = 0)
	Mode32                      // 32-bit code (CS.D = 1, CS.L = 0)
	Mode64                      // 64-bit code (CS.L = 1)
)

// String returns "16-bit", "32-bit", "64-bit" or "unknown".
func (m ExecMode) String() string {
	switch m {
	case Mode16:
		return "16-bit"
	case Mode32:
		return "32-bit"
	case Mode64:
		return "64-bit"
	}
	return "unknown"
}

// Bits returns 16, 32 or 64, or 0 for ModeUnknown.
func (m ExecMode) Bits() int {
	switch m {
	case Mode16:
		return 16
	case Mode32:
		return 32
	case Mode64:
		return 64
	}
	return 0
}

// InsnClass says how an instruction changes the flow of control, which is
// what an Intel PT decoder needs to know about it. It mirrors libipt's
// pt_insn_class, split finer where libipt uses its pt_insn_ext iclass
// (syscall vs. far call, VM entry, mov to CR3).
type InsnClass uint8

const (
	// ClassOther does not change the flow (includes xbegin, ud2, hlt: PT
	// reports their effects with FUP/TIP events, not as branches).
	ClassOther InsnClass = iota
	// ClassCondJump is a conditional direct near branch: jcc, jrcxz/jecxz/jcxz,
	// loop, loope, loopne. Taken or not comes from a TNT bit.
	ClassCondJump
	// ClassJump is a direct near jmp (EB, E9); Target is set.
	ClassJump
	// ClassIndJump is an indirect near jmp (FF /4); the target comes from TIP.
	ClassIndJump
	// ClassCall is a direct near call (E8); Target is set.
	ClassCall
	// ClassIndCall is an indirect near call (FF /2); the target comes from TIP.
	ClassIndCall
	// ClassRet is a near return (C3, C2 iw); a TNT bit (compressed return)
	// or a TIP gives the target.
	ClassRet
	// ClassFarCall is a far call (9A, FF /3).
	ClassFarCall
	// ClassFarRet is a far return: retf (CB, CA iw), iret/iretd/iretq (CF),
	// and (as in libipt) uiret, erets, eretu.
	ClassFarRet
	// ClassFarJump is a far jmp (EA, FF /5).
	ClassFarJump
	// ClassSyscall enters the kernel or an interrupt handler: syscall,
	// sysenter, int n, int3, into, int1 (icebp).
	ClassSyscall
	// ClassSysret returns from the kernel: sysret, sysexit.
	ClassSysret
	// ClassPTWrite is ptwrite (F3 [REX.W] 0F AE /4); it may produce a PTW packet.
	ClassPTWrite
	// ClassVMEntry enters a guest: vmlaunch, vmresume (libipt: far return).
	ClassVMEntry
	// ClassVMExit leaves a guest on purpose: vmcall (libipt: far call).
	ClassVMExit
	// ClassMovCR3 is mov to CR3 (0F 22 /3 without REX.R). Not a branch; a
	// PIP packet binds to it.
	ClassMovCR3

	numInsnClasses
)

var insnClassNames = [numInsnClasses]string{
	ClassOther:    "other",
	ClassCondJump: "cond-jump",
	ClassJump:     "jump",
	ClassIndJump:  "ind-jump",
	ClassCall:     "call",
	ClassIndCall:  "ind-call",
	ClassRet:      "ret",
	ClassFarCall:  "far-call",
	ClassFarRet:   "far-ret",
	ClassFarJump:  "far-jump",
	ClassSyscall:  "syscall",
	ClassSysret:   "sysret",
	ClassPTWrite:  "ptwrite",
	ClassVMEntry:  "vm-entry",
	ClassVMExit:   "vm-exit",
	ClassMovCR3:   "mov-cr3",
}

// String returns a short name such as "cond-jump" or "ind-call".
func (c InsnClass) String() string {
	if c < numInsnClasses {
		return insnClassNames[c]
	}
	return fmt.Sprintf("InsnClass(%d)", uint8(c))
}

// IsBranch reports whether the instruction may change the flow of control
// (any class but ClassOther, ClassPTWrite and ClassMovCR3).
func (c InsnClass) IsBranch() bool {
	return c != ClassOther && c != ClassPTWrite && c != ClassMovCR3 && c < numInsnClasses
}

// IsFar reports a far transfer (libipt's ptic_far_call/far_return/far_jump):
// the target always comes from a TIP, possibly preceded by a FUP and a mode
// change. Includes syscall/sysret and VM entry/exit.
func (c InsnClass) IsFar() bool {
	switch c {
	case ClassFarCall, ClassFarRet, ClassFarJump, ClassSyscall, ClassSysret,
		ClassVMEntry, ClassVMExit:
		return true
	}
	return false
}

// IsDirect reports a near branch whose target is encoded in the instruction
// (Insn.Target holds it): ClassCondJump, ClassJump, ClassCall.
func (c InsnClass) IsDirect() bool {
	return c == ClassCondJump || c == ClassJump || c == ClassCall
}

// IsIndirectNear reports a near branch whose target comes from the trace:
// ClassIndJump, ClassIndCall, ClassRet.
func (c InsnClass) IsIndirectNear() bool {
	return c == ClassIndJump || c == ClassIndCall || c == ClassRet
}

// IsCall reports an instruction that pushes a near return address the
// return-stack must remember (ClassCall, ClassIndCall).
func (c InsnClass) IsCall() bool { return c == ClassCall || c == ClassIndCall }

// MaxInsnLen is the architectural limit on an x86 instruction's length.
const MaxInsnLen = 15

// Insn is one decoded instruction. DecodeInsn fills a caller-owned Insn so
// walking code allocates nothing.
type Insn struct {
	IP     uint64    // address of the first byte
	Len    uint8     // length in bytes, 1..15
	Class  InsnClass // flow class
	Mode   ExecMode  // mode it was decoded in
	Target uint64    // direct branch target (IsDirect classes), else 0; truncated to the operand size as the CPU does
	Raw    [15]byte  // the instruction bytes in Raw[:Len], zeros after
}

// Bytes returns the instruction's bytes (a slice of in.Raw).
func (in *Insn) Bytes() []byte { return in.Raw[:in.Len] }

// Next returns the address of the following instruction (IP + Len).
func (in *Insn) Next() uint64 { return in.IP + uint64(in.Len) }

// ErrBadInsn is matched (errors.Is) by every *InsnError for an invalid or
// undecodable instruction.
var ErrBadInsn = errors.New("bad instruction")

// ErrInsnTruncated is matched by an *InsnError when the bytes given end
// before the instruction does (near the end of a section or code version).
// It also matches ErrBadInsn.
var ErrInsnTruncated = errors.New("instruction truncated")

// InsnError reports why the bytes at IP do not decode.
type InsnError struct {
	IP    uint64
	Mode  ExecMode
	Bytes []byte // the bytes looked at (at most 15)
	Err   error  // ErrBadInsn or ErrInsnTruncated
	Why   string // detail, e.g. "opcode 0x06 invalid in 64-bit mode"
}

func (e *InsnError) Error() string {
	s := fmt.Sprintf("%s at %#x (%s", e.Err, e.IP, e.Mode)
	if len(e.Bytes) > 0 {
		s += fmt.Sprintf(", bytes % x", e.Bytes)
	}
	s += ")"
	if e.Why != "" {
		s += ": " + e.Why
	}
	return s
}

func (e *InsnError) Unwrap() error { return e.Err }

// Is makes a truncation error match ErrBadInsn as well.
func (e *InsnError) Is(target error) bool {
	return target == ErrBadInsn && e.Err == ErrInsnTruncated
}

// DecodeInsn decodes the instruction whose bytes start code[0], at address
// ip, in the given mode, into in. code holds the bytes available at ip (it
// may be longer than the instruction; shorter near the end of a section, in
// which case an instruction that does not fit gives ErrInsnTruncated).
//
// It computes length, class and direct target only, from tables in the
// spirit of libipt's pt_ild, and allocates nothing unless it fails. On
// error *in is unspecified.
func DecodeInsn(code []byte, ip uint64, mode ExecMode, in *Insn) error {
	in.IP = ip
	if r := ild(code, mode, in); r <= 0 {
		return ildError(code, ip, mode, r)
	}
	return nil
}

// InsnLen returns just the length of the instruction at code[0] (0 and an
// error if it does not decode).
func InsnLen(code []byte, mode ExecMode) (int, error) {
	var in Insn
	r := ild(code, mode, &in)
	if r <= 0 {
		return 0, ildError(code, 0, mode, r)
	}
	return r, nil
}

// IsPushf reports whether in is pushf/pushfd/pushfq (9C): it stores the
// flags register, trap flag included, to the stack. A tracer that
// single-steps it sees its own TF there.
func (in *Insn) IsPushf() bool { op, _ := in.opcode(); return op == 0x9c }

// IsPopf reports whether in is popf/popfd/popfq (9D), and its operand size
// in bytes (2 with an operand-size prefix, else 4 or 8 by the mode).
func (in *Insn) IsPopf() (bool, int) {
	op, o16 := in.opcode()
	switch {
	case op != 0x9d:
		return false, 0
	case o16:
		return true, 2
	case in.Mode == Mode64:
		return true, 8
	}
	return true, 4
}

// opcode returns in's first opcode byte after its legacy and REX
// prefixes, and whether an operand-size prefix (66) came before it.
func (in *Insn) opcode() (op byte, o16 bool) {
	for _, b := range in.Bytes() {
		switch {
		case b == 0x66:
			o16 = true
			continue
		case b == 0x67 || b == 0xf0 || b == 0xf2 || b == 0xf3 ||
			b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65:
			continue
		case in.Mode == Mode64 && b&0xf0 == 0x40:
			continue
		}
		return b, o16
	}
	return 0, o16
}
