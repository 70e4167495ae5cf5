package tracker

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ptjit/ptjit/x86"
)

// TestLostTrapPath: a step over CPUID whose trap the hypervisor lost ends
// one (or, after CPUID; CPUID, two) instructions later; lostTrapPath must
// name exactly the instructions that ran, and refuse every stop it cannot
// explain.
func TestLostTrapPath(t *testing.T) {
	const base = 0x1000
	cpuid := []byte{0x0f, 0xa2}
	cat := func(parts ...[]byte) []byte {
		var b []byte
		for _, p := range parts {
			b = append(b, p...)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		code []byte   // at base; the step began with its first instruction
		rip  uint64   // where the step's trap came
		want []uint64 // the IPs that retired after the first; nil: not explained
	}{
		{"jcc taken", cat(cpuid, []byte{0x74, 0x05}), base + 9, []uint64{base + 2}},
		{"jcc not taken", cat(cpuid, []byte{0x74, 0x05}), base + 4, []uint64{base + 2}},
		{"jcc elsewhere", cat(cpuid, []byte{0x74, 0x05}), base + 5, nil},
		{"mov", cat(cpuid, []byte{0xb8, 1, 0, 0, 0}), base + 7, []uint64{base + 2}},
		{"jmp", cat(cpuid, []byte{0xeb, 0x10}), base + 0x14, []uint64{base + 2}},
		{"jmp elsewhere", cat(cpuid, []byte{0xeb, 0x10}), base + 4, nil},
		{"call", cat(cpuid, []byte{0xe8, 0x00, 0x01, 0, 0}), base + 0x107, []uint64{base + 2}},
		{"ret", cat(cpuid, []byte{0xc3}), 0x7fff0000, []uint64{base + 2}},
		{"ind jmp", cat(cpuid, []byte{0x41, 0xff, 0xe0}), 0x5000, []uint64{base + 2}},
		{"syscall", cat(cpuid, []byte{0x0f, 0x05}), base + 4, []uint64{base + 2}},
		{"cpuid cpuid jne", cat(cpuid, cpuid, []byte{0x75, 0x10}), base + 0x16, []uint64{base + 2, base + 4}},
		{"cpuid cpuid nop", cat(cpuid, cpuid, []byte{0x90}), base + 5, []uint64{base + 2, base + 4}},
		{"too many", cat(cpuid, cpuid, cpuid, cpuid, cpuid, cpuid, []byte{0x90}), base + 13, nil},
		{"first is a branch", []byte{0x74, 0x05, 0x90}, base + 3, nil},
		{"unreadable", cpuid, base + 4, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fetch := func(ip uint64, in *x86.Insn) error {
				if ip < base || ip >= base+uint64(len(tc.code)) {
					return errors.New("unmapped")
				}
				return x86.DecodeInsn(tc.code[ip-base:], ip, x86.Mode64, in)
			}
			var in x86.Insn
			if err := fetch(base, &in); err != nil {
				t.Fatal(err)
			}
			if follows(&in, tc.rip) {
				t.Fatalf("follows(%s at %#x, %#x): a step that needs no explaining", in.Class, in.IP, tc.rip)
			}
			path, ok := lostTrapPath(&in, tc.rip, fetch, nil)
			var got []uint64
			for _, x := range path {
				got = append(got, x.IP)
			}
			switch {
			case tc.want == nil && ok:
				t.Errorf("explained as %#x, want not explained", got)
			case tc.want != nil && !ok:
				t.Errorf("not explained, want %#x", tc.want)
			case ok && fmt.Sprint(got) != fmt.Sprint(tc.want):
				t.Errorf("path %#x, want %#x", got, tc.want)
			}
		})
	}
}

// TestFollows: where execution can go on right after each class.
func TestFollows(t *testing.T) {
	for _, tc := range []struct {
		code []byte
		next uint64
		want bool
	}{
		{[]byte{0x0f, 0xa2}, 0x1002, true},       // cpuid: fall-through only
		{[]byte{0x0f, 0xa2}, 0x1004, false},      //
		{[]byte{0xf3, 0xa4}, 0x1002, true},       // rep movsb (an iteration traps at 0x1000: the caller's case)
		{[]byte{0x74, 0x05}, 0x1002, true},       // je: fall-through
		{[]byte{0x74, 0x05}, 0x1007, true},       // je: target
		{[]byte{0x74, 0x05}, 0x1003, false},      //
		{[]byte{0xeb, 0x05}, 0x1007, true},       // jmp: target only
		{[]byte{0xeb, 0x05}, 0x1002, false},      //
		{[]byte{0xe8, 0, 0, 0, 0}, 0x1005, true}, // call: target (here the next byte)
		{[]byte{0xe8, 1, 0, 0, 0}, 0x1005, false},
		{[]byte{0xc3}, 0x4242, true},       // ret: anywhere
		{[]byte{0xff, 0xe0}, 0x4242, true}, // jmp *%rax
		{[]byte{0x0f, 0x05}, 0x4242, true}, // syscall (rt_sigreturn)
	} {
		var in x86.Insn
		if err := x86.DecodeInsn(tc.code, 0x1000, x86.Mode64, &in); err != nil {
			t.Fatal(err)
		}
		if got := follows(&in, tc.next); got != tc.want {
			t.Errorf("follows(% x, %#x) = %v, want %v", tc.code, tc.next, got, tc.want)
		}
	}
}
