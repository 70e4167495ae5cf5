// Package x86test holds the instruction table that the length decoder's
// and the AT&T formatter's tests share.
package x86test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/x86"
)

// Case is one tricky encoding with its expected decoding. The lengths
// are also checked against objdump (TestDecodeInsnVsObjdump).
type Case struct {
	Mode   x86.ExecMode
	Hex    string // instruction bytes (spaces allowed)
	IP     uint64
	Len    int
	Class  x86.InsnClass
	Target uint64 // for direct branches
	What   string
	NoObj  bool // objdump shows this differently (documented per case)
}

var Cases = []Case{
	// 64-bit: plain and prefixed flow instructions.
	{x86.Mode64, "90", 0x1000, 1, x86.ClassOther, 0, "nop", false},
	{x86.Mode64, "c3", 0x1000, 1, x86.ClassRet, 0, "ret", false},
	{x86.Mode64, "f3 c3", 0x1000, 2, x86.ClassRet, 0, "repz ret", false},
	{x86.Mode64, "c2 08 00", 0x1000, 3, x86.ClassRet, 0, "ret $8", false},
	{x86.Mode64, "40 c3", 0x1000, 2, x86.ClassRet, 0, "rex ret", false},
	{x86.Mode64, "e8 00 00 00 00", 0x1000, 5, x86.ClassCall, 0x1005, "call rel32", false},
	{x86.Mode64, "e8 fb ff ff ff", 0x1000, 5, x86.ClassCall, 0x1000, "call self", false},
	{x86.Mode64, "e9 00 00 00 80", 0xffffffff00001000, 5, x86.ClassJump, 0xfffffffe80001005, "jmp rel32 negative", false},
	{x86.Mode64, "eb fe", 0x1000, 2, x86.ClassJump, 0x1000, "jmp rel8 self", false},
	{x86.Mode64, "74 10", 0x1000, 2, x86.ClassCondJump, 0x1012, "je rel8", false},
	{x86.Mode64, "0f 84 00 01 00 00", 0x1000, 6, x86.ClassCondJump, 0x1106, "je rel32", false},
	{x86.Mode64, "2e 74 10", 0x1000, 3, x86.ClassCondJump, 0x1013, "je,pn", false},
	{x86.Mode64, "f2 e9 00 00 00 00", 0x1000, 6, x86.ClassJump, 0x1006, "bnd jmp", false},
	{x86.Mode64, "e3 f0", 0x1000, 2, x86.ClassCondJump, 0xff2, "jrcxz", false},
	{x86.Mode64, "67 e3 f0", 0x1000, 3, x86.ClassCondJump, 0xff3, "jecxz", false},
	{x86.Mode64, "e2 fe", 0x1000, 2, x86.ClassCondJump, 0x1000, "loop", false},
	{x86.Mode64, "e0 00", 0x1000, 2, x86.ClassCondJump, 0x1002, "loopne", false},
	{x86.Mode64, "e1 00", 0x1000, 2, x86.ClassCondJump, 0x1002, "loope", false},
	// Intel ignores 66 on near branches in 64-bit mode (objdump -M intel64).
	{x86.Mode64, "66 e8 00 00 00 00", 0x1000, 6, x86.ClassCall, 0x1006, "data16 call", false},
	{x86.Mode64, "66 e9 10 00 00 00", 0x1000, 6, x86.ClassJump, 0x1016, "data16 jmp", false},
	{x86.Mode64, "66 0f 85 10 00 00 00", 0x1000, 7, x86.ClassCondJump, 0x1017, "data16 jne", false},
	{x86.Mode64, "ff d0", 0x1000, 2, x86.ClassIndCall, 0, "call *%rax", false},
	{x86.Mode64, "41 ff d3", 0x1000, 3, x86.ClassIndCall, 0, "call *%r11", false},
	{x86.Mode64, "ff 14 25 00 10 00 00", 0x1000, 7, x86.ClassIndCall, 0, "call *abs32 (SIB, no base)", false},
	{x86.Mode64, "ff 15 00 10 00 00", 0x1000, 6, x86.ClassIndCall, 0, "call *rip", false},
	{x86.Mode64, "ff 25 00 00 00 00", 0x1000, 6, x86.ClassIndJump, 0, "jmp *rip", false},
	{x86.Mode64, "3e ff e0", 0x1000, 3, x86.ClassIndJump, 0, "notrack jmp *%rax", false},
	{x86.Mode64, "ff 64 24 08", 0x1000, 4, x86.ClassIndJump, 0, "jmp *8(%rsp)", false},
	{x86.Mode64, "ff a4 c8 00 01 00 00", 0x1000, 7, x86.ClassIndJump, 0, "jmp *disp32(SIB)", false},
	{x86.Mode64, "ff 1c 24", 0x1000, 3, x86.ClassFarCall, 0, "lcall *(%rsp)", false},
	{x86.Mode64, "48 ff 2c 24", 0x1000, 4, x86.ClassFarJump, 0, "rex.W ljmp *(%rsp)", false},
	{x86.Mode64, "48 cf", 0x1000, 2, x86.ClassFarRet, 0, "iretq", false},
	{x86.Mode64, "cb", 0x1000, 1, x86.ClassFarRet, 0, "lret", false},
	{x86.Mode64, "ca 04 00", 0x1000, 3, x86.ClassFarRet, 0, "lret $4", false},
	{x86.Mode64, "cc", 0x1000, 1, x86.ClassSyscall, 0, "int3", false},
	{x86.Mode64, "cd 80", 0x1000, 2, x86.ClassSyscall, 0, "int $0x80", false},
	{x86.Mode64, "f1", 0x1000, 1, x86.ClassSyscall, 0, "int1", false},
	{x86.Mode64, "0f 05", 0x1000, 2, x86.ClassSyscall, 0, "syscall", false},
	{x86.Mode64, "0f 34", 0x1000, 2, x86.ClassSyscall, 0, "sysenter", false},
	{x86.Mode64, "48 0f 07", 0x1000, 3, x86.ClassSysret, 0, "sysretq", false},
	{x86.Mode64, "0f 35", 0x1000, 2, x86.ClassSysret, 0, "sysexit", false},
	{x86.Mode64, "f3 0f ae e0", 0x1000, 4, x86.ClassPTWrite, 0, "ptwrite %eax", false},
	{x86.Mode64, "f3 48 0f ae 64 24 08", 0x1000, 7, x86.ClassPTWrite, 0, "ptwrite 8(%rsp)", false},
	{x86.Mode64, "0f ae 20", 0x1000, 3, x86.ClassOther, 0, "xsave (not ptwrite)", false},
	{x86.Mode64, "0f 01 c2", 0x1000, 3, x86.ClassVMEntry, 0, "vmlaunch", false},
	{x86.Mode64, "0f 01 c3", 0x1000, 3, x86.ClassVMEntry, 0, "vmresume", false},
	{x86.Mode64, "0f 01 c1", 0x1000, 3, x86.ClassVMExit, 0, "vmcall", false},
	{x86.Mode64, "f3 0f 01 ec", 0x1000, 4, x86.ClassFarRet, 0, "uiret", false},
	{x86.Mode64, "f3 0f 01 ca", 0x1000, 4, x86.ClassFarRet, 0, "eretu", true}, // objdump 2.40 predates FRED: "repz clac"
	{x86.Mode64, "f2 0f 01 ca", 0x1000, 4, x86.ClassFarRet, 0, "erets", true},
	{x86.Mode64, "0f 01 ca", 0x1000, 3, x86.ClassOther, 0, "clac", false},
	{x86.Mode64, "0f 22 d8", 0x1000, 3, x86.ClassMovCR3, 0, "mov %rax,%cr3", false},
	{x86.Mode64, "44 0f 22 d8", 0x1000, 4, x86.ClassOther, 0, "mov %rax,%cr11", true}, // objdump 2.40: (bad)
	{x86.Mode64, "0f 22 18", 0x1000, 3, x86.ClassMovCR3, 0, "mov cr3, mod ignored", false},
	{x86.Mode64, "0f 20 d8", 0x1000, 3, x86.ClassOther, 0, "mov %cr3,%rax", false},
	{x86.Mode64, "c7 f8 00 01 00 00", 0x1000, 6, x86.ClassOther, 0, "xbegin", false},
	{x86.Mode64, "c6 f8 01", 0x1000, 3, x86.ClassOther, 0, "xabort", false},
	// 64-bit: immediates and addressing.
	{x86.Mode64, "48 b8 88 77 66 55 44 33 22 11", 0x1000, 10, x86.ClassOther, 0, "movabs imm64", false},
	{x86.Mode64, "b8 44 33 22 11", 0x1000, 5, x86.ClassOther, 0, "mov imm32", false},
	{x86.Mode64, "66 b8 22 11", 0x1000, 4, x86.ClassOther, 0, "mov imm16", false},
	{x86.Mode64, "48 66 b8 22 11", 0x1000, 5, x86.ClassOther, 0, "REX then 66: REX ignored", true}, // objdump splits off the REX
	{x86.Mode64, "a1 88 77 66 55 44 33 22 11", 0x1000, 9, x86.ClassOther, 0, "movabs moffs64", false},
	{x86.Mode64, "67 a1 44 33 22 11", 0x1000, 6, x86.ClassOther, 0, "mov moffs32", false},
	{x86.Mode64, "f6 c1 01", 0x1000, 3, x86.ClassOther, 0, "test imm8", false},
	{x86.Mode64, "f6 c9 01", 0x1000, 3, x86.ClassOther, 0, "test /1 imm8", false},
	{x86.Mode64, "f6 d1", 0x1000, 2, x86.ClassOther, 0, "not", false},
	{x86.Mode64, "f7 c1 44 33 22 11", 0x1000, 6, x86.ClassOther, 0, "test imm32", false},
	{x86.Mode64, "66 f7 c1 22 11", 0x1000, 5, x86.ClassOther, 0, "test imm16", false},
	{x86.Mode64, "48 f7 c1 44 33 22 11", 0x1000, 7, x86.ClassOther, 0, "test imm32 sign-extended", false},
	{x86.Mode64, "f7 d9", 0x1000, 2, x86.ClassOther, 0, "neg", false},
	{x86.Mode64, "c8 10 00 01", 0x1000, 4, x86.ClassOther, 0, "enter", false},
	{x86.Mode64, "68 44 33 22 11", 0x1000, 5, x86.ClassOther, 0, "push imm32", false},
	{x86.Mode64, "66 68 22 11", 0x1000, 4, x86.ClassOther, 0, "pushw imm16", false},
	{x86.Mode64, "69 c0 44 33 22 11", 0x1000, 6, x86.ClassOther, 0, "imul imm32", false},
	{x86.Mode64, "6b c0 11", 0x1000, 3, x86.ClassOther, 0, "imul imm8", false},
	{x86.Mode64, "8b 04 25 00 10 00 00", 0x1000, 7, x86.ClassOther, 0, "mov abs32 via SIB", false},
	{x86.Mode64, "8b 44 24 08", 0x1000, 4, x86.ClassOther, 0, "mov disp8(SIB)", false},
	{x86.Mode64, "8b 84 24 00 01 00 00", 0x1000, 7, x86.ClassOther, 0, "mov disp32(SIB)", false},
	{x86.Mode64, "8b 05 00 10 00 00", 0x1000, 6, x86.ClassOther, 0, "mov rip-relative", false},
	{x86.Mode64, "67 8b 04 25 00 10 00 00", 0x1000, 8, x86.ClassOther, 0, "addr32 mov abs", false},
	{x86.Mode64, "66 2e 0f 1f 84 00 00 00 00 00", 0x1000, 10, x86.ClassOther, 0, "cs nopw", false},
	{x86.Mode64, "66 66 2e 0f 1f 84 00 00 00 00 00", 0x1000, 11, x86.ClassOther, 0, "data16 cs nopw", false},
	{x86.Mode64, "f0 48 0f b1 0f", 0x1000, 5, x86.ClassOther, 0, "lock cmpxchg", false},
	{x86.Mode64, "f3 0f 1e fa", 0x1000, 4, x86.ClassOther, 0, "endbr64", false},
	{x86.Mode64, "0f 01 ee", 0x1000, 3, x86.ClassOther, 0, "rdpkru", false},
	{x86.Mode64, "0f 01 ef", 0x1000, 3, x86.ClassOther, 0, "wrpkru", false},
	{x86.Mode64, "66 0f 78 c0 01 02", 0x1000, 6, x86.ClassOther, 0, "extrq imm, imm", false},
	{x86.Mode64, "f2 0f 78 c1 01 02", 0x1000, 6, x86.ClassOther, 0, "insertq imm, imm", false},
	{x86.Mode64, "0f 78 c0", 0x1000, 3, x86.ClassOther, 0, "vmread", false},
	{x86.Mode64, "0f 0f c1 9e", 0x1000, 4, x86.ClassOther, 0, "3DNow! pfadd", false},
	{x86.Mode64, "0f 3a 0f c1 08", 0x1000, 5, x86.ClassOther, 0, "palignr imm8", false},
	{x86.Mode64, "66 0f 38 00 c1", 0x1000, 5, x86.ClassOther, 0, "pshufb", false},
	{x86.Mode64, "66 0f 70 c1 1b", 0x1000, 5, x86.ClassOther, 0, "pshufd imm8", false},
	{x86.Mode64, "0f ba e0 05", 0x1000, 4, x86.ClassOther, 0, "bt imm8", false},
	{x86.Mode64, "48 0f c7 f8", 0x1000, 4, x86.ClassOther, 0, "rdseed", false},
	{x86.Mode64, "9b", 0x1000, 1, x86.ClassOther, 0, "fwait", false},
	// 64-bit: VEX, EVEX, XOP.
	{x86.Mode64, "c5 f8 77", 0x1000, 3, x86.ClassOther, 0, "vzeroupper", false},
	{x86.Mode64, "c5 fc 77", 0x1000, 3, x86.ClassOther, 0, "vzeroall", false},
	{x86.Mode64, "c4 e1 78 77", 0x1000, 4, x86.ClassOther, 0, "vzeroupper (VEX3)", false},
	{x86.Mode64, "c5 f9 70 c1 1b", 0x1000, 5, x86.ClassOther, 0, "vpshufd imm8", false},
	{x86.Mode64, "c5 fd 6f 44 24 20", 0x1000, 6, x86.ClassOther, 0, "vmovdqa disp8", false},
	{x86.Mode64, "c4 e3 79 0f c1 08", 0x1000, 6, x86.ClassOther, 0, "vpalignr imm8", false},
	{x86.Mode64, "c4 e2 7d 00 04 25 00 10 00 00", 0x1000, 10, x86.ClassOther, 0, "vpshufb abs32", false},
	{x86.Mode64, "c4 62 fb f6 a6 20 00 00 00", 0x1000, 9, x86.ClassOther, 0, "mulx", false},
	{x86.Mode64, "62 f1 7c 48 10 44 24 01", 0x1000, 8, x86.ClassOther, 0, "vmovups zmm disp8*N", false},
	{x86.Mode64, "62 f3 7d 48 0f c1 08", 0x1000, 7, x86.ClassOther, 0, "valignd imm8 (EVEX map 3)", false},
	{x86.Mode64, "62 f1 7d 48 72 e0 05", 0x1000, 7, x86.ClassOther, 0, "vpsrad imm8 (EVEX map 1)", false},
	{x86.Mode64, "62 f5 7c 48 58 c1", 0x1000, 6, x86.ClassOther, 0, "vaddph (EVEX map 5)", false},
	{x86.Mode64, "8f e8 78 c2 ec 0e", 0x1000, 6, x86.ClassOther, 0, "vprotd imm8 (XOP map 8)", false},
	{x86.Mode64, "8f e9 78 81 c1", 0x1000, 5, x86.ClassOther, 0, "vfrczps (XOP map 9)", false},
	{x86.Mode64, "8f ea 78 10 c0 44 33 22 11", 0x1000, 9, x86.ClassOther, 0, "bextr imm32 (XOP map 10)", false},
	{x86.Mode64, "8f c0", 0x1000, 2, x86.ClassOther, 0, "pop %rax (8F /0)", false},
	{x86.Mode64, "8f 44 24 08", 0x1000, 4, x86.ClassOther, 0, "pop 8(%rsp)", false},

	// 64-bit: the x86asm gaps the fix layer covers (Disasm checked too).
	{x86.Mode64, "66 4c 0f 38 f6 c9", 0x1000, 6, x86.ClassOther, 0, "adcx", false},
	{x86.Mode64, "f3 4d 0f 38 f6 44 24 08", 0x1000, 8, x86.ClassOther, 0, "adox mem", false},
	{x86.Mode64, "49 0f c7 fa", 0x1000, 4, x86.ClassOther, 0, "rdseed %r10", false},
	{x86.Mode64, "0f c7 f0", 0x1000, 3, x86.ClassOther, 0, "rdrand %eax", false},
	{x86.Mode64, "0f 0e", 0x1000, 2, x86.ClassOther, 0, "femms", false},
	{x86.Mode64, "d3 f1", 0x1000, 2, x86.ClassOther, 0, "shl /6", false},
	{x86.Mode64, "c1 77 08 04", 0x1000, 4, x86.ClassOther, 0, "shll /6 imm", false},
	{x86.Mode64, "f7 cc 34 a5 e5 f1", 0x1000, 6, x86.ClassOther, 0, "test /1", false},
	{x86.Mode64, "0f 78 33", 0x1000, 3, x86.ClassOther, 0, "vmread", false},
	{x86.Mode64, "0f 79 0c fb", 0x1000, 4, x86.ClassOther, 0, "vmwrite", false},
	{x86.Mode64, "0f 1e ef", 0x1000, 3, x86.ClassOther, 0, "hint nop reg", false},
	{x86.Mode64, "0f 1f 1d b8 0f 73 3a", 0x1000, 7, x86.ClassOther, 0, "nopl /3 rip", false},
	{x86.Mode64, "db e0", 0x1000, 2, x86.ClassOther, 0, "fneni", false},
	{x86.Mode64, "0f a7 c0", 0x1000, 3, x86.ClassOther, 0, "xstore-rng", false},
	{x86.Mode64, "f3 0f a7 c8", 0x1000, 4, x86.ClassOther, 0, "repz xcrypt-ecb", false},
	{x86.Mode64, "c4 e3 f9 6b c2 10", 0x1000, 6, x86.ClassOther, 0, "vfmaddsd (FMA4, W1)", false},
	{x86.Mode64, "c4 e3 79 7b 1d 1d 94 01 00 30", 0x1000, 10, x86.ClassOther, 0, "vfnmaddsd (FMA4, W0, rip)", false},
	{x86.Mode64, "c4 a3 d1 6b 0c d9 00", 0x1000, 7, x86.ClassOther, 0, "vfmaddsd (FMA4, SIB)", false},
	{x86.Mode64, "8f e8 e0 a3 05 d8 ca e1 00 60", 0x1000, 10, x86.ClassOther, 0, "vpperm", false},
	{x86.Mode64, "8f 49 78 d7 d2", 0x1000, 5, x86.ClassOther, 0, "vphadduwq", false},
	{x86.Mode64, "8f e8 78 cc c1 01", 0x1000, 6, x86.ClassOther, 0, "vpcomleb", false},
	{x86.Mode64, "8f e9 f8 90 c1", 0x1000, 5, x86.ClassOther, 0, "vprotb by register (W1)", false},
	{x86.Mode64, "c5 af 5a 6e 43", 0x1000, 5, x86.ClassOther, 0, "vcvtsd2ss with VEX.L=1", false},
	{x86.Mode64, "3e c4 62 fb f6 a6 20 00 00 00", 0x1000, 10, x86.ClassOther, 0, "ds mulx", false},
	{x86.Mode64, "62 f2 65 48 40 2d d1 6f 10 00", 0x1000, 10, x86.ClassOther, 0, "EVEX rip-relative", false},
	{x86.Mode64, "0f b6 04 25 00 00 00 00", 0x1000, 8, x86.ClassOther, 0, "movzbl abs 0", false},
	{x86.Mode64, "c7 85 78 ff ff ff ff ff ff 7f", 0x1000, 10, x86.ClassOther, 0, "negative disp32", false},
	{x86.Mode64, "48 8b 04 25 f8 ff ff ff", 0x1000, 8, x86.ClassOther, 0, "negative abs disp32", false},
	{x86.Mode64, "62 f3 7d 48 3f c2 00", 0x1000, 7, x86.ClassOther, 0, "vpcmpeqb alias", false},
	{x86.Mode64, "c4 e3 41 44 cb 00", 0x1000, 6, x86.ClassOther, 0, "vpclmullqlqdq alias", false},
	{x86.Mode64, "6a cb", 0x1000, 2, x86.ClassOther, 0, "push imm8 sign-extended", false},
	{x86.Mode64, "de 00", 0x1000, 2, x86.ClassOther, 0, "fiadds", false},

	// APX REX2 (objdump 2.40 predates APX).
	{x86.Mode64, "d5 00 a1 88 77 66 55 44 33 22 11", 0x1000, 11, x86.ClassJump, 0x1122334455667788, "jmpabs", true},
	{x86.Mode64, "d5 19 8b 44 24 08", 0x1000, 6, x86.ClassOther, 0, "REX2 mov", true},
	{x86.Mode64, "d5 80 b6 c0", 0x1000, 4, x86.ClassOther, 0, "REX2 map 1 movzbl", true},
	{x86.Mode64, "d5 18 c7 c0 44 33 22 11", 0x1000, 8, x86.ClassOther, 0, "REX2.W mov imm32", true},
	{x86.Mode64, "d5 00 ff d0", 0x1000, 4, x86.ClassIndCall, 0, "REX2 call *%rax", true},

	// 32-bit.
	{x86.Mode32, "e8 00 00 00 00", 0x1000, 5, x86.ClassCall, 0x1005, "call rel32", false},
	{x86.Mode32, "e9 20 00 00 00", 0xfffffff0, 5, x86.ClassJump, 0x15, "jmp wraps at 4 GiB", false},
	{x86.Mode32, "66 e8 00 00", 0x1000, 4, x86.ClassCall, 0x1004, "call rel16", false},
	{x86.Mode32, "66 e9 00 00", 0x2fffc, 4, x86.ClassJump, 0, "jmp rel16 truncates EIP to 16 bits", false},
	{x86.Mode32, "66 0f 84 10 00", 0x1000, 5, x86.ClassCondJump, 0x1015, "je rel16", false},
	{x86.Mode32, "74 fe", 0x1000, 2, x86.ClassCondJump, 0x1000, "je self", false},
	{x86.Mode32, "e3 00", 0x1000, 2, x86.ClassCondJump, 0x1002, "jecxz", false},
	{x86.Mode32, "c4 00", 0x1000, 2, x86.ClassOther, 0, "les (not VEX)", false},
	{x86.Mode32, "c5 05 00 10 00 00", 0x1000, 6, x86.ClassOther, 0, "lds abs (not VEX)", false},
	{x86.Mode32, "c5 f8 77", 0x1000, 3, x86.ClassOther, 0, "vzeroupper", false},
	{x86.Mode32, "62 00", 0x1000, 2, x86.ClassOther, 0, "bound (not EVEX)", false},
	{x86.Mode32, "62 f1 7c 48 10 44 24 01", 0x1000, 8, x86.ClassOther, 0, "EVEX vmovups", false},
	{x86.Mode32, "9a 00 00 00 00 10 00", 0x1000, 7, x86.ClassFarCall, 0, "lcall ptr16:32", false},
	{x86.Mode32, "66 9a 00 00 10 00", 0x1000, 6, x86.ClassFarCall, 0, "lcallw ptr16:16", false},
	{x86.Mode32, "ea 00 00 00 00 10 00", 0x1000, 7, x86.ClassFarJump, 0, "ljmp ptr16:32", false},
	{x86.Mode32, "ce", 0x1000, 1, x86.ClassSyscall, 0, "into", false},
	{x86.Mode32, "cd 80", 0x1000, 2, x86.ClassSyscall, 0, "int $0x80", false},
	{x86.Mode32, "cf", 0x1000, 1, x86.ClassFarRet, 0, "iret", false},
	{x86.Mode32, "a1 00 10 00 00", 0x1000, 5, x86.ClassOther, 0, "mov moffs32", false},
	{x86.Mode32, "67 a1 00 10", 0x1000, 4, x86.ClassOther, 0, "mov moffs16", false},
	{x86.Mode32, "8b 04 24", 0x1000, 3, x86.ClassOther, 0, "mov (SIB)", false},
	{x86.Mode32, "8b 05 00 10 00 00", 0x1000, 6, x86.ClassOther, 0, "mov abs32 (no RIP in 32-bit)", false},
	{x86.Mode32, "67 8b 46 08", 0x1000, 4, x86.ClassOther, 0, "16-bit addressing disp8", false},
	{x86.Mode32, "67 8b 06 00 10", 0x1000, 5, x86.ClassOther, 0, "16-bit addressing disp16", false},
	{x86.Mode32, "67 8b 04", 0x1000, 3, x86.ClassOther, 0, "16-bit addressing (si), no SIB", false},
	{x86.Mode32, "40", 0x1000, 1, x86.ClassOther, 0, "inc %eax (not REX)", false},
	{x86.Mode32, "48 c3", 0x1000, 1, x86.ClassOther, 0, "dec %eax, then ret", false},
	{x86.Mode32, "b8 44 33 22 11", 0x1000, 5, x86.ClassOther, 0, "mov imm32", false},
	{x86.Mode32, "66 b8 22 11", 0x1000, 4, x86.ClassOther, 0, "mov imm16", false},
	{x86.Mode32, "66 f7 c1 22 11", 0x1000, 5, x86.ClassOther, 0, "test imm16", false},
	{x86.Mode32, "0f 22 d8", 0x1000, 3, x86.ClassMovCR3, 0, "mov %eax,%cr3", false},
	{x86.Mode32, "06", 0x1000, 1, x86.ClassOther, 0, "push %es", false},
	{x86.Mode32, "d4 0a", 0x1000, 2, x86.ClassOther, 0, "aam", false},
	{x86.Mode32, "8f e8 78 c2 ec 0e", 0x1000, 6, x86.ClassOther, 0, "XOP in 32-bit mode", false},

	// 16-bit.
	{x86.Mode16, "e8 00 00", 0x1000, 3, x86.ClassCall, 0x1003, "call rel16", false},
	{x86.Mode16, "e9 20 00", 0xfff0, 3, x86.ClassJump, 0x13, "jmp wraps at 64 KiB", false},
	{x86.Mode16, "66 e8 00 00 00 00", 0x1000, 6, x86.ClassCall, 0x1006, "call rel32", false},
	{x86.Mode16, "66 e9 00 00 01 00", 0xfff0, 6, x86.ClassJump, 0x1fff6, "jmp rel32 past 64 KiB", false},
	{x86.Mode16, "eb fe", 0x1000, 2, x86.ClassJump, 0x1000, "jmp self", false},
	{x86.Mode16, "0f 84 00 01", 0x1000, 4, x86.ClassCondJump, 0x1104, "je rel16", false},
	{x86.Mode16, "e2 fe", 0x1000, 2, x86.ClassCondJump, 0x1000, "loop", false},
	{x86.Mode16, "8b 46 08", 0x1000, 3, x86.ClassOther, 0, "mov 8(%bp)", false},
	{x86.Mode16, "8b 06 34 12", 0x1000, 4, x86.ClassOther, 0, "mov disp16", false},
	{x86.Mode16, "8b 86 34 12", 0x1000, 4, x86.ClassOther, 0, "mov disp16(%bp)", false},
	{x86.Mode16, "67 8b 04 24", 0x1000, 4, x86.ClassOther, 0, "32-bit addressing SIB", false},
	{x86.Mode16, "67 8b 05 00 10 00 00", 0x1000, 7, x86.ClassOther, 0, "32-bit addressing abs", false},
	{x86.Mode16, "b8 34 12", 0x1000, 3, x86.ClassOther, 0, "mov imm16", false},
	{x86.Mode16, "66 b8 44 33 22 11", 0x1000, 6, x86.ClassOther, 0, "mov imm32", false},
	{x86.Mode16, "a1 00 10", 0x1000, 3, x86.ClassOther, 0, "mov moffs16", false},
	{x86.Mode16, "67 a1 00 10 00 00", 0x1000, 6, x86.ClassOther, 0, "mov moffs32", false},
	{x86.Mode16, "9a 00 00 00 10", 0x1000, 5, x86.ClassFarCall, 0, "lcall ptr16:16", false},
	{x86.Mode16, "66 9a 00 00 00 00 00 10", 0x1000, 8, x86.ClassFarCall, 0, "lcall ptr16:32", false},
	{x86.Mode16, "ea 00 00 00 10", 0x1000, 5, x86.ClassFarJump, 0, "ljmp ptr16:16", false},
	{x86.Mode16, "f7 c1 22 11", 0x1000, 4, x86.ClassOther, 0, "test imm16", false},
	{x86.Mode16, "66 f7 c1 44 33 22 11", 0x1000, 7, x86.ClassOther, 0, "test imm32", false},
	{x86.Mode16, "c8 10 00 01", 0x1000, 4, x86.ClassOther, 0, "enter", false},
	{x86.Mode16, "c2 02 00", 0x1000, 3, x86.ClassRet, 0, "ret $2", false},
	{x86.Mode16, "cf", 0x1000, 1, x86.ClassFarRet, 0, "iret", false},
}

// MustHex decodes s (hex bytes, spaces allowed) or fails the test.
func MustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q", s)
	}
	return b
}
