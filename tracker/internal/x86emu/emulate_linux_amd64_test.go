package x86emu

import (
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// TestEmulate: encodings as gcc/objdump produce them, with their effect
// worked out by hand from the SDM.
func TestEmulate(t *testing.T) {
	base := func() *unix.PtraceRegs {
		return &unix.PtraceRegs{Rip: 0x1000, Rax: 0x1122334455667788, Rcx: 3, Rdx: 0x7000, Rdi: 0x8000,
			Rsi: 0x9000, Fs_base: 0x50000}
	}
	mem := func(addr uint64, b []byte) error {
		for i := range b {
			b[i] = byte(addr + uint64(i))
		}
		return nil
	}
	xmm := func(n int) ([]byte, error) {
		x := make([]byte, 16)
		for i := range x {
			x[i] = byte(0xa0 + n + i)
		}
		return x, nil
	}
	cases := []struct {
		asm    string
		code   []byte
		setup  func(r *unix.PtraceRegs)
		stores string // "addr:hex ..." or "not emulated"
		check  func(r *unix.PtraceRegs) string
	}{
		{"mov %rax,(%rdx)", []byte{0x48, 0x89, 0x02}, nil, "0x7000:8877665544332211", nil},
		{"movb $0x2a,(%rax)", []byte{0xc6, 0x00, 0x2a}, func(r *unix.PtraceRegs) { r.Rax = 0x7100 }, "0x7100:2a", nil},
		{"mov %cx,0x4(%rax)", []byte{0x66, 0x89, 0x48, 0x04}, func(r *unix.PtraceRegs) { r.Rax = 0x7200; r.Rcx = 0xbeef }, "0x7204:efbe", nil},
		{"mov %eax,0x10(%rip)", []byte{0x89, 0x05, 0x10, 0, 0, 0}, nil, "0x1016:88776655", nil},
		{"mov %ah,0x1(%rdi)", []byte{0x88, 0x67, 0x01}, nil, "0x8001:77", nil},
		{"mov %sil,(%rdi)", []byte{0x40, 0x88, 0x37}, nil, "0x8000:00", nil},
		{"mov %r9b,(%rdi)", []byte{0x44, 0x88, 0x0f}, func(r *unix.PtraceRegs) { r.R9 = 0x1234 }, "0x8000:34", nil},
		{"mov %bpl,(%rdi)", []byte{0x40, 0x88, 0x2f}, func(r *unix.PtraceRegs) { r.Rbp = 0x99 }, "0x8000:99", nil},
		{"mov %r15w,(%rdi)", []byte{0x66, 0x44, 0x89, 0x3f}, func(r *unix.PtraceRegs) { r.R15 = 0xabcdef }, "0x8000:efcd", nil},
		{"movw $0xfffe,(%rdi)", []byte{0x66, 0xc7, 0x07, 0xfe, 0xff}, nil, "0x8000:feff", nil},
		{"movq $-2,(%rdi)", []byte{0x48, 0xc7, 0x07, 0xfe, 0xff, 0xff, 0xff}, nil, "0x8000:feffffffffffffff", nil},
		{"mov %rdi,-0x628(%rbp)", []byte{0x48, 0x89, 0xbd, 0xd8, 0xf9, 0xff, 0xff}, func(r *unix.PtraceRegs) { r.Rbp = 0x9000 }, "0x89d8:0080000000000000", nil},
		{"mov %eax,-0x10(%rip)", []byte{0x89, 0x05, 0xf0, 0xff, 0xff, 0xff}, nil, "0xff6:88776655", nil},
		{"movl $0x1,-0x200(%rdx,%rcx,8)", []byte{0xc7, 0x84, 0xca, 0x00, 0xfe, 0xff, 0xff, 0x01, 0, 0, 0}, nil, "0x6e18:01000000", nil},
		{"movabs %eax,0x80007000 (moffs: a whole address)", []byte{0xa3, 0x00, 0x70, 0x00, 0x80, 0, 0, 0, 0}, nil, "0x80007000:88776655", nil},
		{"mov %rax,%fs:0x28", []byte{0x64, 0x48, 0x89, 0x04, 0x25, 0x28, 0, 0, 0}, nil, "0x50028:8877665544332211", nil},
		{"movl $0x90909090,(%rdx,%rcx,4)", []byte{0xc7, 0x04, 0x8a, 0x90, 0x90, 0x90, 0x90}, nil, "0x700c:90909090", nil},
		{"rep stos %rax,(%rdi)", []byte{0xf3, 0x48, 0xab}, nil,
			"0x8000:887766554433221188776655443322118877665544332211",
			func(r *unix.PtraceRegs) string {
				if r.Rcx != 0 || r.Rdi != 0x8018 {
					return fmt.Sprintf("rcx %#x rdi %#x, want 0 0x8018", r.Rcx, r.Rdi)
				}
				return ""
			}},
		{"rep movsb", []byte{0xf3, 0xa4}, nil, "0x8000:000102",
			func(r *unix.PtraceRegs) string {
				if r.Rcx != 0 || r.Rdi != 0x8003 || r.Rsi != 0x9003 {
					return fmt.Sprintf("rcx %#x rdi %#x rsi %#x", r.Rcx, r.Rdi, r.Rsi)
				}
				return ""
			}},
		{"std; movsb", []byte{0xa4}, func(r *unix.PtraceRegs) { r.Eflags |= 1 << 10 }, "0x8000:00",
			func(r *unix.PtraceRegs) string {
				if r.Rdi != 0x7fff || r.Rsi != 0x8fff {
					return fmt.Sprintf("rdi %#x rsi %#x", r.Rdi, r.Rsi)
				}
				return ""
			}},
		{"std; rep movsw (three elements, downwards)", []byte{0xf3, 0x66, 0xa5}, func(r *unix.PtraceRegs) { r.Eflags |= 1 << 10 },
			"0x7ffc:fcfdfeff0001",
			func(r *unix.PtraceRegs) string {
				if r.Rcx != 0 || r.Rdi != 0x7ffa || r.Rsi != 0x8ffa {
					return fmt.Sprintf("rcx %#x rdi %#x rsi %#x, want 0 0x7ffa 0x8ffa", r.Rcx, r.Rdi, r.Rsi)
				}
				return ""
			}},
		{"std; rep stos %eax,(%rdi)", []byte{0xf3, 0xab}, func(r *unix.PtraceRegs) { r.Eflags |= 1 << 10 },
			"0x7ff8:887766558877665588776655",
			func(r *unix.PtraceRegs) string {
				if r.Rcx != 0 || r.Rdi != 0x7ff4 || r.Rsi != 0x9000 {
					return fmt.Sprintf("rcx %#x rdi %#x rsi %#x, want 0 0x7ff4 0x9000", r.Rcx, r.Rdi, r.Rsi)
				}
				return ""
			}},
		{"rep movsb %fs:(%rsi),(%rdi) (source override)", []byte{0x64, 0xf3, 0xa4}, nil, "not emulated", nil},
		{"rep movsb over its own source", []byte{0xf3, 0xa4}, func(r *unix.PtraceRegs) { r.Rsi = 0x8001 }, "not emulated", nil},
		{"movups %xmm1,(%rdi)", []byte{0x0f, 0x11, 0x0f}, nil, "0x8000:a1a2a3a4a5a6a7a8a9aaabacadaeafb0", nil},
		{"movq %xmm2,(%rdi)", []byte{0x66, 0x0f, 0xd6, 0x17}, nil, "0x8000:a2a3a4a5a6a7a8a9", nil},
		{"lock cmpxchg %rcx,(%rdx)", []byte{0xf0, 0x48, 0x0f, 0xb1, 0x0a}, nil, "not emulated", nil},
		{"add %rax,(%rdx)", []byte{0x48, 0x01, 0x02}, nil, "not emulated", nil},
		{"xchg %rax,(%rdx)", []byte{0x48, 0x87, 0x02}, nil, "not emulated", nil},
		{"mov (%rdx),%rax (a load)", []byte{0x48, 0x8b, 0x02}, nil, "not emulated", nil},
	}
	for _, c := range cases {
		r := base()
		if c.setup != nil {
			c.setup(r)
		}
		before := *r
		in, stores, err := Emulate(append(c.code, make([]byte, 15)...), Machine{Regs: r, XMM: xmm, Read: mem})
		if c.stores == "not emulated" {
			if !errors.Is(err, ErrNotEmulated) || *r != before {
				t.Errorf("%s: err %v, regs changed %v; want ErrNotEmulated", c.asm, err, *r != before)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.asm, err)
			continue
		}
		var got []string
		for _, s := range stores {
			got = append(got, fmt.Sprintf("%#x:%x", s.Addr, s.Data))
		}
		if fmt.Sprint(got) != fmt.Sprint([]string{c.stores}) {
			t.Errorf("%s (decoded %v): stores %v, want %s", c.asm, in, got, c.stores)
		}
		if r.Rip != before.Rip+uint64(len(c.code)) {
			t.Errorf("%s: rip %#x, want %#x", c.asm, r.Rip, before.Rip+uint64(len(c.code)))
		}
		if c.check != nil {
			if msg := c.check(r); msg != "" {
				t.Errorf("%s: %s", c.asm, msg)
			}
		}
	}
}
