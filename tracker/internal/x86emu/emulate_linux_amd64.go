package x86emu

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// ErrNotEmulated: the instruction is not a store the emulator handles.
var ErrNotEmulated = errors.New("instruction not emulated")

// Machine is what the emulator reads: registers and memory.
type Machine struct {
	Regs *unix.PtraceRegs
	// XMM returns XMM register n (16 bytes), for SSE and AVX stores.
	XMM func(n int) ([]byte, error)
	// YMMHigh returns the upper 16 bytes of YMM register n, for 32-byte
	// AVX stores (vex_linux_amd64.go).
	YMMHigh func(n int) ([]byte, error)
	// Read reads tracee memory (MOVS's source).
	Read func(addr uint64, b []byte) error
}

// Store is one emulated store.
type Store struct {
	Addr uint64
	Data []byte
}

// maxStringStore bounds REP MOVS/STOS emulation; longer ones are stepped.
const maxStringStore = 1 << 20

func gpr(r *unix.PtraceRegs, i int) *uint64 {
	switch i {
	case 0:
		return &r.Rax
	case 1:
		return &r.Rcx
	case 2:
		return &r.Rdx
	case 3:
		return &r.Rbx
	case 4:
		return &r.Rsp
	case 5:
		return &r.Rbp
	case 6:
		return &r.Rsi
	case 7:
		return &r.Rdi
	case 8:
		return &r.R8
	case 9:
		return &r.R9
	case 10:
		return &r.R10
	case 11:
		return &r.R11
	case 12:
		return &r.R12
	case 13:
		return &r.R13
	case 14:
		return &r.R14
	}
	return &r.R15
}

// regValue returns the value of a general register and its size in bytes.
func regValue(r *unix.PtraceRegs, reg x86asm.Reg) (uint64, int, bool) {
	switch {
	case reg >= x86asm.AL && reg <= x86asm.R15B:
		// AL CL DL BL, AH CH DH BH, SPB BPB SIB DIB, R8B..R15B
		i := int(reg - x86asm.AL)
		switch {
		case i < 4:
			return *gpr(r, i) & 0xff, 1, true
		case i < 8: // the high bytes of A, C, D, B
			return *gpr(r, i-4) >> 8 & 0xff, 1, true
		}
		return *gpr(r, i-4) & 0xff, 1, true
	case reg >= x86asm.AX && reg <= x86asm.R15W:
		return *gpr(r, int(reg-x86asm.AX)) & 0xffff, 2, true
	case reg >= x86asm.EAX && reg <= x86asm.R15L:
		return *gpr(r, int(reg-x86asm.EAX)) & 0xffffffff, 4, true
	case reg >= x86asm.RAX && reg <= x86asm.R15:
		return *gpr(r, int(reg-x86asm.RAX)), 8, true
	case reg == x86asm.RIP:
		return r.Rip, 8, true
	}
	return 0, 0, false
}

// effAddr computes a memory operand's address; next is the address of the
// following instruction (for RIP-relative operands).
func effAddr(r *unix.PtraceRegs, in *x86asm.Inst, m x86asm.Mem, next uint64) (uint64, error) {
	var a uint64
	if m.Base != 0 {
		if m.Base == x86asm.RIP {
			a = next
		} else {
			v, _, ok := regValue(r, m.Base)
			if !ok {
				return 0, ErrNotEmulated
			}
			a = v
		}
	}
	if m.Index != 0 {
		v, _, ok := regValue(r, m.Index)
		if !ok {
			return 0, ErrNotEmulated
		}
		a += v * uint64(m.Scale)
	}
	// x86asm gives a disp32 zero-extended (its Disp is
	// int64(uint32)); in 64-bit addressing it is sign-extended, as disp8
	// is: [rbp-0x628] is rbp+0xfffff9d8 in m.Disp. Only a moffs operand
	// (mov to or from an absolute address, A0-A3: no base, no index)
	// carries a whole 64-bit address.
	disp := m.Disp
	if moffs := m.Base == 0 && m.Index == 0 && in.Len > 0 && in.Opcode>>24&0xfc == 0xa0; !moffs {
		disp = int64(int32(disp))
	}
	a += uint64(disp)
	if in.AddrSize == 32 {
		a &= 0xffffffff
	}
	switch m.Segment {
	case 0, x86asm.DS, x86asm.ES, x86asm.SS, x86asm.CS:
	case x86asm.FS:
		a += r.Fs_base
	case x86asm.GS:
		a += r.Gs_base
	default:
		return 0, ErrNotEmulated
	}
	return a, nil
}

func le(v uint64, n int) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, v)
	return b[:n]
}

// Emulate computes the stores of the instruction in code (decoded at
// regs.Rip) and updates m.Regs as executing it would (RIP; RSI, RDI, RCX
// for string instructions). It returns ErrNotEmulated for instructions it
// does not handle; regs are then unchanged.
func Emulate(code []byte, m Machine) (x86asm.Inst, []Store, error) {
	if isVEX(code) {
		return emulateVEX(code, m)
	}
	in, err := x86asm.Decode(code, 64)
	if err != nil {
		return in, nil, fmt.Errorf("%w: %v", ErrNotEmulated, err)
	}
	for _, p := range in.Prefix {
		if p&0xff == x86asm.PrefixLOCK&0xff {
			return in, nil, ErrNotEmulated
		}
	}
	next := m.Regs.Rip + uint64(in.Len)
	switch in.Op {
	case x86asm.MOV, x86asm.MOVNTI:
		return emulateMov(in, m, next)
	case x86asm.MOVUPS, x86asm.MOVAPS, x86asm.MOVDQU, x86asm.MOVDQA, x86asm.MOVUPD, x86asm.MOVAPD,
		x86asm.MOVNTDQ, x86asm.MOVNTPS, x86asm.MOVNTPD, x86asm.MOVQ, x86asm.MOVD, x86asm.MOVSD_XMM,
		x86asm.MOVSS, x86asm.MOVLPS, x86asm.MOVLPD, x86asm.MOVHPS, x86asm.MOVHPD:
		return emulateVector(in, m, next)
	case x86asm.STOSB, x86asm.STOSW, x86asm.STOSD, x86asm.STOSQ, x86asm.MOVSB, x86asm.MOVSW, x86asm.MOVSD, x86asm.MOVSQ:
		return emulateString(in, m, next)
	}
	return in, nil, ErrNotEmulated
}

// emulateMov: MOV or MOVNTI of a general register or an immediate to
// memory.
func emulateMov(in x86asm.Inst, m Machine, next uint64) (x86asm.Inst, []Store, error) {
	r := m.Regs
	dst, ok := in.Args[0].(x86asm.Mem)
	if !ok {
		return in, nil, ErrNotEmulated
	}
	addr, err := effAddr(r, &in, dst, next)
	if err != nil {
		return in, nil, err
	}
	var v uint64
	switch src := in.Args[1].(type) {
	case x86asm.Reg:
		var ok bool
		if v, _, ok = regValue(r, src); !ok {
			return in, nil, ErrNotEmulated // segment register store
		}
	case x86asm.Imm:
		v = uint64(src)
	default:
		return in, nil, ErrNotEmulated
	}
	n := in.MemBytes
	if n != 1 && n != 2 && n != 4 && n != 8 {
		return in, nil, ErrNotEmulated
	}
	r.Rip = next
	return in, []Store{{addr, le(v, n)}}, nil
}

// emulateVector: an SSE move of an XMM register (or, for MOVQ and MOVD,
// a general register) to memory.
func emulateVector(in x86asm.Inst, m Machine, next uint64) (x86asm.Inst, []Store, error) {
	r := m.Regs
	dst, ok := in.Args[0].(x86asm.Mem)
	if !ok {
		return in, nil, ErrNotEmulated
	}
	src, ok := in.Args[1].(x86asm.Reg)
	if !ok || m.XMM == nil {
		return in, nil, ErrNotEmulated
	}
	addr, err := effAddr(r, &in, dst, next)
	if err != nil {
		return in, nil, err
	}
	var data []byte
	if src >= x86asm.X0 && src <= x86asm.X15 {
		x, err := m.XMM(int(src - x86asm.X0))
		if err != nil {
			return in, nil, ErrNotEmulated
		}
		n := in.MemBytes
		if n <= 0 || n > 16 {
			return in, nil, ErrNotEmulated
		}
		off := 0
		if in.Op == x86asm.MOVHPS || in.Op == x86asm.MOVHPD {
			off = 8
		}
		data = append([]byte(nil), x[off:off+n]...)
	} else if v, n, ok := regValue(r, src); ok && (in.Op == x86asm.MOVQ || in.Op == x86asm.MOVD) {
		data = le(v, n)
	} else {
		return in, nil, ErrNotEmulated
	}
	r.Rip = next
	return in, []Store{{addr, data}}, nil
}

// stringSizes is the element size of each string store.
var stringSizes = map[x86asm.Op]int{x86asm.STOSB: 1, x86asm.STOSW: 2, x86asm.STOSD: 4, x86asm.STOSQ: 8,
	x86asm.MOVSB: 1, x86asm.MOVSW: 2, x86asm.MOVSD: 4, x86asm.MOVSQ: 8}

// stringPrefixes reports whether a string instruction repeats (REP or
// REPNE), and ok false for a segment override (FS, GS: the override of
// MOVS's source is not handled).
func stringPrefixes(in x86asm.Inst) (rep, ok bool) {
	for _, p := range in.Prefix {
		switch p & 0xff {
		case x86asm.PrefixREP & 0xff, x86asm.PrefixREPN & 0xff:
			rep = true
		case x86asm.PrefixFS & 0xff, x86asm.PrefixGS & 0xff:
			return rep, false
		}
	}
	return rep, true
}

// emulateString: STOS or MOVS, with or without REP, of at most
// maxStringStore bytes; a MOVS whose source and destination overlap is
// not emulated.
func emulateString(in x86asm.Inst, m Machine, next uint64) (x86asm.Inst, []Store, error) {
	r := m.Regs
	if in.AddrSize != 64 {
		return in, nil, ErrNotEmulated
	}
	size := uint64(stringSizes[in.Op])
	rep, ok := stringPrefixes(in)
	if !ok {
		return in, nil, ErrNotEmulated
	}
	count := uint64(1)
	if rep {
		count = r.Rcx
	}
	total := count * size
	if count > maxStringStore || total > maxStringStore {
		return in, nil, ErrNotEmulated
	}
	down := r.Eflags&(1<<10) != 0 // DF
	// the lowest address written (and, for MOVS, read)
	dst, src := r.Rdi, r.Rsi
	if down {
		dst, src = r.Rdi-(total-size), r.Rsi-(total-size)
	}
	isStos := in.Op == x86asm.STOSB || in.Op == x86asm.STOSW || in.Op == x86asm.STOSD || in.Op == x86asm.STOSQ
	data := make([]byte, total)
	if isStos {
		v := le(r.Rax, int(size))
		for i := uint64(0); i < count; i++ {
			copy(data[i*size:], v)
		}
	} else {
		// Element i comes from rsi±i*size and goes to rdi±i*size: the
		// bytes keep their order in either direction. Overlapping
		// ranges, where the CPU's element-by-element copy reads what it
		// wrote, are not emulated.
		if total > 0 {
			if err := m.Read(src, data); err != nil {
				return in, nil, ErrNotEmulated
			}
		}
		if rangesOverlap(src, dst, total) {
			return in, nil, ErrNotEmulated
		}
	}
	step := total
	if down {
		step = -total
	}
	r.Rdi += step
	if !isStos {
		r.Rsi += step
	}
	if rep {
		r.Rcx = 0
	}
	r.Rip = next
	if total == 0 {
		return in, nil, nil
	}
	return in, []Store{{dst, data}}, nil
}

func rangesOverlap(a, b, n uint64) bool { return a < b+n && b < a+n }
