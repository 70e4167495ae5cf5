package ptfmt

import (
	"bytes"
	"strings"
	"testing"
)

// The expected texts are written by hand from the instruction bytes (nop5
// is 0f 1f 44 00 00; e9 rel32 jumps to the next instruction + rel32).
func TestDiffCode(t *testing.T) {
	pad := func(s string) string { return s + strings.Repeat(" ", 30-len(s)) }
	cases := []struct {
		name         string
		addr         uint64
		aAddr, bAddr uint64
		a, b         []byte
		want         string
	}{
		{"static key", 0x1000, 0x1000, 0x1000,
			[]byte{0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3},
			[]byte{0xe9, 0x10, 0x00, 0x00, 0x00, 0xc3},
			"  0x1000: nop5 → jmp 0x1015\n"},
		{"no change after addr", 0x1002, 0x1000, 0x1000,
			[]byte{0x90, 0x90, 0xc3},
			[]byte{0x90, 0xcc, 0xc3},
			"  (1 bytes also changed before 0x1002; give a lower ADDR to see them)\n  no change\n"},
		{"outside the common range", 0x1003, 0x1000, 0x1002,
			[]byte{0x90, 0x90, 0x90, 0x90},
			[]byte{0x90},
			"  0x1003 is not in both versions\n"},
		{"hunks", 0x1000, 0x1000, 0x1000,
			[]byte{0x90, 0x90, 0x90, 0xc3},
			[]byte{0x0f, 0x1f, 0x00, 0xc3},
			// One hunk up to the ret, where both sweeps meet again: the
			// old lines, then the new.
			"- 0x1000: " + pad("90") + " nop\n" +
				"- 0x1001: " + pad("90") + " nop\n" +
				"- 0x1002: " + pad("90") + " nop\n" +
				"+ 0x1000: " + pad("0f 1f 00") + " nop3\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			DiffCode(&buf, c.addr, c.aAddr, c.a, c.bAddr, c.b)
			if buf.String() != c.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), c.want)
			}
		})
	}
}

func TestDisasmAndHexDump(t *testing.T) {
	code := []byte{0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x06, 0xc3}
	var buf bytes.Buffer
	Disasm(&buf, 0x400000, code, 0) // %#014x: 14 digits after the 0x
	want := "0x00000000400000: 66 0f 1f 44 00 00              nop6\n" +
		"0x00000000400006: 06                             (bad)\n" + // push %es: invalid in 64-bit mode
		"0x00000000400007: c3                             ret\n"
	if buf.String() != want {
		t.Errorf("Disasm:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	Disasm(&buf, 0x400000, code, 1)
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Errorf("Disasm with n=1 wrote %d lines", n)
	}
	buf.Reset()
	HexDump(&buf, 0x10, append(make([]byte, 16), 0xab))
	want = "0x00000000000010: 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00\n0x00000000000020: ab\n"
	if buf.String() != want {
		t.Errorf("HexDump:\n%s\nwant:\n%s", buf.String(), want)
	}
}
