package att

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/x86"
	"golang.org/x/arch/x86/x86asm"
)

// The fix layer for x86asm (v0.32) in Disasm. The linear sweeps in
// sweep_test.go (libc.so.6, perl, and more with PTJIT_SWEEP) found three
// kinds of trouble:
//
//   - instructions x86asm decodes with a wrong length or not at all:
//     vzeroupper/vzeroall (it reads a ModRM byte they do not have),
//     endbr64/endbr32, rdpkru/wrpkru, rdseed, adcx/adox, int1, femms,
//     shl spelled /6 (sal), test spelled F6/F7 /1, vmread/vmwrite, the
//     hint nops 0F 19-1E, the 8087/287 fneni/fndisi/fnsetpm/frstpm, scalar
//     VEX instructions with VEX.L set (L is ignored), and prefixes x86asm
//     refuses (a REX before a legacy prefix, a segment or 67 prefix before
//     VEX/EVEX);
//   - text x86asm gets wrong although the length is right: a memory operand
//     of absolute address 0 printed as nothing ("movzbl ,%eax"), a negative
//     32-bit displacement printed unsigned ("0xffffff78(%rbp)"), a segment
//     override invented for VEX/EVEX instructions ("%gs:(%r11)"), the
//     dropped "(%rip)" of RIP-relative VEX/EVEX operands, AVX512-FP16 (EVEX
//     map 5) printed as the map-1 instruction (vaddph as vaddps), lret and
//     lcall given a q suffix without REX.W, and "%riz" where objdump prints
//     none;
//   - spelling that differs from objdump 2.40 (callq/call, cdqe/cltq,
//     movsxd/movslq, signed immediates, scale 1, explicit 0x0
//     displacements, predicate aliases such as vpcmpeqb), aligned with
//     objdump;
//   - AMD XOP and FMA4, 3DNow!, SSE4a extrq/insertq, TBM bextr, CET
//     shadow-stack, PadLock, ptwrite and APX jmpabs, which x86asm does not
//     know at all.
//
// Fixed instructions are recognised from the bytes, never from x86asm's
// output, so a fix cannot hide a different x86asm decoding.

// regName returns the AT&T name of general register n (0-15) of size bits.
func regName(n int, bits int) string {
	r64 := [16]string{"rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15"}
	r32 := [16]string{"eax", "ecx", "edx", "ebx", "esp", "ebp", "esi", "edi", "r8d", "r9d", "r10d", "r11d", "r12d", "r13d", "r14d", "r15d"}
	r16 := [16]string{"ax", "cx", "dx", "bx", "sp", "bp", "si", "di", "r8w", "r9w", "r10w", "r11w", "r12w", "r13w", "r14w", "r15w"}
	switch bits {
	case 64:
		return "%" + r64[n&15]
	case 16:
		return "%" + r16[n&15]
	}
	return "%" + r32[n&15]
}

// fixedText returns objdump's text for the instructions recognised from
// their bytes that x86asm cannot handle, or "", false.
func fixedText(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	modrm := l.ModRM(raw)
	if in.Mode == x86.Mode64 && l.Escape == 0 && l.OpMap == 0 && l.Op == 0xD5 && l.OpPos+10 < len(raw)+0 && raw[l.OpPos+1] == 0 && raw[l.OpPos+2] == 0xA1 {
		return "jmpabs $0x" + strconv.FormatUint(in.Target, 16), true // APX
	}
	if l.Escape == 0xC4 || l.Escape == 0xC5 {
		if l.OpMap == 1 && l.Op == 0x77 {
			if l.VEXL != 0 {
				return "vzeroall", true
			}
			return "vzeroupper", true
		}
		return "", false
	}
	if l.Escape != 0 {
		return "", false
	}
	switch {
	case l.OpMap == 0 && l.Op == 0xF1:
		return "int1", true
	case l.OpMap == 0 && l.Op == 0xDB && modrm >= 0xE0 && modrm <= 0xE5:
		names := [6]string{"fneni(8087 only)", "fndisi(8087 only)", "fnclex", "fninit", "fnsetpm(287 only)", "frstpm(287 only)"}
		return names[modrm-0xE0], true
	case l.OpMap == 1 && l.Op == 0x0E:
		return "femms", true
	case l.OpMap == 1 && l.Op == 0xAE && modrm>>3&7 == 4 && l.Rep == 0xF3 && !l.P66:
		return ptwriteText(raw, l, in)
	case l.OpMap == 1 && (l.Op == 0x78 || l.Op == 0x79) && modrm>>6 == 3 && (l.P66 && l.Rep == 0 || l.Rep == 0xF2):
		// SSE4a extrq/insertq.
		rm := "%xmm" + strconv.Itoa(int(modrm&7)|int(l.REX&1)<<3)
		reg := "%xmm" + strconv.Itoa(int(modrm>>3&7)|int(l.REX&4)<<1)
		name := "extrq"
		if l.Rep == 0xF2 {
			name = "insertq"
		}
		var ops []string
		if l.Op == 0x78 {
			n := len(raw)
			ops = []string{"$0x" + strconv.FormatUint(uint64(raw[n-1]), 16), "$0x" + strconv.FormatUint(uint64(raw[n-2]), 16), rm}
			if name == "insertq" {
				ops = append(ops, reg)
			}
		} else {
			ops = []string{rm, reg}
		}
		return name + " " + strings.Join(ops, ","), true
	case l.OpMap == 1 && (l.Op == 0xA6 || l.Op == 0xA7) && padlock[uint16(l.Op)<<8|uint16(modrm)] != "":
		// VIA PadLock; objdump shows an F3 prefix as "repz".
		s := padlock[uint16(l.Op)<<8|uint16(modrm)]
		if l.Rep == 0xF3 {
			s = "repz " + s
		}
		return s, true
	case l.OpMap == 1 && l.Op == 0x1E && l.Rep == 0xF3 && modrm == 0xFA:
		return "endbr64", true
	case l.OpMap == 1 && (l.Op == 0x1E && modrm>>3&7 == 1 || l.Op == 0xAE && modrm>>3&7 == 5) && modrm>>6 == 3 && l.Rep == 0xF3 && !l.P66:
		// CET shadow stack: rdsspd/q (F3 0F 1E /1), incsspd/q (F3 0F AE /5).
		name, bits := "rdssp", 32
		if l.Op == 0xAE {
			name = "incssp"
		}
		if l.REX&8 != 0 {
			name, bits = name+"q", 64
		} else {
			name += "d"
		}
		return name + " " + regName(int(modrm&7)|int(l.REX&1)<<3, bits), true
	case l.OpMap == 1 && l.Op == 0x1E && l.Rep == 0xF3 && modrm == 0xFB:
		return "endbr32", true
	case l.OpMap == 1 && l.Op == 0x01:
		if s, ok := group7[modrm]; ok && l.Rep == 0 && !l.P66 {
			return s, true
		}
		if l.Rep == 0xF3 {
			switch modrm {
			case 0xE8:
				return "setssbsy", true
			case 0xEA:
				return "saveprevssp", true
			case 0xEC:
				return "uiret", true
			case 0xED:
				return "testui", true
			case 0xEE:
				return "clui", true
			case 0xEF:
				return "stui", true
			case 0xCA:
				return "eretu", true
			}
		}
		if l.Rep == 0xF2 && modrm == 0xCA {
			return "erets", true
		}
	case l.OpMap == 1 && l.Op == 0xC7 && modrm>>6 == 3 && (modrm>>3&7 == 7 || modrm>>3&7 == 6) && l.Rep == 0:
		// rdseed (/7), rdrand (/6) r16/32/64
		bits := 32
		if l.REX&8 != 0 {
			bits = 64
		} else if l.P66 {
			bits = 16
		}
		name := "rdrand"
		if modrm>>3&7 == 7 {
			name = "rdseed"
		}
		return name + " " + regName(int(modrm&7)|int(l.REX&1)<<3, bits), true
	}
	return "", false
}

// padlock names the VIA PadLock instructions (0F A6/A7 with a fixed ModRM).
var padlock = map[uint16]string{
	0xA6C0: "montmul", 0xA6C8: "xsha1", 0xA6D0: "xsha256",
	0xA7C0: "xstore-rng", 0xA7C8: "xcrypt-ecb", 0xA7D0: "xcrypt-cbc", 0xA7D8: "xcrypt-ctr",
	0xA7E0: "xcrypt-cfb", 0xA7E8: "xcrypt-ofb",
}

// group7 names the register forms of 0F 01 without prefixes that x86asm
// v0.32 does not know.
var group7 = map[byte]string{
	0xCA: "clac", 0xCB: "stac", 0xCF: "encls", 0xD5: "xend", 0xD6: "xtest", 0xD7: "enclu",
	0xC0: "enclv", 0xC1: "vmcall", 0xC2: "vmlaunch", 0xC3: "vmresume", 0xC4: "vmxoff",
	0xC5: "pconfig", 0xC6: "wrmsrns", 0xD4: "vmfunc", 0xE8: "serialize", 0xEE: "rdpkru",
	0xEF: "wrpkru", 0xFA: "monitorx %rax,%ecx,%edx", 0xFB: "mwaitx %eax,%ecx,%ebx",
	0xFC: "clzero %rax", 0xFD: "rdpru", 0xD8: "vmrun", 0xD9: "vmmcall", 0xDA: "vmload",
	0xDB: "vmsave", 0xDC: "stgi", 0xDD: "clgi", 0xDE: "skinit", 0xDF: "invlpga",
}

// rewriteDecode handles instructions x86asm cannot decode by decoding an
// equivalent encoding it can and renaming the result: it returns the text,
// or "", false.
func rewriteDecode(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	if s, ok := rewriteOpcode(raw, l, in); ok {
		return s, true
	}
	if s, ok := xopText(raw, l, in); ok {
		return s, true
	}
	if l.Escape == 0x8F {
		return bextrText(raw, l, in)
	}
	if l.Escape == 0 && l.OpMap == 1 && l.Op == 0x0F {
		return threeDNowText(raw, l, in)
	}
	if l.Escape == 0xC4 || l.Escape == 0xC5 {
		if l.VEXL != 0 {
			// Scalar VEX instructions ignore VEX.L; x86asm refuses L=1.
			b := append([]byte(nil), raw...)
			if l.Escape == 0xC5 {
				b[l.VEXPos+1] &^= 4
			} else {
				b[l.VEXPos+2] &^= 4
			}
			if s, ok := tryDecode(b, in, "", ""); ok {
				return s, true
			}
		}
	}
	// Prefixes x86asm refuses: any legacy prefix or REX before a
	// VEX/EVEX/XOP escape, and a REX cancelled by a legacy prefix after it.
	// Drop them, decode the rest, and print them as objdump does.
	end := l.OpPos
	if l.Escape != 0 {
		end = l.VEXPos
	}
	var words []string
	keep := make([]byte, 0, len(raw))
	for i, b := range raw {
		isPfx := i < end && x86.IsPrefix(b, in.Mode)
		if isPfx && (l.Escape != 0 || x86.IsREX(b) && i != l.REXPos) {
			words = append(words, prefixWord(b, in.Mode))
			continue
		}
		keep = append(keep, b)
	}
	if len(words) == 0 {
		return "", false
	}
	sub := *in
	sub.Len = uint8(len(keep))
	sub.Raw = [15]byte{}
	copy(sub.Raw[:], keep)
	s := Text(&sub)
	if strings.HasPrefix(s, ".byte") {
		return "", false
	}
	return strings.Join(append(words, s), " "), true
}

// tryDecode decodes b with x86asm and polishes the text; with from != ""
// the mnemonic must be from (any size suffix) and is renamed to.
func tryDecode(b []byte, in *x86.Insn, from, to string) (string, bool) {
	inst, err := x86asm.Decode(b, in.Mode.Bits())
	if err != nil || inst.Len != len(b) {
		return "", false
	}
	s := polish(x86asm.GNUSyntax(inst, in.IP, nil), b, in, inst)
	if from != "" {
		// Rename the mnemonic, after any prefix words.
		words := strings.Split(s, " ")
		k := 0
		for k < len(words)-1 && (gnuPrefixWords[words[k]] || strings.HasPrefix(words[k], "rex")) {
			k++
		}
		if words[k] != from && strings.TrimRight(words[k], "bwlq") != from {
			return "", false
		}
		words[k] = to
		s = strings.TrimSpace(strings.Join(words, " "))
	}
	return s, true
}

// prefixWord is objdump's name for a prefix byte it prints separately.
func prefixWord(b byte, mode x86.ExecMode) string {
	switch b {
	case 0x26:
		return "es"
	case 0x2E:
		return "cs"
	case 0x36:
		return "ss"
	case 0x3E:
		return "ds"
	case 0x64:
		return "fs"
	case 0x65:
		return "gs"
	case 0x66:
		return "data16"
	case 0x67:
		if mode == x86.Mode32 {
			return "addr16"
		}
		return "addr32"
	case 0xF0:
		return "lock"
	case 0xF2:
		return "repnz"
	case 0xF3:
		return "repz"
	}
	s := "rex"
	if b&0xF != 0 {
		s += "."
		for k, c := range "WRXB" {
			if b&(8>>k) != 0 {
				s += string(c)
			}
		}
	}
	return s
}

// rewriteOpcode maps opcodes x86asm lacks onto ones with the same operands.
func rewriteOpcode(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	if l.ModRMPos < 0 || l.Escape != 0 {
		return "", false
	}
	modrm := raw[l.ModRMPos]
	reg := modrm >> 3 & 7
	b := append([]byte(nil), raw...)
	switch {
	case l.OpMap == 0 && (l.Op >= 0xD0 && l.Op <= 0xD3 || l.Op == 0xC0 || l.Op == 0xC1) && reg == 6:
		b[l.ModRMPos] = modrm&^0x38 | 4<<3 // sal /6 is shl /4
		return tryDecode(b, in, "", "")
	case l.OpMap == 0 && (l.Op == 0xF6 || l.Op == 0xF7) && reg == 1:
		b[l.ModRMPos] = modrm &^ 0x38 // test /1 is test /0
		return tryDecode(b, in, "", "")
	case l.OpMap == 2 && l.Op == 0xF6 && (l.P66 || l.Rep == 0xF3) && !(l.P66 && l.Rep == 0xF3):
		// adcx (66) / adox (F3) Gy, Ey: as adc Gv, Ev (13 /r).
		name := "adcx"
		if l.Rep == 0xF3 {
			name = "adox"
		}
		return tryDecode(rebuild(raw, l, []byte{0x13}, true, false), in, "adc", name)
	case l.OpMap == 1 && (l.Op == 0x78 || l.Op == 0x79) && !l.P66 && l.Rep == 0:
		// vmread Ey, Gy (0F 78) / vmwrite Gy, Ey (0F 79): as mov 89 / 8B,
		// with 64-bit operands in 64-bit mode.
		op, name := byte(0x89), "vmread"
		if l.Op == 0x79 {
			op, name = 0x8B, "vmwrite"
		}
		return tryDecode(rebuild(raw, l, []byte{op}, false, in.Mode == x86.Mode64), in, "mov", name)
	case l.OpMap == 1 && (l.Op == 0x19 || l.Op >= 0x1C && l.Op <= 0x1F):
		// Hint nops 0F 19, 0F 1C-1F (0F 1A/1B are MPX): x86asm knows only
		// 0F 1F /0, so decode that with the same operand.
		nb := rebuild(raw, l, []byte{0x0F, 0x1F}, false, false)
		nb[len(nb)-(len(raw)-l.ModRMPos)] &^= 0x38
		return tryDecode(nb, in, "", "")
	}
	return "", false
}

// rebuild returns raw with its opcode bytes (escapes included) replaced by
// op. dropMandatory removes 66/F2/F3; rexW sets REX.W (adding a REX).
func rebuild(raw []byte, l *x86.Layout, op []byte, dropMandatory, rexW bool) []byte {
	var b []byte
	opStart := l.OpPos
	switch l.OpMap {
	case 1:
		opStart--
	case 2, 3:
		opStart -= 2
	}
	rex := byte(0)
	for i := 0; i < opStart; i++ {
		c := raw[i]
		if i == l.REXPos {
			rex = c
			continue
		}
		if dropMandatory && (c == 0x66 || c == 0xF3 || c == 0xF2) {
			continue
		}
		if x86.IsREX(c) && l.Mode == x86.Mode64 {
			continue // a cancelled REX
		}
		b = append(b, c)
	}
	if rexW {
		rex |= 0x48
	}
	if rex != 0 {
		b = append(b, rex)
	}
	b = append(b, op...)
	return append(b, raw[l.OpPos+1:]...)
}

// AMD XOP (8F maps 8, 9) and FMA4 (VEX 66.0F3A 5C-7F), which x86asm does
// not know: real code in libm (FMA4 paths), libx265 and libcrypto (XOP).

var xop8Names = map[byte]string{
	0x85: "vpmacssww", 0x86: "vpmacsswd", 0x87: "vpmacssdql", 0x8E: "vpmacssdd", 0x8F: "vpmacssdqh",
	0x95: "vpmacsww", 0x96: "vpmacswd", 0x97: "vpmacsdql", 0x9E: "vpmacsdd", 0x9F: "vpmacsdqh",
	0xA2: "vpcmov", 0xA3: "vpperm", 0xA6: "vpmadcsswd", 0xB6: "vpmadcswd",
	0xC0: "vprotb", 0xC1: "vprotw", 0xC2: "vprotd", 0xC3: "vprotq",
	0xCC: "vpcomb", 0xCD: "vpcomw", 0xCE: "vpcomd", 0xCF: "vpcomq",
	0xEC: "vpcomub", 0xED: "vpcomuw", 0xEE: "vpcomud", 0xEF: "vpcomuq",
}

var xop9Names = map[byte]string{
	0x80: "vfrczps", 0x81: "vfrczpd", 0x82: "vfrczss", 0x83: "vfrczsd",
	0x90: "vprotb", 0x91: "vprotw", 0x92: "vprotd", 0x93: "vprotq",
	0x94: "vpshlb", 0x95: "vpshlw", 0x96: "vpshld", 0x97: "vpshlq",
	0x98: "vpshab", 0x99: "vpshaw", 0x9A: "vpshad", 0x9B: "vpshaq",
	0xC1: "vphaddbw", 0xC2: "vphaddbd", 0xC3: "vphaddbq", 0xC6: "vphaddwd", 0xC7: "vphaddwq", 0xCB: "vphadddq",
	0xD1: "vphaddubw", 0xD2: "vphaddubd", 0xD3: "vphaddubq", 0xD6: "vphadduwd", 0xD7: "vphadduwq", 0xDB: "vphaddudq",
	0xE1: "vphsubbw", 0xE2: "vphsubwd", 0xE3: "vphsubdq",
}

var fma4Names = map[byte]string{
	0x5C: "vfmaddsubps", 0x5D: "vfmaddsubpd", 0x5E: "vfmsubaddps", 0x5F: "vfmsubaddpd",
	0x68: "vfmaddps", 0x69: "vfmaddpd", 0x6A: "vfmaddss", 0x6B: "vfmaddsd",
	0x6C: "vfmsubps", 0x6D: "vfmsubpd", 0x6E: "vfmsubss", 0x6F: "vfmsubsd",
	0x78: "vfnmaddps", 0x79: "vfnmaddpd", 0x7A: "vfnmaddss", 0x7B: "vfnmaddsd",
	0x7C: "vfnmsubps", 0x7D: "vfnmsubpd", 0x7E: "vfnmsubss", 0x7F: "vfnmsubsd",
}

// xopText formats XOP and FMA4 instructions. The ModRM operands come from
// a surrogate VEX vmovups with the same ModRM, SIB, displacement and
// R/X/B bits, which x86asm formats.
func xopText(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	var name string
	imm := 0
	switch {
	case l.Escape == 0x8F && l.OpMap == 8:
		name, imm = xop8Names[l.Op], 1
	case l.Escape == 0x8F && l.OpMap == 9:
		name = xop9Names[l.Op]
	case l.Escape == 0xC4 && l.OpMap == 3 && l.VEXPP == 1:
		name, imm = fma4Names[l.Op], 1
	}
	if name == "" || l.ModRMPos < 0 || l.VEXPos+2 >= len(raw) || len(raw)-imm < l.ModRMPos+1 {
		return "", false
	}
	p1, p2 := raw[l.VEXPos+1], raw[l.VEXPos+2]
	sur := append([]byte{0xC4, p1&0xE0 | 1, 0x78 | l.VEXL<<2, 0x10}, raw[l.ModRMPos:len(raw)-imm]...)
	s, ok := tryDecode(sur, in, "vmovups", "vmovups")
	if !ok {
		return "", false
	}
	_, ops, _ := strings.Cut(s, " ")
	sp := splitOperands(ops)
	if len(sp) != 2 {
		return "", false
	}
	rm, reg := sp[0], sp[1]
	xmm := "%xmm"
	if l.VEXL != 0 {
		xmm = "%ymm"
	}
	vvvv := xmm + strconv.Itoa(int(^p2>>3&15))
	var is4, ib string
	if imm == 1 {
		v := raw[len(raw)-1]
		is4 = xmm + strconv.Itoa(int(v>>4))
		ib = "$0x" + strconv.FormatUint(uint64(v), 16)
	}
	w := l.VEXW
	var args []string
	switch {
	case l.Escape == 0xC4 || l.Op == 0xA2 || l.Op == 0xA3 || l.OpMap == 8 && (l.Op&0xF0 == 0x80 || l.Op&0xF0 == 0x90 || l.Op == 0xA6 || l.Op == 0xB6):
		// Four operands, the fourth register in imm[7:4]; W swaps it with
		// the ModRM operand (vpperm, vpcmov, FMA4).
		if w {
			args = []string{rm, is4, vvvv, reg}
		} else {
			args = []string{is4, rm, vvvv, reg}
		}
	case l.OpMap == 8 && l.Op >= 0xC0 && l.Op <= 0xC3: // vprot* imm
		args = []string{ib, rm, reg}
	case l.OpMap == 8: // vpcom*: the predicate becomes part of the name
		preds := [8]string{"lt", "le", "gt", "ge", "eq", "neq", "false", "true"}
		name = "vpcom" + preds[raw[len(raw)-1]&7] + name[len("vpcom"):]
		args = []string{rm, vvvv, reg}
	case l.Op >= 0x90 && l.Op <= 0x9B: // vprot*/vpshl*/vpsha* by register
		if w {
			args = []string{rm, vvvv, reg}
		} else {
			args = []string{vvvv, rm, reg}
		}
	default: // two operands
		args = []string{rm, reg}
	}
	if l.OpMap == 9 && l.Op >= 0xC1 || l.Op >= 0x80 && l.Op <= 0x83 && l.OpMap == 9 {
		// vphadd*/vphsub*/vfrcz* have xmm/ymm by L only for vfrcz; the
		// horizontal adds are 128-bit.
		if l.Op >= 0xC1 {
			args = []string{strings.Replace(rm, "%ymm", "%xmm", 1), strings.Replace(reg, "%ymm", "%xmm", 1)}
		}
	}
	return name + " " + strings.Join(args, ","), true
}

// ptwriteText formats ptwrite (F3 [REX.W] 0F AE /4), which x86asm takes
// for xsave: "ptwrite %eax", "ptwriteq 0x8(%rsp)".
func ptwriteText(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	modrm := raw[l.ModRMPos]
	bits := 32
	if l.REX&8 != 0 {
		bits = 64
	}
	if modrm>>6 == 3 {
		return "ptwrite " + regName(int(modrm&7)|int(l.REX&1)<<3, bits), true
	}
	// The memory operand, from a mov r32, r/m32 (8B) surrogate.
	b := rebuild(raw, l, []byte{0x8B}, true, false)
	b[len(b)-(len(raw)-l.ModRMPos)] &^= 0x38
	s, ok := tryDecode(b, in, "", "")
	if !ok {
		return "", false
	}
	_, ops, _ := strings.Cut(s, " ")
	sp := splitOperands(ops)
	suffix := "l"
	if bits == 64 {
		suffix = "q"
	}
	return "ptwrite" + suffix + " " + sp[0], true
}

// threeDNow names the 3DNow! instructions by their suffix byte.
var threeDNow = map[byte]string{
	0x0C: "pi2fw", 0x0D: "pi2fd", 0x1C: "pf2iw", 0x1D: "pf2id", 0x8A: "pfnacc", 0x8E: "pfpnacc",
	0x90: "pfcmpge", 0x94: "pfmin", 0x96: "pfrcp", 0x97: "pfrsqrt", 0x9A: "pfsub", 0x9E: "pfadd",
	0xA0: "pfcmpgt", 0xA4: "pfmax", 0xA6: "pfrcpit1", 0xA7: "pfrsqit1", 0xAA: "pfsubr", 0xAE: "pfacc",
	0xB0: "pfcmpeq", 0xB4: "pfmul", 0xB6: "pfrcpit2", 0xB7: "pmulhrw", 0xBB: "pswapd", 0xBF: "pavgusb",
}

// threeDNowText formats 0F 0F /r ib from a movq mm, mm/m64 (0F 6F)
// surrogate.
func threeDNowText(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	name := threeDNow[raw[len(raw)-1]]
	if name == "" || l.ModRMPos < 0 {
		return "", false
	}
	b := rebuild(raw[:len(raw)-1], l, []byte{0x0F, 0x6F}, false, false)
	s, ok := tryDecode(b, in, "movq", name)
	return s, ok
}

// fp16Names are the AVX512-FP16 (EVEX map 5) arithmetic opcodes shared
// with the 0F map's ps/ss forms.
var fp16Names = map[byte]bool{0x51: true, 0x58: true, 0x59: true, 0x5C: true, 0x5D: true, 0x5E: true, 0x5F: true}

// fp16Text formats the AVX512-FP16 arithmetic instructions as their map 1
// single-precision twins renamed (vaddps -> vaddph, vaddss -> vaddsh).
func fp16Text(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	if l.OpMap != 5 || !fp16Names[l.Op] || l.VEXPos+1 >= len(raw) {
		return "", false
	}
	b := append([]byte(nil), raw...)
	b[l.VEXPos+1] = b[l.VEXPos+1]&^7 | 1
	s, ok := tryDecode(b, in, "", "")
	if !ok {
		return "", false
	}
	head, rest, _ := strings.Cut(s, " ")
	switch {
	case strings.HasSuffix(head, "ps"):
		head = strings.TrimSuffix(head, "ps") + "ph"
	case strings.HasSuffix(head, "ss"):
		head = strings.TrimSuffix(head, "ss") + "sh"
	default:
		return "", false
	}
	return head + " " + rest, true
}

// bextrText formats TBM bextr with imm32 (XOP map 10, opcode 10) from a
// mov r, r/m (8B) surrogate with the XOP's R/X/B/W bits as a REX.
func bextrText(raw []byte, l *x86.Layout, in *x86.Insn) (string, bool) {
	if l.OpMap != 10 || l.Op != 0x10 || l.ModRMPos < 0 || len(raw) < l.ModRMPos+5 || in.Mode != x86.Mode64 {
		return "", false
	}
	p1 := raw[l.VEXPos+1]
	rex := 0x40 | (^p1>>5)&7
	if l.VEXW {
		rex |= 8
	}
	b := append([]byte{rex, 0x8B}, raw[l.ModRMPos:len(raw)-4]...)
	if rex == 0x40 {
		b = b[1:]
	}
	s, ok := tryDecode(b, in, "mov", "mov")
	if !ok {
		return "", false
	}
	_, ops, _ := strings.Cut(s, " ")
	imm := binary.LittleEndian.Uint32(raw[len(raw)-4:])
	return "bextr $0x" + strconv.FormatUint(uint64(imm), 16) + "," + ops, true
}
