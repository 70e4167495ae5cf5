package decode

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// insnCase is one tricky encoding with its expected decoding. The lengths
// are also checked against objdump (TestDecodeInsnVsObjdump).
type insnCase struct {
	mode   ExecMode
	hex    string // instruction bytes (spaces allowed)
	ip     uint64
	len    int
	class  InsnClass
	target uint64 // for direct branches
	what   string
	noObj  bool // objdump shows this differently (documented per case)
}

var insnCases = []insnCase{
	// 64-bit: plain and prefixed flow instructions.
	{Mode64, "90", 0x1000, 1, ClassOther, 0, "nop", false},
	{Mode64, "c3", 0x1000, 1, ClassRet, 0, "ret", false},
	{Mode64, "f3 c3", 0x1000, 2, ClassRet, 0, "repz ret", false},
	{Mode64, "c2 08 00", 0x1000, 3, ClassRet, 0, "ret $8", false},
	{Mode64, "40 c3", 0x1000, 2, ClassRet, 0, "rex ret", false},
	{Mode64, "e8 00 00 00 00", 0x1000, 5, ClassCall, 0x1005, "call rel32", false},
	{Mode64, "e8 fb ff ff ff", 0x1000, 5, ClassCall, 0x1000, "call self", false},
	{Mode64, "e9 00 00 00 80", 0xffffffff00001000, 5, ClassJump, 0xfffffffe80001005, "jmp rel32 negative", false},
	{Mode64, "eb fe", 0x1000, 2, ClassJump, 0x1000, "jmp rel8 self", false},
	{Mode64, "74 10", 0x1000, 2, ClassCondJump, 0x1012, "je rel8", false},
	{Mode64, "0f 84 00 01 00 00", 0x1000, 6, ClassCondJump, 0x1106, "je rel32", false},
	{Mode64, "2e 74 10", 0x1000, 3, ClassCondJump, 0x1013, "je,pn", false},
	{Mode64, "f2 e9 00 00 00 00", 0x1000, 6, ClassJump, 0x1006, "bnd jmp", false},
	{Mode64, "e3 f0", 0x1000, 2, ClassCondJump, 0xff2, "jrcxz", false},
	{Mode64, "67 e3 f0", 0x1000, 3, ClassCondJump, 0xff3, "jecxz", false},
	{Mode64, "e2 fe", 0x1000, 2, ClassCondJump, 0x1000, "loop", false},
	{Mode64, "e0 00", 0x1000, 2, ClassCondJump, 0x1002, "loopne", false},
	{Mode64, "e1 00", 0x1000, 2, ClassCondJump, 0x1002, "loope", false},
	// Intel ignores 66 on near branches in 64-bit mode (objdump -M intel64).
	{Mode64, "66 e8 00 00 00 00", 0x1000, 6, ClassCall, 0x1006, "data16 call", false},
	{Mode64, "66 e9 10 00 00 00", 0x1000, 6, ClassJump, 0x1016, "data16 jmp", false},
	{Mode64, "66 0f 85 10 00 00 00", 0x1000, 7, ClassCondJump, 0x1017, "data16 jne", false},
	{Mode64, "ff d0", 0x1000, 2, ClassIndCall, 0, "call *%rax", false},
	{Mode64, "41 ff d3", 0x1000, 3, ClassIndCall, 0, "call *%r11", false},
	{Mode64, "ff 14 25 00 10 00 00", 0x1000, 7, ClassIndCall, 0, "call *abs32 (SIB, no base)", false},
	{Mode64, "ff 15 00 10 00 00", 0x1000, 6, ClassIndCall, 0, "call *rip", false},
	{Mode64, "ff 25 00 00 00 00", 0x1000, 6, ClassIndJump, 0, "jmp *rip", false},
	{Mode64, "3e ff e0", 0x1000, 3, ClassIndJump, 0, "notrack jmp *%rax", false},
	{Mode64, "ff 64 24 08", 0x1000, 4, ClassIndJump, 0, "jmp *8(%rsp)", false},
	{Mode64, "ff a4 c8 00 01 00 00", 0x1000, 7, ClassIndJump, 0, "jmp *disp32(SIB)", false},
	{Mode64, "ff 1c 24", 0x1000, 3, ClassFarCall, 0, "lcall *(%rsp)", false},
	{Mode64, "48 ff 2c 24", 0x1000, 4, ClassFarJump, 0, "rex.W ljmp *(%rsp)", false},
	{Mode64, "48 cf", 0x1000, 2, ClassFarRet, 0, "iretq", false},
	{Mode64, "cb", 0x1000, 1, ClassFarRet, 0, "lret", false},
	{Mode64, "ca 04 00", 0x1000, 3, ClassFarRet, 0, "lret $4", false},
	{Mode64, "cc", 0x1000, 1, ClassSyscall, 0, "int3", false},
	{Mode64, "cd 80", 0x1000, 2, ClassSyscall, 0, "int $0x80", false},
	{Mode64, "f1", 0x1000, 1, ClassSyscall, 0, "int1", false},
	{Mode64, "0f 05", 0x1000, 2, ClassSyscall, 0, "syscall", false},
	{Mode64, "0f 34", 0x1000, 2, ClassSyscall, 0, "sysenter", false},
	{Mode64, "48 0f 07", 0x1000, 3, ClassSysret, 0, "sysretq", false},
	{Mode64, "0f 35", 0x1000, 2, ClassSysret, 0, "sysexit", false},
	{Mode64, "f3 0f ae e0", 0x1000, 4, ClassPTWrite, 0, "ptwrite %eax", false},
	{Mode64, "f3 48 0f ae 64 24 08", 0x1000, 7, ClassPTWrite, 0, "ptwrite 8(%rsp)", false},
	{Mode64, "0f ae 20", 0x1000, 3, ClassOther, 0, "xsave (not ptwrite)", false},
	{Mode64, "0f 01 c2", 0x1000, 3, ClassVMEntry, 0, "vmlaunch", false},
	{Mode64, "0f 01 c3", 0x1000, 3, ClassVMEntry, 0, "vmresume", false},
	{Mode64, "0f 01 c1", 0x1000, 3, ClassVMExit, 0, "vmcall", false},
	{Mode64, "f3 0f 01 ec", 0x1000, 4, ClassFarRet, 0, "uiret", false},
	{Mode64, "f3 0f 01 ca", 0x1000, 4, ClassFarRet, 0, "eretu", true}, // objdump 2.40 predates FRED: "repz clac"
	{Mode64, "f2 0f 01 ca", 0x1000, 4, ClassFarRet, 0, "erets", true},
	{Mode64, "0f 01 ca", 0x1000, 3, ClassOther, 0, "clac", false},
	{Mode64, "0f 22 d8", 0x1000, 3, ClassMovCR3, 0, "mov %rax,%cr3", false},
	{Mode64, "44 0f 22 d8", 0x1000, 4, ClassOther, 0, "mov %rax,%cr11", true}, // objdump 2.40: (bad)
	{Mode64, "0f 22 18", 0x1000, 3, ClassMovCR3, 0, "mov cr3, mod ignored", false},
	{Mode64, "0f 20 d8", 0x1000, 3, ClassOther, 0, "mov %cr3,%rax", false},
	{Mode64, "c7 f8 00 01 00 00", 0x1000, 6, ClassOther, 0, "xbegin", false},
	{Mode64, "c6 f8 01", 0x1000, 3, ClassOther, 0, "xabort", false},
	// 64-bit: immediates and addressing.
	{Mode64, "48 b8 88 77 66 55 44 33 22 11", 0x1000, 10, ClassOther, 0, "movabs imm64", false},
	{Mode64, "b8 44 33 22 11", 0x1000, 5, ClassOther, 0, "mov imm32", false},
	{Mode64, "66 b8 22 11", 0x1000, 4, ClassOther, 0, "mov imm16", false},
	{Mode64, "48 66 b8 22 11", 0x1000, 5, ClassOther, 0, "REX then 66: REX ignored", true}, // objdump splits off the REX
	{Mode64, "a1 88 77 66 55 44 33 22 11", 0x1000, 9, ClassOther, 0, "movabs moffs64", false},
	{Mode64, "67 a1 44 33 22 11", 0x1000, 6, ClassOther, 0, "mov moffs32", false},
	{Mode64, "f6 c1 01", 0x1000, 3, ClassOther, 0, "test imm8", false},
	{Mode64, "f6 c9 01", 0x1000, 3, ClassOther, 0, "test /1 imm8", false},
	{Mode64, "f6 d1", 0x1000, 2, ClassOther, 0, "not", false},
	{Mode64, "f7 c1 44 33 22 11", 0x1000, 6, ClassOther, 0, "test imm32", false},
	{Mode64, "66 f7 c1 22 11", 0x1000, 5, ClassOther, 0, "test imm16", false},
	{Mode64, "48 f7 c1 44 33 22 11", 0x1000, 7, ClassOther, 0, "test imm32 sign-extended", false},
	{Mode64, "f7 d9", 0x1000, 2, ClassOther, 0, "neg", false},
	{Mode64, "c8 10 00 01", 0x1000, 4, ClassOther, 0, "enter", false},
	{Mode64, "68 44 33 22 11", 0x1000, 5, ClassOther, 0, "push imm32", false},
	{Mode64, "66 68 22 11", 0x1000, 4, ClassOther, 0, "pushw imm16", false},
	{Mode64, "69 c0 44 33 22 11", 0x1000, 6, ClassOther, 0, "imul imm32", false},
	{Mode64, "6b c0 11", 0x1000, 3, ClassOther, 0, "imul imm8", false},
	{Mode64, "8b 04 25 00 10 00 00", 0x1000, 7, ClassOther, 0, "mov abs32 via SIB", false},
	{Mode64, "8b 44 24 08", 0x1000, 4, ClassOther, 0, "mov disp8(SIB)", false},
	{Mode64, "8b 84 24 00 01 00 00", 0x1000, 7, ClassOther, 0, "mov disp32(SIB)", false},
	{Mode64, "8b 05 00 10 00 00", 0x1000, 6, ClassOther, 0, "mov rip-relative", false},
	{Mode64, "67 8b 04 25 00 10 00 00", 0x1000, 8, ClassOther, 0, "addr32 mov abs", false},
	{Mode64, "66 2e 0f 1f 84 00 00 00 00 00", 0x1000, 10, ClassOther, 0, "cs nopw", false},
	{Mode64, "66 66 2e 0f 1f 84 00 00 00 00 00", 0x1000, 11, ClassOther, 0, "data16 cs nopw", false},
	{Mode64, "f0 48 0f b1 0f", 0x1000, 5, ClassOther, 0, "lock cmpxchg", false},
	{Mode64, "f3 0f 1e fa", 0x1000, 4, ClassOther, 0, "endbr64", false},
	{Mode64, "0f 01 ee", 0x1000, 3, ClassOther, 0, "rdpkru", false},
	{Mode64, "0f 01 ef", 0x1000, 3, ClassOther, 0, "wrpkru", false},
	{Mode64, "66 0f 78 c0 01 02", 0x1000, 6, ClassOther, 0, "extrq imm, imm", false},
	{Mode64, "f2 0f 78 c1 01 02", 0x1000, 6, ClassOther, 0, "insertq imm, imm", false},
	{Mode64, "0f 78 c0", 0x1000, 3, ClassOther, 0, "vmread", false},
	{Mode64, "0f 0f c1 9e", 0x1000, 4, ClassOther, 0, "3DNow! pfadd", false},
	{Mode64, "0f 3a 0f c1 08", 0x1000, 5, ClassOther, 0, "palignr imm8", false},
	{Mode64, "66 0f 38 00 c1", 0x1000, 5, ClassOther, 0, "pshufb", false},
	{Mode64, "66 0f 70 c1 1b", 0x1000, 5, ClassOther, 0, "pshufd imm8", false},
	{Mode64, "0f ba e0 05", 0x1000, 4, ClassOther, 0, "bt imm8", false},
	{Mode64, "48 0f c7 f8", 0x1000, 4, ClassOther, 0, "rdseed", false},
	{Mode64, "9b", 0x1000, 1, ClassOther, 0, "fwait", false},
	// 64-bit: VEX, EVEX, XOP.
	{Mode64, "c5 f8 77", 0x1000, 3, ClassOther, 0, "vzeroupper", false},
	{Mode64, "c5 fc 77", 0x1000, 3, ClassOther, 0, "vzeroall", false},
	{Mode64, "c4 e1 78 77", 0x1000, 4, ClassOther, 0, "vzeroupper (VEX3)", false},
	{Mode64, "c5 f9 70 c1 1b", 0x1000, 5, ClassOther, 0, "vpshufd imm8", false},
	{Mode64, "c5 fd 6f 44 24 20", 0x1000, 6, ClassOther, 0, "vmovdqa disp8", false},
	{Mode64, "c4 e3 79 0f c1 08", 0x1000, 6, ClassOther, 0, "vpalignr imm8", false},
	{Mode64, "c4 e2 7d 00 04 25 00 10 00 00", 0x1000, 10, ClassOther, 0, "vpshufb abs32", false},
	{Mode64, "c4 62 fb f6 a6 20 00 00 00", 0x1000, 9, ClassOther, 0, "mulx", false},
	{Mode64, "62 f1 7c 48 10 44 24 01", 0x1000, 8, ClassOther, 0, "vmovups zmm disp8*N", false},
	{Mode64, "62 f3 7d 48 0f c1 08", 0x1000, 7, ClassOther, 0, "valignd imm8 (EVEX map 3)", false},
	{Mode64, "62 f1 7d 48 72 e0 05", 0x1000, 7, ClassOther, 0, "vpsrad imm8 (EVEX map 1)", false},
	{Mode64, "62 f5 7c 48 58 c1", 0x1000, 6, ClassOther, 0, "vaddph (EVEX map 5)", false},
	{Mode64, "8f e8 78 c2 ec 0e", 0x1000, 6, ClassOther, 0, "vprotd imm8 (XOP map 8)", false},
	{Mode64, "8f e9 78 81 c1", 0x1000, 5, ClassOther, 0, "vfrczps (XOP map 9)", false},
	{Mode64, "8f ea 78 10 c0 44 33 22 11", 0x1000, 9, ClassOther, 0, "bextr imm32 (XOP map 10)", false},
	{Mode64, "8f c0", 0x1000, 2, ClassOther, 0, "pop %rax (8F /0)", false},
	{Mode64, "8f 44 24 08", 0x1000, 4, ClassOther, 0, "pop 8(%rsp)", false},

	// 64-bit: the x86asm gaps the fix layer covers (Disasm checked too).
	{Mode64, "66 4c 0f 38 f6 c9", 0x1000, 6, ClassOther, 0, "adcx", false},
	{Mode64, "f3 4d 0f 38 f6 44 24 08", 0x1000, 8, ClassOther, 0, "adox mem", false},
	{Mode64, "49 0f c7 fa", 0x1000, 4, ClassOther, 0, "rdseed %r10", false},
	{Mode64, "0f c7 f0", 0x1000, 3, ClassOther, 0, "rdrand %eax", false},
	{Mode64, "0f 0e", 0x1000, 2, ClassOther, 0, "femms", false},
	{Mode64, "d3 f1", 0x1000, 2, ClassOther, 0, "shl /6", false},
	{Mode64, "c1 77 08 04", 0x1000, 4, ClassOther, 0, "shll /6 imm", false},
	{Mode64, "f7 cc 34 a5 e5 f1", 0x1000, 6, ClassOther, 0, "test /1", false},
	{Mode64, "0f 78 33", 0x1000, 3, ClassOther, 0, "vmread", false},
	{Mode64, "0f 79 0c fb", 0x1000, 4, ClassOther, 0, "vmwrite", false},
	{Mode64, "0f 1e ef", 0x1000, 3, ClassOther, 0, "hint nop reg", false},
	{Mode64, "0f 1f 1d b8 0f 73 3a", 0x1000, 7, ClassOther, 0, "nopl /3 rip", false},
	{Mode64, "db e0", 0x1000, 2, ClassOther, 0, "fneni", false},
	{Mode64, "0f a7 c0", 0x1000, 3, ClassOther, 0, "xstore-rng", false},
	{Mode64, "f3 0f a7 c8", 0x1000, 4, ClassOther, 0, "repz xcrypt-ecb", false},
	{Mode64, "c4 e3 f9 6b c2 10", 0x1000, 6, ClassOther, 0, "vfmaddsd (FMA4, W1)", false},
	{Mode64, "c4 e3 79 7b 1d 1d 94 01 00 30", 0x1000, 10, ClassOther, 0, "vfnmaddsd (FMA4, W0, rip)", false},
	{Mode64, "c4 a3 d1 6b 0c d9 00", 0x1000, 7, ClassOther, 0, "vfmaddsd (FMA4, SIB)", false},
	{Mode64, "8f e8 e0 a3 05 d8 ca e1 00 60", 0x1000, 10, ClassOther, 0, "vpperm", false},
	{Mode64, "8f 49 78 d7 d2", 0x1000, 5, ClassOther, 0, "vphadduwq", false},
	{Mode64, "8f e8 78 cc c1 01", 0x1000, 6, ClassOther, 0, "vpcomleb", false},
	{Mode64, "8f e9 f8 90 c1", 0x1000, 5, ClassOther, 0, "vprotb by register (W1)", false},
	{Mode64, "c5 af 5a 6e 43", 0x1000, 5, ClassOther, 0, "vcvtsd2ss with VEX.L=1", false},
	{Mode64, "3e c4 62 fb f6 a6 20 00 00 00", 0x1000, 10, ClassOther, 0, "ds mulx", false},
	{Mode64, "62 f2 65 48 40 2d d1 6f 10 00", 0x1000, 10, ClassOther, 0, "EVEX rip-relative", false},
	{Mode64, "0f b6 04 25 00 00 00 00", 0x1000, 8, ClassOther, 0, "movzbl abs 0", false},
	{Mode64, "c7 85 78 ff ff ff ff ff ff 7f", 0x1000, 10, ClassOther, 0, "negative disp32", false},
	{Mode64, "48 8b 04 25 f8 ff ff ff", 0x1000, 8, ClassOther, 0, "negative abs disp32", false},
	{Mode64, "62 f3 7d 48 3f c2 00", 0x1000, 7, ClassOther, 0, "vpcmpeqb alias", false},
	{Mode64, "c4 e3 41 44 cb 00", 0x1000, 6, ClassOther, 0, "vpclmullqlqdq alias", false},
	{Mode64, "6a cb", 0x1000, 2, ClassOther, 0, "push imm8 sign-extended", false},
	{Mode64, "de 00", 0x1000, 2, ClassOther, 0, "fiadds", false},

	// APX REX2 (objdump 2.40 predates APX).
	{Mode64, "d5 00 a1 88 77 66 55 44 33 22 11", 0x1000, 11, ClassJump, 0x1122334455667788, "jmpabs", true},
	{Mode64, "d5 19 8b 44 24 08", 0x1000, 6, ClassOther, 0, "REX2 mov", true},
	{Mode64, "d5 80 b6 c0", 0x1000, 4, ClassOther, 0, "REX2 map 1 movzbl", true},
	{Mode64, "d5 18 c7 c0 44 33 22 11", 0x1000, 8, ClassOther, 0, "REX2.W mov imm32", true},
	{Mode64, "d5 00 ff d0", 0x1000, 4, ClassIndCall, 0, "REX2 call *%rax", true},

	// 32-bit.
	{Mode32, "e8 00 00 00 00", 0x1000, 5, ClassCall, 0x1005, "call rel32", false},
	{Mode32, "e9 20 00 00 00", 0xfffffff0, 5, ClassJump, 0x15, "jmp wraps at 4 GiB", false},
	{Mode32, "66 e8 00 00", 0x1000, 4, ClassCall, 0x1004, "call rel16", false},
	{Mode32, "66 e9 00 00", 0x2fffc, 4, ClassJump, 0, "jmp rel16 truncates EIP to 16 bits", false},
	{Mode32, "66 0f 84 10 00", 0x1000, 5, ClassCondJump, 0x1015, "je rel16", false},
	{Mode32, "74 fe", 0x1000, 2, ClassCondJump, 0x1000, "je self", false},
	{Mode32, "e3 00", 0x1000, 2, ClassCondJump, 0x1002, "jecxz", false},
	{Mode32, "c4 00", 0x1000, 2, ClassOther, 0, "les (not VEX)", false},
	{Mode32, "c5 05 00 10 00 00", 0x1000, 6, ClassOther, 0, "lds abs (not VEX)", false},
	{Mode32, "c5 f8 77", 0x1000, 3, ClassOther, 0, "vzeroupper", false},
	{Mode32, "62 00", 0x1000, 2, ClassOther, 0, "bound (not EVEX)", false},
	{Mode32, "62 f1 7c 48 10 44 24 01", 0x1000, 8, ClassOther, 0, "EVEX vmovups", false},
	{Mode32, "9a 00 00 00 00 10 00", 0x1000, 7, ClassFarCall, 0, "lcall ptr16:32", false},
	{Mode32, "66 9a 00 00 10 00", 0x1000, 6, ClassFarCall, 0, "lcallw ptr16:16", false},
	{Mode32, "ea 00 00 00 00 10 00", 0x1000, 7, ClassFarJump, 0, "ljmp ptr16:32", false},
	{Mode32, "ce", 0x1000, 1, ClassSyscall, 0, "into", false},
	{Mode32, "cd 80", 0x1000, 2, ClassSyscall, 0, "int $0x80", false},
	{Mode32, "cf", 0x1000, 1, ClassFarRet, 0, "iret", false},
	{Mode32, "a1 00 10 00 00", 0x1000, 5, ClassOther, 0, "mov moffs32", false},
	{Mode32, "67 a1 00 10", 0x1000, 4, ClassOther, 0, "mov moffs16", false},
	{Mode32, "8b 04 24", 0x1000, 3, ClassOther, 0, "mov (SIB)", false},
	{Mode32, "8b 05 00 10 00 00", 0x1000, 6, ClassOther, 0, "mov abs32 (no RIP in 32-bit)", false},
	{Mode32, "67 8b 46 08", 0x1000, 4, ClassOther, 0, "16-bit addressing disp8", false},
	{Mode32, "67 8b 06 00 10", 0x1000, 5, ClassOther, 0, "16-bit addressing disp16", false},
	{Mode32, "67 8b 04", 0x1000, 3, ClassOther, 0, "16-bit addressing (si), no SIB", false},
	{Mode32, "40", 0x1000, 1, ClassOther, 0, "inc %eax (not REX)", false},
	{Mode32, "48 c3", 0x1000, 1, ClassOther, 0, "dec %eax, then ret", false},
	{Mode32, "b8 44 33 22 11", 0x1000, 5, ClassOther, 0, "mov imm32", false},
	{Mode32, "66 b8 22 11", 0x1000, 4, ClassOther, 0, "mov imm16", false},
	{Mode32, "66 f7 c1 22 11", 0x1000, 5, ClassOther, 0, "test imm16", false},
	{Mode32, "0f 22 d8", 0x1000, 3, ClassMovCR3, 0, "mov %eax,%cr3", false},
	{Mode32, "06", 0x1000, 1, ClassOther, 0, "push %es", false},
	{Mode32, "d4 0a", 0x1000, 2, ClassOther, 0, "aam", false},
	{Mode32, "8f e8 78 c2 ec 0e", 0x1000, 6, ClassOther, 0, "XOP in 32-bit mode", false},

	// 16-bit.
	{Mode16, "e8 00 00", 0x1000, 3, ClassCall, 0x1003, "call rel16", false},
	{Mode16, "e9 20 00", 0xfff0, 3, ClassJump, 0x13, "jmp wraps at 64 KiB", false},
	{Mode16, "66 e8 00 00 00 00", 0x1000, 6, ClassCall, 0x1006, "call rel32", false},
	{Mode16, "66 e9 00 00 01 00", 0xfff0, 6, ClassJump, 0x1fff6, "jmp rel32 past 64 KiB", false},
	{Mode16, "eb fe", 0x1000, 2, ClassJump, 0x1000, "jmp self", false},
	{Mode16, "0f 84 00 01", 0x1000, 4, ClassCondJump, 0x1104, "je rel16", false},
	{Mode16, "e2 fe", 0x1000, 2, ClassCondJump, 0x1000, "loop", false},
	{Mode16, "8b 46 08", 0x1000, 3, ClassOther, 0, "mov 8(%bp)", false},
	{Mode16, "8b 06 34 12", 0x1000, 4, ClassOther, 0, "mov disp16", false},
	{Mode16, "8b 86 34 12", 0x1000, 4, ClassOther, 0, "mov disp16(%bp)", false},
	{Mode16, "67 8b 04 24", 0x1000, 4, ClassOther, 0, "32-bit addressing SIB", false},
	{Mode16, "67 8b 05 00 10 00 00", 0x1000, 7, ClassOther, 0, "32-bit addressing abs", false},
	{Mode16, "b8 34 12", 0x1000, 3, ClassOther, 0, "mov imm16", false},
	{Mode16, "66 b8 44 33 22 11", 0x1000, 6, ClassOther, 0, "mov imm32", false},
	{Mode16, "a1 00 10", 0x1000, 3, ClassOther, 0, "mov moffs16", false},
	{Mode16, "67 a1 00 10 00 00", 0x1000, 6, ClassOther, 0, "mov moffs32", false},
	{Mode16, "9a 00 00 00 10", 0x1000, 5, ClassFarCall, 0, "lcall ptr16:16", false},
	{Mode16, "66 9a 00 00 00 00 00 10", 0x1000, 8, ClassFarCall, 0, "lcall ptr16:32", false},
	{Mode16, "ea 00 00 00 10", 0x1000, 5, ClassFarJump, 0, "ljmp ptr16:16", false},
	{Mode16, "f7 c1 22 11", 0x1000, 4, ClassOther, 0, "test imm16", false},
	{Mode16, "66 f7 c1 44 33 22 11", 0x1000, 7, ClassOther, 0, "test imm32", false},
	{Mode16, "c8 10 00 01", 0x1000, 4, ClassOther, 0, "enter", false},
	{Mode16, "c2 02 00", 0x1000, 3, ClassRet, 0, "ret $2", false},
	{Mode16, "cf", 0x1000, 1, ClassFarRet, 0, "iret", false},
}

func mustHex(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q", s)
	}
	return b
}

func TestDecodeInsnTable(t *testing.T) {
	for _, tc := range insnCases {
		code := mustHex(t, tc.hex)
		// Decode from a 15-byte window padded with junk after the
		// instruction, and from exactly the instruction's bytes.
		padded := append(append([]byte{}, code...), bytes.Repeat([]byte{0xcc}, 20)...)
		for _, buf := range [][]byte{padded, code[:min(len(code), tc.len)]} {
			var in Insn
			err := DecodeInsn(buf, tc.ip, tc.mode, &in)
			if err != nil {
				t.Errorf("%s %s (% x): %v", tc.mode, tc.what, code, err)
				continue
			}
			if int(in.Len) != tc.len || in.Class != tc.class || in.Target != tc.target || in.IP != tc.ip || in.Mode != tc.mode {
				t.Errorf("%s %s (% x): len %d class %v target %#x; want len %d class %v target %#x",
					tc.mode, tc.what, code, in.Len, in.Class, in.Target, tc.len, tc.class, tc.target)
			}
			if !bytes.Equal(in.Bytes(), code[:tc.len]) || !bytes.Equal(in.Raw[in.Len:], make([]byte, MaxInsnLen-int(in.Len))) {
				t.Errorf("%s %s: Raw = % x", tc.mode, tc.what, in.Raw)
			}
			if n, err := InsnLen(buf, tc.mode); err != nil || n != tc.len {
				t.Errorf("%s %s: InsnLen = %d, %v", tc.mode, tc.what, n, err)
			}
		}
		// Every shorter prefix of the instruction is truncated.
		for k := 0; k < tc.len; k++ {
			var in Insn
			err := DecodeInsn(code[:k], tc.ip, tc.mode, &in)
			if !errors.Is(err, ErrInsnTruncated) || !errors.Is(err, ErrBadInsn) {
				t.Errorf("%s %s: %d of %d bytes: got %v, want ErrInsnTruncated", tc.mode, tc.what, k, tc.len, err)
			}
		}
	}
}

// objdumpMachine gives objdump's -m/-M for a mode.
func objdumpMachine(mode ExecMode) []string {
	switch mode {
	case Mode16:
		return []string{"-m", "i8086"}
	case Mode32:
		return []string{"-m", "i386"}
	}
	return []string{"-m", "i386:x86-64", "-M", "intel64"}
}

var (
	objFirstRE = regexp.MustCompile(`(?m)^\s*0:\t((?:[0-9a-f]{2} )+)`)
	objTextRE  = regexp.MustCompile(`(?m)^\s*0:\t(?:[0-9a-f]{2} )+\s*\t(.*)$`)
)

// TestDecodeInsnVsObjdump checks the table's lengths against objdump on a
// raw binary of each case's bytes: the table itself must be right.
func TestDecodeInsnVsObjdump(t *testing.T) {
	objdump, err := exec.LookPath("objdump")
	if err != nil {
		t.Skip("objdump not installed")
	}
	dir := t.TempDir()
	for k, tc := range insnCases {
		if tc.noObj {
			continue
		}
		code := mustHex(t, tc.hex)
		path := filepath.Join(dir, "c"+strconv.Itoa(k)+".bin")
		if err := os.WriteFile(path, code, 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-D", "-b", "binary"}, objdumpMachine(tc.mode)...)
		out, err := exec.Command(objdump, append(args, path)...).CombinedOutput()
		if err != nil {
			t.Fatalf("objdump: %v\n%s", err, out)
		}
		m := objFirstRE.FindSubmatch(out)
		if m == nil {
			t.Errorf("%s %s: no instruction in objdump output:\n%s", tc.mode, tc.what, out)
			continue
		}
		// A long instruction wraps: count continuation lines' bytes too.
		n := len(strings.Fields(string(m[1])))
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.SplitN(l, "\t", 3)
			if len(f) == 2 && strings.HasSuffix(strings.TrimSpace(f[0]), ":") {
				addr, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(f[0]), ":"), 16, 64)
				if err == nil && int(addr) == n {
					n += len(strings.Fields(f[1]))
				}
			}
		}
		if n != tc.len {
			t.Errorf("%s %s (% x): table says %d bytes, objdump %d:\n%s", tc.mode, tc.what, code, tc.len, n, out)
			continue
		}
		// Disasm's text must be objdump's.
		tm := objTextRE.FindSubmatch(out)
		var in Insn
		if tm == nil || DecodeInsn(code, 0, tc.mode, &in) != nil {
			t.Errorf("%s %s: no text in objdump output or no decode", tc.mode, tc.what)
			continue
		}
		if got, want := strings.Join(strings.Fields(in.Disasm()), " "), objdumpText(string(tm[1])); got != want {
			t.Errorf("%s %s (% x): Disasm %q, objdump %q", tc.mode, tc.what, code, got, want)
		}
	}
}

func TestDecodeInsnErrors(t *testing.T) {
	tests := []struct {
		mode  ExecMode
		hex   string
		trunc bool
		why   string
	}{
		{Mode64, "06", false, "opcode 0x06 (byte 0) invalid in 64-bit mode"},
		{Mode64, "66 9a 00 00 00 00", false, "opcode 0x9a (byte 1) invalid in 64-bit mode"},
		{Mode64, "d6", false, "invalid in 64-bit mode"},
		{Mode64, "0f 04", false, "undefined opcode 0f 04 (byte 1)"},
		{Mode64, "0f 3b 00 00", false, "undefined opcode 0f 3b"},
		{Mode64, "c4 e0 78 77", false, "undefined VEX/EVEX opcode map in byte 1"},
		{Mode64, "62 f4 7c 48 10 c0", false, "undefined VEX/EVEX opcode map"},
		{Mode64, "8f eb 78 10 c0", false, "undefined XOP opcode map"},
		{Mode64, "66 66 66 66 66 66 66 66 66 66 66 66 66 66 66 90", false, "longer than 15 bytes"},
		{Mode64, "66 66 66 66 66 66 66 66 66 66 66 66 66 66 90", false, ""}, // 15 bytes: fine
		{Mode64, "66 66 66 66 66 66 66 66 66 66 66 48 b8 00 00 00 00 00 00 00 00", false, "longer than 15 bytes"},
		{Mode64, "e8 00 00", true, "only 3 bytes available"},
		{Mode64, "d5 00 74 00", false, "not allowed after a REX2 prefix"},
		{Mode64, "d5 80 84 00 00 00 00", false, "not allowed after a REX2 prefix"},
		{Mode64, "d5 08 a1 00 00 00 00 00 00 00 00", false, "not allowed after a REX2 prefix"},
		{Mode64, "", true, "only 0 bytes available"},
		{ModeUnknown, "90", false, "cannot decode in execution mode unknown"},
		{ExecMode(7), "90", false, "cannot decode in execution mode"},
	}
	for _, tc := range tests {
		code := mustHex(t, tc.hex)
		var in Insn
		err := DecodeInsn(code, 0x401000, tc.mode, &in)
		if tc.why == "" {
			if err != nil {
				t.Errorf("% x: %v", code, err)
			}
			continue
		}
		var ie *InsnError
		if !errors.As(err, &ie) || !errors.Is(err, ErrBadInsn) {
			t.Errorf("% x: got %v, want an *InsnError matching ErrBadInsn", code, err)
			continue
		}
		if errors.Is(err, ErrInsnTruncated) != tc.trunc {
			t.Errorf("% x: truncated = %v, want %v (%v)", code, !tc.trunc, tc.trunc, err)
		}
		if ie.IP != 0x401000 || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "0x401000") {
			t.Errorf("% x: error %q, want IP 0x401000 and %q", code, err, tc.why)
		}
	}
}

// TestFastPathMatchesSlow checks ild's fast path against the complete
// decoder on random bytes and on mutated real instructions, in all modes.
func TestFastPathMatchesSlow(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var seeds [][]byte
	for _, tc := range insnCases {
		seeds = append(seeds, mustHex(t, tc.hex))
	}
	buf := make([]byte, 24)
	for iter := 0; iter < 300000; iter++ {
		n := rng.Intn(len(buf) + 1)
		if iter%2 == 0 {
			rng.Read(buf)
		} else {
			// A real instruction with a byte or two flipped, padded.
			s := seeds[rng.Intn(len(seeds))]
			copy(buf, s)
			rng.Read(buf[len(s):])
			for k := rng.Intn(3); k > 0; k-- {
				buf[rng.Intn(len(s))] ^= byte(1 << rng.Intn(8))
			}
		}
		for _, mode := range []ExecMode{Mode16, Mode32, Mode64} {
			code := buf[:n]
			var a, b Insn
			a.IP, b.IP = 0x7000, 0x7000
			ra := ild(code, mode, &a)
			rb := ildSlow(code[:min(len(code), MaxInsnLen)], len(code), mode, &b)
			if ra != rb || (ra > 0 && a != b) {
				t.Fatalf("%s % x: fast %d %+v, slow %d %+v", mode, code, ra, a, rb, b)
			}
		}
	}
}

func TestInsnClassString(t *testing.T) {
	for c := InsnClass(0); c < numInsnClasses; c++ {
		if c.String() == "" || strings.HasPrefix(c.String(), "InsnClass(") {
			t.Errorf("class %d has no name", c)
		}
	}
	if got := InsnClass(200).String(); got != "InsnClass(200)" {
		t.Errorf("InsnClass(200).String() = %q", got)
	}
	// Far, direct and indirect sets do not overlap, and branches are the
	// union plus nothing else.
	for c := InsnClass(0); c < numInsnClasses; c++ {
		n := 0
		for _, p := range []bool{c.IsFar(), c.IsDirect(), c.IsIndirectNear()} {
			if p {
				n++
			}
		}
		if n > 1 || (n == 1) != c.IsBranch() {
			t.Errorf("%v: far %v direct %v indirect %v branch %v", c, c.IsFar(), c.IsDirect(), c.IsIndirectNear(), c.IsBranch())
		}
	}
}

// TestDisasmRandom formats random and mutated instructions in all modes:
// Disasm must not panic and must return text for anything DecodeInsn
// accepts.
func TestDisasmRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var seeds [][]byte
	for _, tc := range insnCases {
		seeds = append(seeds, mustHex(t, tc.hex))
	}
	buf := make([]byte, 16)
	n := 0
	for iter := 0; iter < 60000; iter++ {
		rng.Read(buf)
		if iter%2 == 1 {
			s := seeds[rng.Intn(len(seeds))]
			copy(buf, s)
			buf[rng.Intn(len(s))] ^= byte(1 << rng.Intn(8))
		}
		for _, mode := range []ExecMode{Mode16, Mode32, Mode64} {
			var in Insn
			if DecodeInsn(buf, uint64(rng.Uint32()), mode, &in) != nil {
				continue
			}
			if s := in.Disasm(); s == "" {
				t.Fatalf("%s % x: empty Disasm", mode, in.Bytes())
			}
			n++
		}
	}
	t.Logf("%d random instructions formatted", n)
}
