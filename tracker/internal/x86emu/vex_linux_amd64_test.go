package x86emu

import (
	"bytes"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEmulateVEX: VEX stores as GNU as encodes them (objdump -d of the
// assembly named, but for vmovq's 7E form, which as does not choose:
// encoded by hand), their addresses and bytes worked out from the SDM.
func TestEmulateVEX(t *testing.T) {
	regs := func() *unix.PtraceRegs {
		return &unix.PtraceRegs{Rip: 0x400000, Rdi: 0x1_0000_1000, Rsi: 0x2000, Rcx: 3, R12: 0x10000, R13: 2,
			Rsp: 0x7000, Rax: 0x3000, Rbx: 0x4000, Rbp: 0x5000, R8: 0x6000, R9: 0x8000, Rdx: 0x9000, Fs_base: 0x100000}
	}
	// register n's byte j: XMM n*16+j, the upper YMM half 0x80+n*16+j
	xmm := func(n int) ([]byte, error) {
		b := make([]byte, 16)
		for j := range b {
			b[j] = byte(n*16 + j)
		}
		return b, nil
	}
	hi := func(n int) ([]byte, error) {
		b := make([]byte, 16)
		for j := range b {
			b[j] = byte(0x80 + n*16 + j)
		}
		return b, nil
	}
	reg := func(n, off, size int) []byte {
		x, _ := xmm(n)
		h, _ := hi(n)
		return append(x, h...)[off : off+size]
	}
	cases := []struct {
		asm  string
		code []byte
		len  int
		addr uint64
		data []byte // nil: not emulated
	}{
		{"vmovdqu %ymm0,(%rdi)", []byte{0xc5, 0xfe, 0x7f, 0x07}, 4, 0x1_0000_1000, reg(0, 0, 32)},
		{"vmovdqu %ymm9,0x10(%rdi)", []byte{0xc5, 0x7e, 0x7f, 0x4f, 0x10}, 5, 0x1_0000_1010, reg(9, 0, 32)},
		{"vmovdqu %xmm3,-0x8(%rsi,%rcx,4)", []byte{0xc5, 0xfa, 0x7f, 0x5c, 0x8e, 0xf8}, 6, 0x2000 + 12 - 8, reg(3, 0, 16)},
		{"vmovdqa %ymm15,0x1000(%r12,%r13,8)", []byte{0xc4, 0x01, 0x7d, 0x7f, 0xbc, 0xec, 0x00, 0x10, 0x00, 0x00}, 10, 0x10000 + 16 + 0x1000, reg(15, 0, 32)},
		{"vmovups %ymm1,0x0(%rip)", []byte{0xc5, 0xfc, 0x11, 0x0d, 0, 0, 0, 0}, 8, 0x400008, reg(1, 0, 32)},
		{"vmovaps %xmm2,0x20(%rsp)", []byte{0xc5, 0xf8, 0x29, 0x54, 0x24, 0x20}, 6, 0x7020, reg(2, 0, 16)},
		{"vmovntdq %ymm4,(%rax)", []byte{0xc5, 0xfd, 0xe7, 0x20}, 4, 0x3000, reg(4, 0, 32)},
		{"vmovss %xmm5,(%rbx)", []byte{0xc5, 0xfa, 0x11, 0x2b}, 4, 0x4000, reg(5, 0, 4)},
		{"vmovsd %xmm6,0x8(%rbp)", []byte{0xc5, 0xfb, 0x11, 0x75, 0x08}, 5, 0x5008, reg(6, 0, 8)},
		{"vmovq %xmm7,(%r8)", []byte{0xc4, 0xc1, 0x79, 0xd6, 0x38}, 5, 0x6000, reg(7, 0, 8)},
		{"vmovd %xmm8,(%r9)", []byte{0xc4, 0x41, 0x79, 0x7e, 0x01}, 5, 0x8000, reg(8, 0, 4)},
		{"vmovq %xmm0,(%r9) (7E, VEX.W)", []byte{0xc4, 0xc1, 0xf9, 0x7e, 0x01}, 5, 0x8000, reg(0, 0, 8)},
		{"vmovhps %xmm1,(%rdx)", []byte{0xc5, 0xf8, 0x17, 0x0a}, 4, 0x9000, reg(1, 8, 8)},
		{"vmovlps %xmm1,(%rdx)", []byte{0xc5, 0xf8, 0x13, 0x0a}, 4, 0x9000, reg(1, 0, 8)},
		{"vmovdqu %ymm0,%fs:(%rdi)", []byte{0x64, 0xc5, 0xfe, 0x7f, 0x07}, 5, 0x1_0010_1000, reg(0, 0, 32)},
		{"vmovdqu %ymm0,(%edi)", []byte{0x67, 0xc5, 0xfe, 0x7f, 0x07}, 5, 0x1000, reg(0, 0, 32)},
		{"vmovdqu %ymm2,0x12345678", []byte{0xc5, 0xfe, 0x7f, 0x14, 0x25, 0x78, 0x56, 0x34, 0x12}, 9, 0x12345678, reg(2, 0, 32)},
		{"vmovdqu (%rdi),%ymm0 (a load)", []byte{0xc5, 0xfe, 0x6f, 0x07}, 0, 0, nil},
		{"vmovdqu %ymm1,%ymm2 (registers)", []byte{0xc5, 0xfe, 0x6f, 0xd1}, 0, 0, nil},
		{"vmovdqu %ymm0,%ymm1 (store form, register destination)", []byte{0xc5, 0xfe, 0x7f, 0xc1}, 0, 0, nil},
		{"vaddps %ymm1,%ymm2,%ymm3", []byte{0xc5, 0xec, 0x58, 0xd9}, 0, 0, nil},
		{"vmovdqu with VEX.vvvv not 1111 (#UD)", []byte{0xc5, 0xf6, 0x7f, 0x07}, 0, 0, nil},
		{"vmovdqu in map 0F38 (no such store)", []byte{0xc4, 0xe2, 0x7e, 0x7f, 0x07}, 0, 0, nil},
		{"vmovlps with VEX.L 1 (#UD)", []byte{0xc5, 0xfc, 0x13, 0x0a}, 0, 0, nil},
		{"truncated", []byte{0xc5, 0xfe, 0x7f}, 0, 0, nil},
		{"truncated disp32", []byte{0xc5, 0xfe, 0x7f, 0x87, 0x00}, 0, 0, nil},
		{"vmovdqu64 %zmm0,(%rdi) (EVEX)", []byte{0x62, 0xf1, 0xfe, 0x48, 0x7f, 0x07}, 0, 0, nil},
	}
	for _, c := range cases {
		r := regs()
		in, stores, err := Emulate(c.code, Machine{Regs: r, XMM: xmm, YMMHigh: hi, Read: func(uint64, []byte) error { return nil }})
		if c.data == nil {
			if !errors.Is(err, ErrNotEmulated) {
				t.Errorf("%s: err %v, stores %x, want not emulated", c.asm, err, stores)
			}
			if r.Rip != 0x400000 {
				t.Errorf("%s: RIP moved to %#x", c.asm, r.Rip)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.asm, err)
			continue
		}
		if in.Len != c.len || r.Rip != 0x400000+uint64(c.len) {
			t.Errorf("%s: length %d, RIP %#x; want %d", c.asm, in.Len, r.Rip, c.len)
		}
		if len(stores) != 1 || stores[0].Addr != c.addr || !bytes.Equal(stores[0].Data, c.data) {
			t.Errorf("%s: stores %x, want %#x: %x", c.asm, stores, c.addr, c.data)
		}
	}
}
