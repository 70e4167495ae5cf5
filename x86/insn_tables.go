package x86

// Opcode tables for the length decoder (insn_ild.go). They are built once
// from the lists below, which follow the opcode maps of the Intel SDM
// volume 2, appendix A (one-byte map, two-byte map ).

// Prefix kinds, indexed by byte.
const (
	pfxNone  = iota
	pfxOther // segment overrides, lock
	pfx66
	pfx67
	pfxF2
	pfxF3
	pfxREX // 40-4F, a prefix only in 64-bit mode
)

// opAttr describes the operands of an opcode that matter for its length.
type opAttr uint16

const (
	aModRM   opAttr = 1 << iota // a ModRM byte follows
	aImm8                       // 1-byte immediate
	aImm16                      // 2-byte immediate (ret iw, enter iw ib)
	aImmZ                       // 2 or 4 bytes by operand size
	aImmV                       // 2, 4 or 8 bytes by operand size (B8+r)
	aMoffs                      // 2, 4 or 8 bytes by address size (A0-A3)
	aPtr                        // far pointer: 2 + 2 or 4 bytes by operand size
	aGrp3                       // F6/F7: immediate only for /0, /1
	aRel8                       // rel8 branch displacement
	aRelZ                       // rel16/rel32 branch displacement
	aIgnMod                     // ModRM.mod ignored (mov cr/dr): no SIB, no disp
	aInv64                      // invalid in 64-bit mode
	aSpecial                    // class or size depends on ModRM/prefixes: see special()
	aMap1                       // opcode is in the 0F map (for special())
	aBad                        // undefined opcode

	aImmAny = aImm8 | aImm16 | aImmZ | aImmV | aMoffs | aPtr | aGrp3 | aRel8 | aRelZ
)

var (
	prefixKind [256]uint8
	map0       [256]opAttr // one-byte opcodes
	map1       [256]opAttr // 0F xx
	class0     [256]InsnClass
	class1     [256]InsnClass
	vexImm1    [256]uint8 // VEX/EVEX map 1 (0F) opcodes with an imm8

	// modrmExtra[a16][modrm] is the number of bytes after a ModRM byte
	// (SIB and displacement) for 32/64-bit addressing (a16 = 0) and 16-bit
	// addressing (a16 = 1). sibBase marks a SIB with mod == 0, where base
	// 101 adds a disp32.
	modrmExtra [2][256]uint8
	ffClass    = [8]InsnClass{ClassOther, ClassOther, ClassIndCall, ClassFarCall, ClassIndJump, ClassFarJump, ClassOther, ClassOther}
)

// The fast path's tables (see ild).

// Prefix bits: pbAny marks a prefix byte; pb66, pb67 and pbW (REX.W) select
// the size state together with the mode (Mode16..Mode64 = 1..3).
const (
	pb66  = 0x04
	pb67  = 0x08
	pbW   = 0x10
	pbAny = 0x80
)

// sizeState bits: the low 4 bits index fastImm0/fastImm1 (operand size x
// address size), then the 64-bit flag, the 16-bit-addressing flag and the
// 16-bit-operand flag.
const (
	ss64  = 0x10
	ssA16 = 0x20
	ssO16 = 0x40
)

// fastAttr is an opcode's attributes for the fast path.
type fastAttr uint8

const (
	fModRM fastAttr = 1 << iota
	fRel8
	fRelZ
	fSlow // decode with ildSlow
)

var (
	prefixBits [2][256]uint8 // [0] 16/32-bit modes, [1] 64-bit mode
	sizeState  [32]uint8     // by mode | pb66 | pb67 | pbW
	fast0      [2][256]fastAttr
	fast1      [256]fastAttr
	fastImm0   [9][256]uint8 // immediate bytes by size state, one-byte map
	fastImm1   [9][256]uint8 // same for the 0F map
)

// initFast derives the fast path's tables from the full ones.
func initFast() {
	for m := 0; m < 2; m++ {
		for b := 0; b < 256; b++ {
			switch prefixKind[b] {
			case pfxNone:
			case pfx66:
				prefixBits[m][b] = pbAny | pb66
			case pfx67:
				prefixBits[m][b] = pbAny | pb67
			case pfxREX:
				if m == 1 {
					prefixBits[m][b] = pbAny
					if b&8 != 0 {
						prefixBits[m][b] |= pbW
					}
				}
			default:
				prefixBits[m][b] = pbAny
			}
		}
	}
	idx := map[int]int{2: 0, 4: 1, 8: 2}
	for key := 0; key < 32; key++ {
		mode := ExecMode(key & 3)
		p66, p67, w := key&pb66 != 0, key&pb67 != 0, key&pbW != 0
		osz, asz, ok := effSizes(mode, p66, p67, w)
		if !ok {
			continue
		}
		var ss uint8
		if mode == Mode64 {
			ss = ss64
		}
		ss |= uint8(idx[osz]*3 + idx[asz])
		if asz == 2 {
			ss |= ssA16
		}
		if osz == 2 {
			ss |= ssO16
		}
		sizeState[key] = ss
	}
	immBytes := func(a opAttr, osz, asz int) uint8 {
		n := 0
		if a&aImm8 != 0 {
			n++
		}
		if a&aImm16 != 0 {
			n += 2
		}
		if a&aImmZ != 0 {
			n += min(osz, 4)
		}
		if a&aImmV != 0 {
			n += osz
		}
		if a&aMoffs != 0 {
			n += asz
		}
		if a&aPtr != 0 {
			n += 2 + min(osz, 4)
		}
		return uint8(n)
	}
	sizes := []int{2, 4, 8}
	for st := 0; st < 9; st++ {
		osz, asz := sizes[st/3], sizes[st%3]
		for b := 0; b < 256; b++ {
			fastImm0[st][b] = immBytes(map0[b], osz, asz)
			fastImm1[st][b] = immBytes(map1[b], osz, asz)
		}
	}
	fa := func(a opAttr) fastAttr {
		var f fastAttr
		if a&aModRM != 0 {
			f |= fModRM
		}
		if a&aRel8 != 0 {
			f |= fRel8
		}
		if a&aRelZ != 0 {
			f |= fRelZ
		}
		if a&(aGrp3|aSpecial|aIgnMod|aBad) != 0 {
			f |= fSlow
		}
		return f
	}
	for b := 0; b < 256; b++ {
		fast0[0][b] = fa(map0[b])
		fast0[1][b] = fa(map0[b])
		if map0[b]&aInv64 != 0 {
			fast0[1][b] |= fSlow
		}
		fast1[b] = fa(map1[b])
	}
	for _, b := range []int{0xC4, 0xC5, 0x62, 0x8F} { // VEX, EVEX, XOP
		fast0[0][b] |= fSlow
		fast0[1][b] |= fSlow
	}
	for _, b := range []int{0x38, 0x3A, 0x0F} { // 0F38, 0F3A, 3DNow!
		fast1[b] |= fSlow
	}
}

// sibBase flags a modrmExtra entry whose SIB byte must be looked at.
const sibBase = 0x80

func init() {
	for m := 0; m < 256; m++ {
		mod, rm := m>>6, m&7
		var e uint8
		switch {
		case mod == 3:
		case rm == 4: // SIB
			e = 1 + [3]uint8{0, 1, 4}[mod]
			if mod == 0 {
				e |= sibBase
			}
		case mod == 0 && rm == 5: // disp32 (RIP-relative in 64-bit mode)
			e = 4
		default:
			e = [3]uint8{0, 1, 4}[mod]
		}
		modrmExtra[0][m] = e
		e = 0
		switch {
		case mod == 3:
		case mod == 0 && rm == 6: // disp16
			e = 2
		default:
			e = [3]uint8{0, 1, 2}[mod]
		}
		modrmExtra[1][m] = e
	}

	for _, b := range []byte{0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65, 0xF0} {
		prefixKind[b] = pfxOther
	}
	prefixKind[0x66] = pfx66
	prefixKind[0x67] = pfx67
	prefixKind[0xF2] = pfxF2
	prefixKind[0xF3] = pfxF3
	for b := 0x40; b <= 0x4F; b++ {
		prefixKind[b] = pfxREX
	}

	set := func(t *[256]opAttr, a opAttr, ops ...int) {
		for _, op := range ops {
			t[op] |= a
		}
	}
	span := func(lo, hi int) []int {
		var s []int
		for b := lo; b <= hi; b++ {
			s = append(s, b)
		}
		return s
	}

	// One-byte map. ALU groups 00-3F: Eb,Gb / Ev,Gv / Gb,Eb / Gv,Ev, then
	// AL,ib and rAX,iz.
	for g := 0; g < 0x40; g += 8 {
		set(&map0, aModRM, g, g+1, g+2, g+3)
		set(&map0, aImm8, g+4)
		set(&map0, aImmZ, g+5)
	}
	set(&map0, aInv64, 0x06, 0x07, 0x0E, 0x16, 0x17, 0x1E, 0x1F, 0x27, 0x2F, 0x37, 0x3F)
	set(&map0, aInv64, 0x60, 0x61, 0x62, 0xC4, 0xC5, 0x82, 0x9A, 0xCE, 0xD4, 0xD5, 0xD6, 0xEA)
	set(&map0, aModRM, 0x62, 0x63, 0x69, 0x6B)
	set(&map0, aImmZ, 0x68, 0x69)
	set(&map0, aImm8, 0x6A, 0x6B)
	set(&map0, aRel8, span(0x70, 0x7F)...)
	set(&map0, aModRM, span(0x80, 0x8F)...)
	set(&map0, aImm8, 0x80, 0x82, 0x83)
	set(&map0, aImmZ, 0x81)
	set(&map0, aPtr, 0x9A, 0xEA)
	set(&map0, aMoffs, 0xA0, 0xA1, 0xA2, 0xA3)
	set(&map0, aImm8, 0xA8)
	set(&map0, aImmZ, 0xA9)
	set(&map0, aImm8, span(0xB0, 0xB7)...)
	set(&map0, aImmV, span(0xB8, 0xBF)...)
	set(&map0, aModRM, 0xC0, 0xC1, 0xC4, 0xC5, 0xC6, 0xC7)
	set(&map0, aImm8, 0xC0, 0xC1, 0xC6, 0xCD, 0xD4, 0xD5)
	set(&map0, aImmZ, 0xC7)
	set(&map0, aImm16, 0xC2, 0xCA)
	set(&map0, aImm16|aImm8, 0xC8) // enter iw, ib
	set(&map0, aModRM, span(0xD0, 0xD3)...)
	set(&map0, aModRM, span(0xD8, 0xDF)...) // x87
	set(&map0, aRel8, 0xE0, 0xE1, 0xE2, 0xE3, 0xEB)
	set(&map0, aImm8, 0xE4, 0xE5, 0xE6, 0xE7)
	set(&map0, aRelZ, 0xE8, 0xE9)
	set(&map0, aModRM|aGrp3, 0xF6, 0xF7)
	set(&map0, aModRM, 0xFE)
	set(&map0, aModRM|aSpecial, 0xFF)

	for b := 0x70; b <= 0x7F; b++ {
		class0[b] = ClassCondJump
	}
	for b := 0xE0; b <= 0xE3; b++ {
		class0[b] = ClassCondJump // loopne, loope, loop, jrcxz
	}
	class0[0xE8] = ClassCall
	class0[0xE9] = ClassJump
	class0[0xEB] = ClassJump
	class0[0xC2] = ClassRet
	class0[0xC3] = ClassRet
	class0[0xCA] = ClassFarRet
	class0[0xCB] = ClassFarRet
	class0[0xCF] = ClassFarRet // iret
	class0[0x9A] = ClassFarCall
	class0[0xEA] = ClassFarJump
	class0[0xCC] = ClassSyscall // int3
	class0[0xCD] = ClassSyscall // int n
	class0[0xCE] = ClassSyscall // into
	class0[0xF1] = ClassSyscall // int1 (icebp)

	// Two-byte map (0F xx). Most opcodes have a ModRM byte; list those that
	// do not, and the undefined ones.
	for b := 0; b < 256; b++ {
		map1[b] = aModRM | aMap1
	}
	noModRM := []int{0x05, 0x06, 0x07, 0x08, 0x09, 0x0B, 0x0E,
		0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x37,
		0x77, 0xA0, 0xA1, 0xA2, 0xA8, 0xA9, 0xAA}
	noModRM = append(noModRM, span(0x80, 0x8F)...)
	noModRM = append(noModRM, span(0xC8, 0xCF)...)
	for _, b := range noModRM {
		map1[b] &^= aModRM
	}
	for _, b := range []int{0x04, 0x0A, 0x0C, 0x25, 0x27, 0x36, 0x39, 0x3B, 0x3C, 0x3D, 0x3E, 0x3F} {
		map1[b] = aBad | aMap1
	}
	set(&map1, aIgnMod, 0x20, 0x21, 0x22, 0x23, 0x24, 0x26)
	set(&map1, aImm8, 0x70, 0x71, 0x72, 0x73, 0xA4, 0xAC, 0xBA, 0xC2, 0xC4, 0xC5, 0xC6)
	set(&map1, aRelZ, span(0x80, 0x8F)...)
	set(&map1, aSpecial, 0x01, 0x22, 0xAE, 0x78)
	for b := 0x80; b <= 0x8F; b++ {
		class1[b] = ClassCondJump
	}
	class1[0x05] = ClassSyscall // syscall
	class1[0x34] = ClassSyscall // sysenter
	class1[0x07] = ClassSysret  // sysret
	class1[0x35] = ClassSysret  // sysexit

	// VEX/EVEX map 1 opcodes with an imm8 (the legacy 0F map's imm8 set
	// that survives in VEX: pshuf*/shift groups, cmpps, pinsrw, pextrw,
	// shufps).
	for _, b := range []byte{0x70, 0x71, 0x72, 0x73, 0xC2, 0xC4, 0xC5, 0xC6} {
		vexImm1[b] = 1
	}
	initFast()
}
