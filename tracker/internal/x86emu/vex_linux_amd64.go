package x86emu

import (
	"golang.org/x/arch/x86/x86asm"
)

// VEX-encoded stores. x86asm does not decode VEX (in 64-bit mode C4 and
// C5 are VEX prefixes, which it reports as errors), and glibc's memcpy
// copies with vmovdqu ymm: a JIT that copies code into place that way
// stored it through a step before, which needs the page writable for the
// step, an mprotect the program's own seccomp filter may refuse (found
// by the new-user trial of 2026-11-27). So the stores of an XMM or YMM
// register to memory in map 0F are decoded here:
//
//	11 vmovups (NP), vmovupd (66): 16 or 32 bytes; vmovss (F3): 4; vmovsd (F2): 8
//	13 vmovlps (NP), vmovlpd (66): the low 8 bytes
//	17 vmovhps (NP), vmovhpd (66): the high 8 bytes of the XMM register
//	29 vmovaps (NP), vmovapd (66): 16 or 32 bytes
//	2B vmovntps (NP), vmovntpd (66): 16 or 32 bytes
//	7E vmovd/vmovq (66): 4 bytes, or 8 with VEX.W
//	7F vmovdqa (66), vmovdqu (F3): 16 or 32 bytes
//	D6 vmovq (66): 8 bytes
//	E7 vmovntdq (66): 16 or 32 bytes
//
// The memory operand is decoded as the CPU does (ModRM, SIB, disp8 or
// disp32, RIP-relative, the 67 prefix, an FS or GS override). VEX.vvvv
// must be 1111 in these forms (the CPU raises #UD otherwise); anything else
// (EVEX, XOP, a register destination, a gather, a masked store) is
// ErrNotEmulated.

// vexStore describes one store form: its size in bytes for VEX.L 0 and 1
// (0: the form does not exist), and the byte offset in the register
// where the stored bytes start.
type vexStore struct {
	size [2]int
	off  int
}

// vexStores maps (opcode, pp) to the store form; pp is VEX's implied
// prefix: 0 none, 1 66, 2 F3, 3 F2.
var vexStores = map[[2]byte]vexStore{
	{0x11, 0}: {size: [2]int{16, 32}}, {0x11, 1}: {size: [2]int{16, 32}},
	{0x11, 2}: {size: [2]int{4, 4}}, {0x11, 3}: {size: [2]int{8, 8}},
	{0x13, 0}: {size: [2]int{8, 0}}, {0x13, 1}: {size: [2]int{8, 0}},
	{0x17, 0}: {size: [2]int{8, 0}, off: 8}, {0x17, 1}: {size: [2]int{8, 0}, off: 8},
	{0x29, 0}: {size: [2]int{16, 32}}, {0x29, 1}: {size: [2]int{16, 32}},
	{0x2b, 0}: {size: [2]int{16, 32}}, {0x2b, 1}: {size: [2]int{16, 32}},
	{0x7e, 1}: {size: [2]int{4, 0}}, // 8 with VEX.W (vexDecode)
	{0x7f, 1}: {size: [2]int{16, 32}}, {0x7f, 2}: {size: [2]int{16, 32}},
	{0xd6, 1}: {size: [2]int{8, 0}},
	{0xe7, 1}: {size: [2]int{16, 32}},
}

// vexInsn is a decoded VEX store.
type vexInsn struct {
	len  int    // instruction length
	reg  int    // source register, 0-15
	size int    // bytes stored
	off  int    // first byte of the register stored
	addr uint64 // the memory operand's address
}

// isVEX reports whether code starts, after legacy prefixes VEX allows
// before it, with a VEX prefix (C4 or C5).
func isVEX(code []byte) bool {
	i := vexPrefixes(code)
	return i < len(code) && (code[i] == 0xc4 || code[i] == 0xc5)
}

// vexPrefixes returns the index after the segment and address-size
// prefixes at the start of code (66, F2, F3, LOCK and REX before VEX
// raise #UD, and are not skipped).
func vexPrefixes(code []byte) int {
	i := 0
	for i < len(code) && i < 14 {
		switch code[i] {
		case 0x26, 0x2e, 0x36, 0x3e, 0x64, 0x65, 0x67:
			i++
			continue
		}
		break
	}
	return i
}

// vexDecode decodes a VEX store at regs.Rip (code), computing its address
// from the registers.
func vexDecode(code []byte, m Machine) (vexInsn, error) {
	r := m.Regs
	var in vexInsn
	var seg byte
	addr32 := false
	i := 0
	for ; i < vexPrefixes(code); i++ {
		switch code[i] {
		case 0x64, 0x65:
			seg = code[i]
		case 0x67:
			addr32 = true
		}
	}
	need := func(n int) bool { return i+n <= len(code) }
	if !need(3) {
		return in, ErrNotEmulated
	}
	var rExt, xExt, bExt, w, l, pp, vvvv int
	switch code[i] {
	case 0xc5:
		b1 := int(code[i+1])
		rExt, xExt, bExt = (b1>>7^1)<<3, 0, 0
		vvvv, l, pp = b1>>3&0xf^0xf, b1>>2&1, b1&3
		i += 2
	case 0xc4:
		if !need(4) {
			return in, ErrNotEmulated
		}
		b1, b2 := int(code[i+1]), int(code[i+2])
		if b1&0x1f != 1 { // map 0F only
			return in, ErrNotEmulated
		}
		rExt, xExt, bExt = (b1>>7^1)<<3, (b1>>6&1^1)<<3, (b1>>5&1^1)<<3
		w, vvvv, l, pp = b2>>7, b2>>3&0xf^0xf, b2>>2&1, b2&3
		i += 3
	default:
		return in, ErrNotEmulated
	}
	if vvvv != 0 || !need(2) {
		return in, ErrNotEmulated
	}
	op, modrm := code[i], int(code[i+1])
	i += 2
	form, ok := vexStores[[2]byte{op, byte(pp)}]
	if !ok || form.size[l] == 0 {
		return in, ErrNotEmulated
	}
	in.size, in.off = form.size[l], form.off
	if op == 0x7e && w == 1 {
		in.size = 8
	}
	mod, reg, rm := modrm>>6, modrm>>3&7, modrm&7
	if mod == 3 {
		return in, ErrNotEmulated // a register destination
	}
	in.reg = reg | rExt
	var a uint64
	ripRel := false
	if rm == 4 {
		if !need(1) {
			return in, ErrNotEmulated
		}
		sib := int(code[i])
		i++
		scale, index, base := sib>>6, sib>>3&7|xExt, sib&7
		if index != 4 { // 4 (RSP) as an index: none
			a += *gpr(r, index) << scale
		}
		if base == 5 && mod == 0 {
			if !need(4) {
				return in, ErrNotEmulated
			}
			a += uint64(int64(int32(le32(code[i:]))))
			i += 4
		} else {
			a += *gpr(r, base|bExt)
		}
	} else if rm == 5 && mod == 0 {
		ripRel = true
		if !need(4) {
			return in, ErrNotEmulated
		}
		a = uint64(int64(int32(le32(code[i:]))))
		i += 4
	} else {
		a = *gpr(r, rm|bExt)
	}
	switch mod {
	case 1:
		if !need(1) {
			return in, ErrNotEmulated
		}
		a += uint64(int64(int8(code[i])))
		i++
	case 2:
		if !need(4) {
			return in, ErrNotEmulated
		}
		a += uint64(int64(int32(le32(code[i:]))))
		i += 4
	}
	in.len = i
	if ripRel {
		a += r.Rip + uint64(in.len)
	}
	if addr32 {
		a &= 0xffffffff
	}
	switch seg {
	case 0x64:
		a += r.Fs_base
	case 0x65:
		a += r.Gs_base
	}
	in.addr = a
	return in, nil
}

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

// emulateVEX computes a VEX store's bytes (see above) and moves RIP past
// it. The instruction returned has only its length: x86asm has no VEX.
func emulateVEX(code []byte, m Machine) (x86asm.Inst, []Store, error) {
	vi, err := vexDecode(code, m)
	if err != nil || m.XMM == nil {
		return x86asm.Inst{}, nil, ErrNotEmulated
	}
	x, err := m.XMM(vi.reg)
	if err != nil {
		return x86asm.Inst{}, nil, ErrNotEmulated
	}
	reg := append([]byte(nil), x[:16]...)
	if vi.size > 16 {
		if m.YMMHigh == nil {
			return x86asm.Inst{}, nil, ErrNotEmulated
		}
		hi, err := m.YMMHigh(vi.reg)
		if err != nil {
			return x86asm.Inst{}, nil, ErrNotEmulated
		}
		reg = append(reg, hi[:16]...)
	}
	m.Regs.Rip += uint64(vi.len)
	data := append([]byte(nil), reg[vi.off:vi.off+vi.size]...)
	return x86asm.Inst{Len: vi.len}, []Store{{vi.addr, data}}, nil
}
