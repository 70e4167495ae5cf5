package x86

import "testing"

func TestIsPushf(t *testing.T) {
	cases := []struct {
		code []byte
		mode ExecMode
		want bool
	}{
		{[]byte{0x9c}, Mode64, true},              // pushfq
		{[]byte{0x66, 0x9c}, Mode64, true},        // pushfw
		{[]byte{0x48, 0x9c}, Mode64, true},        // rex.w pushfq
		{[]byte{0x9c}, Mode32, true},              // pushfd
		{[]byte{0x9d}, Mode64, false},             // popfq
		{[]byte{0x50}, Mode64, false},             // push %rax
		{[]byte{0x0f, 0x9c, 0xc0}, Mode64, false}, // setl %al
		{[]byte{0x48, 0x89, 0xf8}, Mode64, false}, // mov %rdi,%rax
	}
	for _, c := range cases {
		var in Insn
		if err := DecodeInsn(c.code, 0x1000, c.mode, &in); err != nil {
			t.Fatalf("% x: %v", c.code, err)
		}
		if got := in.IsPushf(); got != c.want {
			t.Errorf("% x (%v): IsPushf %v, want %v", c.code, c.mode, got, c.want)
		}
		if pop, _ := in.IsPopf(); pop && c.code[len(c.code)-1] != 0x9d {
			t.Errorf("% x (%v): IsPopf", c.code, c.mode)
		}
	}
}

func TestIsPopf(t *testing.T) {
	cases := []struct {
		code []byte
		mode ExecMode
		size int // 0: not popf
	}{
		{[]byte{0x9d}, Mode64, 8},
		{[]byte{0x66, 0x9d}, Mode64, 2},
		{[]byte{0x9d}, Mode32, 4},
		{[]byte{0x66, 0x9d}, Mode32, 2},
		{[]byte{0x9c}, Mode64, 0},
		{[]byte{0xc3}, Mode64, 0},
	}
	for _, c := range cases {
		var in Insn
		if err := DecodeInsn(c.code, 0x1000, c.mode, &in); err != nil {
			t.Fatalf("% x: %v", c.code, err)
		}
		pop, size := in.IsPopf()
		if pop != (c.size != 0) || size != c.size {
			t.Errorf("% x (%v): IsPopf %v %d, want size %d", c.code, c.mode, pop, size, c.size)
		}
	}
}
