package decode

import "github.com/ptjit/ptjit/x86"

// Per-section cache of decoded instructions, so that hot code is decoded
// once: an entry per byte offset, allocated a page at a time, filled the
// first time an instruction at that offset is decoded in that mode.
//
// A cache page (this one and the block cache's, flow_block.go) covers 256
// bytes of code: 2 KiB of insnEntry, 3 KiB of blockEntry. Traced code is
// sparse (a few blocks in each page of a library), and every cache page is
// fresh memory whose first touch is a page fault: with pages for 4 KiB of
// code (32 and 48 KiB each) a soft-PT JIT recording of 3.4 M instructions
// touched 7 MiB of cache for 93 code pages, and its faults were 5% of the
// decode. A new page is written before it is read: a read of untouched
// memory maps the zero page, and the write after it costs a second fault
// and a TLB shootdown.

const cachePageBits = 8

type insnEntry struct {
	size  uint8         // 0: not cached
	class x86.InsnClass // flow class
	mode  x86.ExecMode  // mode the entry was decoded in
	flags uint8         // insnFlag*
	disp  int32         // direct branch target - instruction address
}

// Flags for properties beyond the class that event binding needs.
const (
	insnFlagIret    = 1 << iota // iret (changes CPL)
	insnFlagVMPtrld             // vmptrld (binds a VMCS packet)
)

type insnCache struct {
	pages []*[1 << cachePageBits]insnEntry
}

// entry returns the cache slot for offset off in a section of size n.
func (c *insnCache) entry(off uint64, n int) *insnEntry {
	pg := off >> cachePageBits
	if c.pages == nil {
		c.pages = make([]*[1 << cachePageBits]insnEntry, (n+(1<<cachePageBits)-1)>>cachePageBits)
	}
	if pg >= uint64(len(c.pages)) {
		return nil
	}
	p := c.pages[pg]
	if p == nil {
		p = new([1 << cachePageBits]insnEntry)
		p[0].flags, p[len(p)-1].flags = 0, 0
		c.pages[pg] = p
	}
	return &p[off&(1<<cachePageBits-1)]
}

// insnFlags derives the extra properties from the instruction bytes.
func insnFlags(in *x86.Insn) uint8 {
	b := in.Raw[:in.Len]
	// Skip legacy prefixes and REX to find the opcode.
	i := 0
	p66, pF3 := false, false
	for i < len(b) {
		switch b[i] {
		case 0x66:
			p66 = true
		case 0xf3:
			pF3 = true
		case 0x67, 0xf2, 0xf0, 0x2e, 0x36, 0x3e, 0x26, 0x64, 0x65:
		default:
			goto opcode
		}
		i++
	}
opcode:
	if in.Mode == x86.Mode64 && i < len(b) && b[i]&0xf0 == 0x40 {
		i++
	}
	if i >= len(b) {
		return 0
	}
	switch {
	case b[i] == 0xcf:
		return insnFlagIret
	case in.Class == x86.ClassFarRet && b[0] == 0xf3 && len(b) == 4 && b[1] == 0x0f && b[2] == 0x01 && b[3] == 0xca:
		return insnFlagIret // ERETU returns to user mode
	case b[i] == 0x0f && i+2 < len(b) && b[i+1] == 0xc7 && !p66 && !pF3:
		modrm := b[i+2]
		if (modrm>>3)&7 == 6 && modrm>>6 != 3 {
			return insnFlagVMPtrld
		}
	}
	return 0
}

// FixupInsn classifies the instructions DecodeInsn does not know (or
// classifies differently from libipt): APX JMPABS (REX2 D5 00 A1 imm64),
// whose target PT reports with a TIP, and the FRED returns ERETU (F3 0F 01
// CA) and ERETS (F2 0F 01 CA), far returns. It reports whether in now holds
// such an instruction.
func FixupInsn(code []byte, ip uint64, mode x86.ExecMode, in *x86.Insn) bool {
	set := func(n int, c x86.InsnClass) bool {
		in.IP, in.Len, in.Class, in.Mode, in.Target = ip, uint8(n), c, mode, 0
		copy(in.Raw[:], code[:n])
		return true
	}
	if mode == x86.Mode64 && len(code) >= 11 && code[0] == 0xd5 && code[1] == 0x00 && code[2] == 0xa1 {
		return set(11, x86.ClassIndJump)
	}
	if len(code) >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x01 && code[3] == 0xec {
		return set(4, x86.ClassFarRet) // UIRET
	}
	if len(code) >= 4 && (code[0] == 0xf3 || code[0] == 0xf2) && code[1] == 0x0f && code[2] == 0x01 && code[3] == 0xca {
		if code[0] == 0xf3 {
			in.Raw[0] = 0xf3
		}
		return set(4, x86.ClassFarRet)
	}
	return false
}
