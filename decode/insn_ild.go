package decode

// The instruction length decoder (ILD): prefixes, opcode maps, ModRM, SIB,
// displacement and immediate sizes, and the flow class. It works like
// libipt's pt_ild: one pass over the bytes, table lookups for the regular
// opcodes and a few explicit cases for the irregular ones. The tables are in
// insn_tables.go.

// Results of ild besides a positive length.
const (
	errBad   = 0  // invalid instruction
	errTrunc = -1 // the bytes end inside the instruction
)

// short says whether running out of bytes at position i means the
// instruction is too long (15 bytes or more) or the code is truncated.
func short(code []byte, i int) int {
	if i >= MaxInsnLen || len(code) >= MaxInsnLen {
		return errBad
	}
	return errTrunc
}

// ild decodes the instruction at code[0] for address ip. It returns the
// length (> 0) or errBad/errTrunc with a reason.
func ild(code []byte, ip uint64, mode ExecMode) (n int, class InsnClass, target uint64, why string) {
	lim := len(code)
	if lim > MaxInsnLen {
		lim = MaxInsnLen
	}
	var osz, asz int // effective operand and address size in bytes
	var p66, p67, rexW bool
	var rep byte // last F2/F3 prefix
	switch mode {
	case Mode64, Mode32, Mode16:
	default:
		return errBad, 0, 0, "unknown execution mode"
	}

	// Legacy prefixes and REX. A REX prefix counts only when it directly
	// precedes the opcode: a legacy prefix after it cancels it.
	i := 0
	var b byte
	for {
		if i >= lim {
			return short(code, i), 0, 0, "prefixes only"
		}
		b = code[i]
		k := prefixKind[b]
		if k == pfxNone || (k == pfxREX && mode != Mode64) {
			break
		}
		switch k {
		case pfxREX:
			rexW = b&8 != 0
			i++
			continue
		case pfx66:
			p66 = true
		case pfx67:
			p67 = true
		case pfxF2, pfxF3:
			rep = b
		}
		rexW = false
		i++
	}
	switch mode {
	case Mode64:
		osz, asz = 4, 8
		if rexW {
			osz = 8
		} else if p66 {
			osz = 2
		}
		if p67 {
			asz = 4
		}
	case Mode32:
		osz, asz = 4, 4
		if p66 {
			osz = 2
		}
		if p67 {
			asz = 2
		}
	default:
		osz, asz = 2, 2
		if p66 {
			osz = 4
		}
		if p67 {
			asz = 4
		}
	}

	// Opcode.
	i++ // past b
	var attr opAttr
	switch b {
	case 0x0F:
		if i >= lim {
			return short(code, i), 0, 0, "0F escape without opcode"
		}
		b = code[i]
		i++
		switch b {
		case 0x38:
			if i >= lim {
				return short(code, i), 0, 0, "0F 38 escape without opcode"
			}
			i++
			attr = aModRM
		case 0x3A:
			if i >= lim {
				return short(code, i), 0, 0, "0F 3A escape without opcode"
			}
			i++
			attr = aModRM | aImm8
		case 0x0F: // 3DNow!: ModRM, then the opcode as an imm8 suffix
			attr = aModRM | aImm8
		default:
			attr = map1[b]
			class = class1[b]
			if attr&aBad != 0 {
				return errBad, 0, 0, "undefined opcode 0F " + hexByte(b)
			}
		}
	case 0xC4, 0xC5, 0x62:
		// VEX (C4/C5) and EVEX (62) in 64-bit mode; in 16/32-bit mode only
		// when the next byte has ModRM.mod == 3 (else LES/LDS/BOUND).
		if mode != Mode64 {
			if i >= lim {
				return short(code, i), 0, 0, "truncated"
			}
			if code[i] < 0xC0 {
				attr = map0[b]
				break
			}
		}
		return vex(code, ip, i, lim, b, asz)
	case 0x8F:
		// XOP when the map select (low 5 bits of the next byte) is >= 8;
		// POP Ev has ModRM.reg == 0 there.
		if i >= lim {
			return short(code, i), 0, 0, "truncated"
		}
		if code[i]&0x1F >= 8 {
			return vex(code, ip, i, lim, b, asz)
		}
		attr = map0[b]
	default:
		attr = map0[b]
		class = class0[b]
		if attr&aInv64 != 0 && mode == Mode64 {
			return errBad, 0, 0, "opcode " + hexByte(b) + " invalid in 64-bit mode"
		}
	}

	// ModRM, SIB, displacement.
	var reg byte
	if attr&aModRM != 0 {
		if i >= lim {
			return short(code, i), 0, 0, "missing ModRM"
		}
		modrm := code[i]
		i++
		reg = modrm >> 3 & 7
		mod := modrm >> 6
		if attr&aIgnMod != 0 {
			mod = 3
		}
		if mod != 3 {
			rm := modrm & 7
			if asz == 2 {
				switch {
				case mod == 1:
					i++
				case mod == 2 || rm == 6:
					i += 2
				}
			} else {
				if rm == 4 {
					if i >= lim {
						return short(code, i), 0, 0, "missing SIB"
					}
					if mod == 0 && code[i]&7 == 5 {
						i += 4
					}
					i++
				}
				switch {
				case mod == 1:
					i++
				case mod == 2 || rm == 5:
					i += 4
				}
			}
		}
		if attr&aSpecial != 0 {
			var extra int
			class, extra = special(b, modrm, reg, attr, p66, rep, class)
			i += extra
		}
	}

	// Immediates and branch displacements.
	if attr&aImmAny != 0 {
		if attr&aImm8 != 0 {
			i++
		}
		if attr&aImm16 != 0 {
			i += 2
		}
		if attr&aImmZ != 0 {
			if osz == 2 {
				i += 2
			} else {
				i += 4
			}
		}
		if attr&aImmV != 0 {
			i += osz
		}
		if attr&aMoffs != 0 {
			i += asz
		}
		if attr&aPtr != 0 {
			if osz == 2 {
				i += 4
			} else {
				i += 6
			}
		}
		if attr&aGrp3 != 0 && reg < 2 {
			if b == 0xF6 || osz == 2 {
				i += int(b&1) + 1 // F6: imm8; F7 with osz 16: imm16
			} else {
				i += 4
			}
		}
		if attr&(aRel8|aRelZ) != 0 {
			return relBranch(code, ip, i, attr, mode, p66, osz, class)
		}
	}
	if i > MaxInsnLen {
		return errBad, 0, 0, "longer than 15 bytes"
	}
	if i > len(code) {
		return errTrunc, 0, 0, "truncated"
	}
	return i, class, 0, ""
}

// relBranch finishes a direct near branch whose displacement starts at
// code[i]: it adds the displacement and computes the target.
func relBranch(code []byte, ip uint64, i int, attr opAttr, mode ExecMode, p66 bool, osz int, class InsnClass) (int, InsnClass, uint64, string) {
	// Intel CPUs ignore 66 on near branches in 64-bit mode: rel32, 64-bit
	// IP (objdump -M intel64; AMD would use rel16 and truncate).
	size := 1
	if attr&aRelZ != 0 {
		size = 4
		if osz == 2 && mode != Mode64 {
			size = 2
		}
	}
	n := i + size
	if n > MaxInsnLen {
		return errBad, 0, 0, "longer than 15 bytes"
	}
	if n > len(code) {
		return errTrunc, 0, 0, "truncated"
	}
	var disp int64
	switch size {
	case 1:
		disp = int64(int8(code[i]))
	case 2:
		disp = int64(int16(uint16(code[i]) | uint16(code[i+1])<<8))
	default:
		disp = int64(int32(uint32(code[i]) | uint32(code[i+1])<<8 | uint32(code[i+2])<<16 | uint32(code[i+3])<<24))
	}
	t := ip + uint64(n) + uint64(disp)
	// The new IP has the branch's operand size: 16 bits with a 16-bit
	// operand size, 32 in 32-bit code (EIP), 64 in 64-bit mode.
	switch {
	case mode == Mode64:
	case (mode == Mode16) != p66:
		t &= 0xFFFF
	default:
		t &= 0xFFFFFFFF
	}
	return n, class, t, ""
}

// special handles the opcodes whose class or size depends on ModRM or a
// mandatory prefix. It returns the class and extra immediate bytes.
func special(op, modrm, reg byte, attr opAttr, p66 bool, rep byte, class InsnClass) (InsnClass, int) {
	if attr&aMap1 == 0 {
		switch op {
		case 0xFF:
			return ffClass[reg], 0
		}
		return class, 0
	}
	switch op {
	case 0x01: // 0F 01: system group; the mod == 3 forms include VMX/SVM
		switch modrm {
		case 0xC1, 0xD9: // vmcall, vmmcall
			return ClassVMExit, 0
		case 0xC2, 0xC3, 0xD8: // vmlaunch, vmresume, vmrun
			return ClassVMEntry, 0
		}
	case 0x22: // mov cr, r
		if reg == 3 {
			return ClassMovCR3, 0
		}
	case 0xAE: // F3 0F AE /4: ptwrite
		if reg == 4 && rep == 0xF3 {
			return ClassPTWrite, 0
		}
	case 0x78: // 66 0F 78 /0 ib ib extrq; F2 0F 78 /r ib ib insertq (SSE4a)
		if rep == 0xF2 || (rep == 0 && p66) {
			return class, 2
		}
	}
	return class, 0
}

// vex decodes a VEX (C4, C5), EVEX (62) or XOP (8F) instruction; code[i]
// is the byte after the escape byte esc.
func vex(code []byte, ip uint64, i, lim int, esc byte, asz int) (int, InsnClass, uint64, string) {
	var m byte // opcode map
	switch esc {
	case 0xC5:
		m = 1
		i++
	case 0xC4, 0x8F:
		if i >= lim {
			return short(code, i), 0, 0, "truncated VEX/XOP prefix"
		}
		m = code[i] & 0x1F
		i += 2
	case 0x62:
		if i >= lim {
			return short(code, i), 0, 0, "truncated EVEX prefix"
		}
		m = code[i] & 7
		i += 3
	}
	if i >= lim {
		return short(code, i), 0, 0, "truncated VEX/EVEX/XOP prefix"
	}
	op := code[i]
	i++
	modrm, imm := true, 0
	switch {
	case esc == 0x8F:
		switch m {
		case 8:
			imm = 1
		case 9:
		case 10:
			imm = 4
		default:
			return errBad, 0, 0, "invalid XOP map " + hexByte(m)
		}
	case m == 1:
		if op == 0x77 { // vzeroupper, vzeroall
			modrm = false
		}
		imm = int(vexImm1[op])
	case m == 2:
	case m == 3:
		imm = 1
	case esc == 0x62 && (m == 5 || m == 6):
	default:
		return errBad, 0, 0, "invalid VEX/EVEX map " + hexByte(m)
	}
	if modrm {
		if i >= lim {
			return short(code, i), 0, 0, "missing ModRM"
		}
		mb := code[i]
		i++
		mod, rm := mb>>6, mb&7
		if mod != 3 {
			if asz == 2 {
				switch {
				case mod == 1:
					i++
				case mod == 2 || rm == 6:
					i += 2
				}
			} else {
				if rm == 4 {
					if i >= lim {
						return short(code, i), 0, 0, "missing SIB"
					}
					if mod == 0 && code[i]&7 == 5 {
						i += 4
					}
					i++
				}
				switch {
				case mod == 1:
					i++
				case mod == 2 || rm == 5:
					i += 4
				}
			}
		}
	}
	i += imm
	if i > MaxInsnLen {
		return errBad, 0, 0, "longer than 15 bytes"
	}
	if i > len(code) {
		return errTrunc, 0, 0, "truncated"
	}
	return i, ClassOther, 0, ""
}

const hexDigits = "0123456789abcdef"

// hexByte formats b as "0x.." (a constant-time helper for error text).
func hexByte(b byte) string {
	return "0x" + string([]byte{hexDigits[b>>4], hexDigits[b&15]})
}
