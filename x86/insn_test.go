package x86_test

import (
	"bytes"
	"errors"
	"math/rand"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/x86"
	"github.com/ptjit/ptjit/x86/internal/x86test"
)

func TestDecodeInsnTable(t *testing.T) {
	for _, tc := range x86test.Cases {
		code := x86test.MustHex(t, tc.Hex)
		// Decode from a 15-byte window padded with junk after the
		// instruction, and from exactly the instruction's bytes.
		padded := append(append([]byte{}, code...), bytes.Repeat([]byte{0xcc}, 20)...)
		for _, buf := range [][]byte{padded, code[:min(len(code), tc.Len)]} {
			var in x86.Insn
			err := x86.DecodeInsn(buf, tc.IP, tc.Mode, &in)
			if err != nil {
				t.Errorf("%s %s (% x): %v", tc.Mode, tc.What, code, err)
				continue
			}
			if int(in.Len) != tc.Len || in.Class != tc.Class || in.Target != tc.Target || in.IP != tc.IP || in.Mode != tc.Mode {
				t.Errorf("%s %s (% x): len %d class %v target %#x; want len %d class %v target %#x",
					tc.Mode, tc.What, code, in.Len, in.Class, in.Target, tc.Len, tc.Class, tc.Target)
			}
			if !bytes.Equal(in.Bytes(), code[:tc.Len]) || !bytes.Equal(in.Raw[in.Len:], make([]byte, x86.MaxInsnLen-int(in.Len))) {
				t.Errorf("%s %s: Raw = % x", tc.Mode, tc.What, in.Raw)
			}
			if n, err := x86.InsnLen(buf, tc.Mode); err != nil || n != tc.Len {
				t.Errorf("%s %s: InsnLen = %d, %v", tc.Mode, tc.What, n, err)
			}
		}
		// Every shorter prefix of the instruction is truncated.
		for k := 0; k < tc.Len; k++ {
			var in x86.Insn
			err := x86.DecodeInsn(code[:k], tc.IP, tc.Mode, &in)
			if !errors.Is(err, x86.ErrInsnTruncated) || !errors.Is(err, x86.ErrBadInsn) {
				t.Errorf("%s %s: %d of %d bytes: got %v, want ErrInsnTruncated", tc.Mode, tc.What, k, tc.Len, err)
			}
		}
	}
}

// objdumpMachine gives objdump's -m/-M for a mode.
func TestDecodeInsnErrors(t *testing.T) {
	tests := []struct {
		mode  x86.ExecMode
		hex   string
		trunc bool
		why   string
	}{
		{x86.Mode64, "06", false, "opcode 0x06 (byte 0) invalid in 64-bit mode"},
		{x86.Mode64, "66 9a 00 00 00 00", false, "opcode 0x9a (byte 1) invalid in 64-bit mode"},
		{x86.Mode64, "d6", false, "invalid in 64-bit mode"},
		{x86.Mode64, "0f 04", false, "undefined opcode 0f 04 (byte 1)"},
		{x86.Mode64, "0f 3b 00 00", false, "undefined opcode 0f 3b"},
		{x86.Mode64, "c4 e0 78 77", false, "undefined VEX/EVEX opcode map in byte 1"},
		{x86.Mode64, "62 f4 7c 48 10 c0", false, "undefined VEX/EVEX opcode map"},
		{x86.Mode64, "8f eb 78 10 c0", false, "undefined XOP opcode map"},
		{x86.Mode64, "66 66 66 66 66 66 66 66 66 66 66 66 66 66 66 90", false, "longer than 15 bytes"},
		{x86.Mode64, "66 66 66 66 66 66 66 66 66 66 66 66 66 66 90", false, ""}, // 15 bytes: fine
		{x86.Mode64, "66 66 66 66 66 66 66 66 66 66 66 48 b8 00 00 00 00 00 00 00 00", false, "longer than 15 bytes"},
		{x86.Mode64, "e8 00 00", true, "only 3 bytes available"},
		{x86.Mode64, "d5 00 74 00", false, "not allowed after a REX2 prefix"},
		{x86.Mode64, "d5 80 84 00 00 00 00", false, "not allowed after a REX2 prefix"},
		{x86.Mode64, "d5 08 a1 00 00 00 00 00 00 00 00", false, "not allowed after a REX2 prefix"},
		{x86.Mode64, "", true, "only 0 bytes available"},
		{x86.ModeUnknown, "90", false, "cannot decode in execution mode unknown"},
		{x86.ExecMode(7), "90", false, "cannot decode in execution mode"},
	}
	for _, tc := range tests {
		code := x86test.MustHex(t, tc.hex)
		var in x86.Insn
		err := x86.DecodeInsn(code, 0x401000, tc.mode, &in)
		if tc.why == "" {
			if err != nil {
				t.Errorf("% x: %v", code, err)
			}
			continue
		}
		var ie *x86.InsnError
		if !errors.As(err, &ie) || !errors.Is(err, x86.ErrBadInsn) {
			t.Errorf("% x: got %v, want an *InsnError matching ErrBadInsn", code, err)
			continue
		}
		if errors.Is(err, x86.ErrInsnTruncated) != tc.trunc {
			t.Errorf("% x: truncated = %v, want %v (%v)", code, !tc.trunc, tc.trunc, err)
		}
		if ie.IP != 0x401000 || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "0x401000") {
			t.Errorf("% x: error %q, want IP 0x401000 and %q", code, err, tc.why)
		}
	}
}

// TestFastPathMatchesSlow checks ild's fast path against the complete
// decoder on random bytes and on mutated real instructions, in all modes.
func TestFastPathMatchesSlow(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var seeds [][]byte
	for _, tc := range x86test.Cases {
		seeds = append(seeds, x86test.MustHex(t, tc.Hex))
	}
	buf := make([]byte, 24)
	for iter := 0; iter < 300000; iter++ {
		n := rng.Intn(len(buf) + 1)
		if iter%2 == 0 {
			rng.Read(buf)
		} else {
			// A real instruction with a byte or two flipped, padded.
			s := seeds[rng.Intn(len(seeds))]
			copy(buf, s)
			rng.Read(buf[len(s):])
			for k := rng.Intn(3); k > 0; k-- {
				buf[rng.Intn(len(s))] ^= byte(1 << rng.Intn(8))
			}
		}
		for _, mode := range []x86.ExecMode{x86.Mode16, x86.Mode32, x86.Mode64} {
			code := buf[:n]
			var a, b x86.Insn
			a.IP, b.IP = 0x7000, 0x7000
			ra := x86.ILD(code, mode, &a)
			rb := x86.ILDSlow(code[:min(len(code), x86.MaxInsnLen)], len(code), mode, &b)
			if ra != rb || (ra > 0 && a != b) {
				t.Fatalf("%s % x: fast %d %+v, slow %d %+v", mode, code, ra, a, rb, b)
			}
		}
	}
}

func TestInsnClassString(t *testing.T) {
	for c := x86.InsnClass(0); c < x86.NumInsnClasses; c++ {
		if c.String() == "" || strings.HasPrefix(c.String(), "InsnClass(") {
			t.Errorf("class %d has no name", c)
		}
	}
	if got := x86.InsnClass(200).String(); got != "InsnClass(200)" {
		t.Errorf("InsnClass(200).String() = %q", got)
	}
	// Far, direct and indirect sets do not overlap, and branches are the
	// union plus nothing else.
	for c := x86.InsnClass(0); c < x86.NumInsnClasses; c++ {
		n := 0
		for _, p := range []bool{c.IsFar(), c.IsDirect(), c.IsIndirectNear()} {
			if p {
				n++
			}
		}
		if n > 1 || (n == 1) != c.IsBranch() {
			t.Errorf("%v: far %v direct %v indirect %v branch %v", c, c.IsFar(), c.IsDirect(), c.IsIndirectNear(), c.IsBranch())
		}
	}
}
