package x86

import (
	"encoding/binary"
	"fmt"
)

// The instruction length decoder (ILD): prefixes, opcode maps, ModRM, SIB,
// displacement and immediate sizes, and the flow class. It works like
// libipt's pt_ild: one pass over the bytes, table lookups for the regular
// opcodes and a few explicit cases for the irregular ones. The tables are in
// insn_tables.go.
//
// ild is the hot path of the flow decoder, so it reports failures as a
// small negative code (reason and byte position, see ildFail) and leaves
// building the error to ildError.

// Failure reasons, packed with the byte position into ild's result.
const (
	whyTrunc   = 1 + iota // bytes end inside the instruction
	whyMode               // ModeUnknown or out of range
	whyTooLong            // more than 15 bytes
	whyInv64              // opcode invalid in 64-bit mode
	whyUndef0F            // undefined 0F xx opcode
	whyVEXMap             // undefined VEX/EVEX opcode map
	whyXOPMap             // undefined XOP opcode map
	whyREX2               // opcode not allowed after a REX2 prefix
)

// ildFail packs a failure for position pos (0..15) into ild's result.
func ildFail(why, pos int) int { return -(why | pos<<8) }

// need returns the failure for needing byte position i (or bytes up to i)
// when only full bytes exist: too long if past 15 bytes, else truncated.
func need(i, full int) int {
	if i >= MaxInsnLen || full >= MaxInsnLen {
		return ildFail(whyTooLong, 0)
	}
	return ildFail(whyTrunc, 0)
}

// ildError builds the error for a failed ild result r.
func ildError(code []byte, ip uint64, mode ExecMode, r int) error {
	why, pos := -r&0xFF, -r>>8
	n := min(len(code), MaxInsnLen)
	e := &InsnError{IP: ip, Mode: mode, Bytes: append([]byte(nil), code[:n]...), Err: ErrBadInsn}
	op := byte(0)
	if pos < n {
		op = code[pos]
	}
	switch why {
	case whyTrunc:
		e.Err = ErrInsnTruncated
		e.Why = fmt.Sprintf("only %d bytes available", len(code))
	case whyMode:
		e.Why = fmt.Sprintf("cannot decode in execution mode %s", mode)
	case whyTooLong:
		e.Why = "longer than 15 bytes"
	case whyInv64:
		e.Why = fmt.Sprintf("opcode %#02x (byte %d) invalid in 64-bit mode", op, pos)
	case whyUndef0F:
		e.Why = fmt.Sprintf("undefined opcode 0f %02x (byte %d)", op, pos)
	case whyVEXMap:
		e.Why = fmt.Sprintf("undefined VEX/EVEX opcode map in byte %d (%#02x)", pos, op)
	case whyXOPMap:
		e.Why = fmt.Sprintf("undefined XOP opcode map in byte %d (%#02x)", pos, op)
	case whyREX2:
		e.Why = fmt.Sprintf("opcode %#02x (byte %d) not allowed after a REX2 prefix", op, pos)
	default:
		e.Why = fmt.Sprintf("internal error: ild result %d", r)
	}
	return e
}

// ild decodes the instruction at code[0] into in (Len, Class, Mode,
// Target, Raw; in.IP must be set). It returns the length, or a failure
// from ildFail.
//
// The fast path covers the one-byte and 0F opcode maps with regular
// operands, which is nearly all code, with few data-dependent branches:
// the prefixes fold into a bit set, the bit set and mode select one of nine
// operand/address-size states, and a table gives the immediate size for
// that state. Everything else (VEX/EVEX/XOP, 0F38/0F3A, 3DNow!, F6/F7,
// FF, the special 0F opcodes, invalid and truncated bytes) goes to
// ildSlow, which decodes from scratch.
func ild(code []byte, mode ExecMode, in *Insn) int {
	full := len(code)
	if full > MaxInsnLen {
		code = code[:MaxInsnLen]
	}
	if mode-1 > Mode64-1 { // ModeUnknown or out of range
		return ildSlow(code, full, mode, in)
	}
	pt := &prefixBits[0]
	if mode == Mode64 {
		pt = &prefixBits[1]
	}
	var pf uint8
	i := 0
	var b byte
	for {
		if i >= len(code) {
			return ildSlow(code, full, mode, in)
		}
		b = code[i]
		k := pt[b]
		if k == 0 {
			break
		}
		pf = pf&^pbW | k
		i++
	}
	ss := sizeState[uint8(mode)|pf&(pb66|pb67|pbW)]
	i++
	var f fastAttr
	var imm uint8
	var class InsnClass
	if b != 0x0F {
		f = fast0[ss>>4&1][b] // the 64-bit table marks invalid opcodes slow
		imm = fastImm0[ss&15][b]
		class = class0[b]
	} else {
		if i >= len(code) {
			return ildSlow(code, full, mode, in)
		}
		b = code[i]
		i++
		f = fast1[b]
		imm = fastImm1[ss&15][b]
		class = class1[b]
	}
	if f&fSlow != 0 {
		return ildSlow(code, full, mode, in)
	}
	if f&fModRM != 0 {
		if i >= len(code) {
			return ildSlow(code, full, mode, in)
		}
		e := modrmExtra[ss>>5&1][code[i]]
		i++
		if e&sibBase != 0 {
			if i >= len(code) {
				return ildSlow(code, full, mode, in)
			}
			if code[i]&7 == 5 {
				i += 4
			}
		}
		i += int(e & 0xF)
	}
	if f&(fRel8|fRelZ) != 0 {
		return relBranch(code, full, i, f&fRelZ != 0, mode, pf&pb66 != 0, ss&ssO16 != 0, class, in)
	}
	i += int(imm)
	return finish(in, code, full, i, class, mode)
}

// ildSlow is the complete decoder behind ild's fast path.
func ildSlow(code []byte, full int, mode ExecMode, in *Insn) int {
	var p66, p67, rexW, rexR, f3 bool
	var rep byte // last F2/F3 prefix

	// Legacy prefixes and REX. A REX prefix counts only when it directly
	// precedes the opcode: a legacy prefix after it cancels it.
	i := 0
	var b byte
	for {
		if i >= len(code) {
			return need(i, full)
		}
		b = code[i]
		k := prefixKind[b]
		if k == pfxNone || (k == pfxREX && mode != Mode64) {
			break
		}
		switch k {
		case pfxREX:
			rexW, rexR = b&8 != 0, b&4 != 0
			i++
			continue
		case pfx66:
			p66 = true
		case pfx67:
			p67 = true
		case pfxF2, pfxF3:
			rep = b
			f3 = f3 || b == 0xF3
		}
		rexW, rexR = false, false
		i++
	}
	osz, asz, ok := effSizes(mode, p66, p67, rexW) // in bytes
	if !ok {
		return ildFail(whyMode, 0)
	}

	// Opcode.
	opPos := i
	i++
	var attr opAttr
	class := ClassOther
	switch b {
	default:
		attr = map0[b]
		class = class0[b]
		if attr&aInv64 != 0 && mode == Mode64 {
			return ildFail(whyInv64, opPos)
		}
	case 0x0F:
		if i >= len(code) {
			return need(i, full)
		}
		b = code[i]
		opPos = i
		i++
		switch b {
		case 0x38:
			i++ // the opcode; all of map 0F38 has ModRM, no immediate
			attr = aModRM
		case 0x3A:
			i++ // map 0F3A: ModRM and imm8
			attr = aModRM | aImm8
		case 0x0F: // 3DNow!: ModRM, then the opcode as an imm8 suffix
			attr = aModRM | aImm8
		default:
			attr = map1[b]
			class = class1[b]
			if attr&aBad != 0 {
				return ildFail(whyUndef0F, opPos)
			}
		}
	case 0xC4, 0xC5, 0x62:
		// VEX (C4/C5) and EVEX (62) in 64-bit mode; in 16/32-bit mode only
		// when the next byte has ModRM.mod == 3 (else LES/LDS/BOUND).
		if mode != Mode64 {
			if i >= len(code) {
				return need(i, full)
			}
			if code[i] < 0xC0 {
				attr = map0[b]
				break
			}
		}
		return vex(code, full, i, b, asz == 2, mode, in)
	case 0x8F:
		// XOP when the map select (low 5 bits of the next byte) is >= 8;
		// POP Ev has ModRM.reg == 0 there.
		if i >= len(code) {
			return need(i, full)
		}
		if code[i]&0x1F >= 8 {
			return vex(code, full, i, b, asz == 2, mode, in)
		}
		attr = map0[b]
	case 0xD5:
		if mode != Mode64 {
			attr = map0[b] // aad ib
			break
		}
		// APX REX2: D5, a payload byte (M0 W R X B bits), then an opcode
		// of map 0 or 1 without escape bytes.
		if i+1 >= len(code) {
			return need(i+2, full)
		}
		payload := code[i]
		b = code[i+1]
		opPos = i + 1
		i += 2
		if payload&8 != 0 {
			osz = 8
		}
		rexR = payload&0x44 != 0
		if payload&0x80 == 0 {
			if b == 0xA1 && payload&8 == 0 && !p66 && !p67 {
				// jmpabs imm64: a direct jump to an absolute address.
				if i+8 > len(code) {
					return need(i+8, full)
				}
				in.Len = uint8(i + 8)
				in.Class = ClassJump
				in.Mode = mode
				in.Target = binary.LittleEndian.Uint64(code[i:])
				setRaw(in, code, full, i+8)
				return i + 8
			}
			switch b >> 4 {
			case 0x4, 0x7, 0xA, 0xE:
				return ildFail(whyREX2, opPos)
			}
			attr, class = map0[b], class0[b]
			if attr&aInv64 != 0 {
				return ildFail(whyInv64, opPos)
			}
		} else {
			switch b >> 4 {
			case 0x3, 0x8:
				return ildFail(whyREX2, opPos)
			}
			attr, class = map1[b], class1[b]
			if attr&aBad != 0 || b == 0x0F {
				return ildFail(whyUndef0F, opPos)
			}
		}
	}

	// ModRM, SIB, displacement.
	var reg byte
	if attr&aModRM != 0 {
		if i >= len(code) {
			return need(i, full)
		}
		modrm := code[i]
		i++
		reg = modrm >> 3 & 7
		if attr&aIgnMod == 0 {
			e := modrmExtra[asz>>1&1][modrm] // index 1 for 16-bit addressing
			if e&sibBase != 0 {
				if i >= len(code) {
					return need(i, full)
				}
				if code[i]&7 == 5 {
					i += 4
				}
			}
			i += int(e & 0xF)
		}
		if attr&aSpecial != 0 {
			var extra int
			class, extra = special(b, modrm, reg, attr, prefixState{p66: p66, f3: f3, rexR: rexR, rep: rep}, class)
			i += extra
		}
	}

	// Immediates and branch displacements.
	if attr&aImmAny != 0 {
		if attr&(aRel8|aRelZ) != 0 {
			return relBranch(code, full, i, attr&aRelZ != 0, mode, p66, osz == 2, class, in)
		}
		if attr&aImm8 != 0 {
			i++
		}
		if attr&aImm16 != 0 {
			i += 2
		}
		if attr&aImmZ != 0 {
			i += min(osz, 4)
		}
		if attr&aImmV != 0 {
			i += osz
		}
		if attr&aMoffs != 0 {
			i += asz
		}
		if attr&aPtr != 0 {
			i += 2 + min(osz, 4)
		}
		if attr&aGrp3 != 0 && reg < 2 {
			if b == 0xF6 {
				i++
			} else {
				i += min(osz, 4)
			}
		}
	}
	return finish(in, code, full, i, class, mode)
}

// setRaw copies the n instruction bytes into in.Raw and zeroes the rest.
// finish completes a non-branch (or indirect) instruction of length i, or
// reports that code holds fewer than i bytes.
func finish(in *Insn, code []byte, full, i int, class InsnClass, mode ExecMode) int {
	if i > len(code) {
		return need(i, full)
	}
	in.Len = uint8(i)
	in.Class = class
	in.Mode = mode
	in.Target = 0
	setRaw(in, code, full, i)
	return i
}

// effSizes returns the effective operand and address sizes in bytes for
// the mode and the 66 (operand size), 67 (address size) and REX.W prefixes;
// ok is false for an unknown mode.
func effSizes(mode ExecMode, p66, p67, rexW bool) (osz, asz int, ok bool) {
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
	case Mode16:
		osz, asz = 2, 2
		if p66 {
			osz = 4
		}
		if p67 {
			asz = 4
		}
	default:
		return 0, 0, false
	}
	return osz, asz, true
}

func setRaw(in *Insn, code []byte, full, n int) {
	if full >= 16 && n < 16 {
		// Two overlapping 8-byte loads, masked to n bytes: no branch on n.
		lo := binary.LittleEndian.Uint64(code[0:8]) & rawMask[0][n]
		hi := binary.LittleEndian.Uint64(code[7:15]) & rawMask[1][n]
		binary.LittleEndian.PutUint64(in.Raw[0:8], lo)
		binary.LittleEndian.PutUint64(in.Raw[7:15], hi)
		return
	}
	copy(in.Raw[:], code[:n])
	clear(in.Raw[n:])
}

// rawMask[0][n] keeps bytes 0..7 of an n-byte instruction, rawMask[1][n]
// bytes 7..14 (byte 7 is in both words; the second store wins, so its mask
// must keep byte 7 when n > 7).
var rawMask = func() (m [2][16]uint64) {
	for n := 0; n < 16; n++ {
		for k := 0; k < 8; k++ {
			if k < n {
				m[0][n] |= 0xFF << (8 * k)
			}
			if 7+k < n {
				m[1][n] |= 0xFF << (8 * k)
			}
		}
	}
	return m
}()

// relBranch finishes a direct near branch whose displacement starts at
// code[i]: it adds the displacement and computes the target.
// relz selects rel16/32 over rel8; o16 says the operand size is 16 bits.
func relBranch(code []byte, full, i int, relz bool, mode ExecMode, p66, o16 bool, class InsnClass, in *Insn) int {
	// Intel CPUs ignore 66 on near branches in 64-bit mode: rel32 and a
	// 64-bit IP (objdump -M intel64; AMD would take rel16 and truncate).
	size := 1
	if relz {
		size = 4
		if o16 && mode != Mode64 {
			size = 2
		}
	}
	n := i + size
	if n > len(code) {
		return need(n, full)
	}
	var disp int64
	switch size {
	case 1:
		disp = int64(int8(code[i]))
	case 2:
		disp = int64(int16(binary.LittleEndian.Uint16(code[i:])))
	default:
		disp = int64(int32(binary.LittleEndian.Uint32(code[i:])))
	}
	t := in.IP + uint64(n) + uint64(disp)
	// The new IP has the branch's operand size: 16 bits with a 16-bit
	// operand size, 32 in 32-bit code (EIP), 64 in 64-bit mode.
	switch {
	case mode == Mode64:
	case (mode == Mode16) != p66:
		t &= 0xFFFF
	default:
		t &= 0xFFFFFFFF
	}
	in.Len = uint8(n)
	in.Class = class
	in.Mode = mode
	in.Target = t
	setRaw(in, code, full, n)
	return n
}

// prefixState is what special() needs to know about the prefixes.
type prefixState struct {
	p66, f3, rexR bool // 66 seen, F3 seen, REX.R in effect
	rep           byte // the last F2/F3 prefix, or 0
}

// special handles the opcodes whose class or size depends on ModRM or a
// prefix. It returns the class and extra immediate bytes. The classes
// follow libipt's pt_ild (pt_instruction_decode).
func special(op, modrm, reg byte, attr opAttr, ps prefixState, class InsnClass) (InsnClass, int) {
	if attr&aMap1 == 0 {
		if op == 0xFF {
			return ffClass[reg], 0
		}
		return class, 0
	}
	switch op {
	case 0x01: // 0F 01: system group
		switch modrm {
		case 0xC1: // vmcall
			return ClassVMExit, 0
		case 0xC2, 0xC3: // vmlaunch, vmresume
			return ClassVMEntry, 0
		case 0xEC: // uiret (F3 0F 01 EC)
			return ClassFarRet, 0
		case 0xCA: // F2: erets, F3: eretu (FRED); clac without a prefix
			if ps.rep != 0 {
				return ClassFarRet, 0
			}
		}
	case 0x22: // mov cr, r: CR3 needs REX.R clear (else CR11)
		if reg == 3 && !ps.rexR {
			return ClassMovCR3, 0
		}
	case 0xAE: // F3 0F AE /4: ptwrite (not with 66)
		if reg == 4 && ps.f3 && !ps.p66 {
			return ClassPTWrite, 0
		}
	case 0x78: // 66 0F 78 /0 ib ib extrq; F2 0F 78 /r ib ib insertq (SSE4a)
		if ps.rep == 0xF2 || (ps.rep == 0 && ps.p66) {
			return class, 2
		}
	}
	return class, 0
}

// vex decodes a VEX (C4, C5), EVEX (62) or XOP (8F) instruction; code[i]
// is the byte after the escape byte esc.
func vex(code []byte, full, i int, esc byte, a16 bool, mode ExecMode, in *Insn) int {
	mapPos := i
	if i >= len(code) {
		return need(i, full)
	}
	var m byte // opcode map
	switch esc {
	case 0xC5:
		m = 1
		i++
	case 0xC4, 0x8F:
		m = code[i] & 0x1F
		i += 2
	case 0x62:
		m = code[i] & 7
		i += 3
	}
	if i >= len(code) {
		return need(i, full)
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
			return ildFail(whyXOPMap, mapPos)
		}
	case m == 1:
		if op == 0x77 { // vzeroupper, vzeroall
			modrm = false
		}
		imm = int(vexImm1[op])
	case m == 2:
	case m == 3:
		imm = 1
	case esc == 0x62 && (m == 5 || m == 6): // AVX512-FP16
	default:
		return ildFail(whyVEXMap, mapPos)
	}
	if modrm {
		if i >= len(code) {
			return need(i, full)
		}
		e := modrmExtra[0][code[i]]
		if a16 {
			e = modrmExtra[1][code[i]]
		}
		i++
		if e&sibBase != 0 {
			if i >= len(code) {
				return need(i, full)
			}
			if code[i]&7 == 5 {
				i += 4
			}
		}
		i += int(e & 0xF)
	}
	i += imm
	return finish(in, code, full, i, ClassOther, mode)
}
