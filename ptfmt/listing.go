package ptfmt

import (
	"bytes"
	"fmt"
	"io"
	"strconv"

	"github.com/ptjit/ptjit/x86"
	"github.com/ptjit/ptjit/x86/att"
)

// Code listings: the text of ptjit show and ptjit diff, from a code
// version's bytes.

// HexDump writes b, which starts at addr, 16 bytes a line.
func HexDump(w io.Writer, addr uint64, b []byte) {
	for off := 0; off < len(b); off += 16 {
		end := min(off+16, len(b))
		fmt.Fprintf(w, "%#014x: % x\n", addr+uint64(off), b[off:end])
	}
}

// InsnText disassembles one instruction (AT&T syntax); a multi-byte nop is
// shown as nopN, so that a patched site reads "nop5 → jmp ...".
func InsnText(in *x86.Insn) string {
	if n, ok := nopLen(in.Bytes()); ok && n > 1 {
		return "nop" + strconv.Itoa(n)
	}
	return att.Text(in)
}

// nopLen recognises the recommended multi-byte nops (0f 1f /0 with optional
// 66 prefixes) and the one-byte 90.
func nopLen(b []byte) (int, bool) {
	i := 0
	for i < len(b) && b[i] == 0x66 {
		i++
	}
	if i+1 < len(b) && b[i] == 0x0f && b[i+1] == 0x1f {
		return len(b), true
	}
	if len(b) == 1 && b[0] == 0x90 {
		return 1, true
	}
	return 0, false
}

// InsnLine is one instruction of a linear sweep.
type InsnLine struct {
	Addr uint64
	Raw  []byte // the instruction's bytes
	Text string // InsnText, or "(bad)"
}

// Sweep disassembles code at addr linearly, at most n instructions (n <= 0:
// all). An undecodable byte becomes a one-byte "(bad)" line.
func Sweep(addr uint64, code []byte, n int) []InsnLine {
	var out []InsnLine
	var in x86.Insn
	for off := 0; off < len(code) && (n <= 0 || len(out) < n); {
		ip := addr + uint64(off)
		if err := x86.DecodeInsn(code[off:], ip, x86.Mode64, &in); err != nil {
			out = append(out, InsnLine{ip, code[off : off+1], "(bad)"})
			off++
			continue
		}
		out = append(out, InsnLine{ip, code[off : off+int(in.Len)], InsnText(&in)})
		off += int(in.Len)
	}
	return out
}

// Disasm writes the first n instructions of code at addr (n <= 0: all),
// one line each: address, bytes, text.
func Disasm(w io.Writer, addr uint64, code []byte, n int) { DisasmNamed(w, addr, code, n, nil) }

// DisasmNamed is Disasm with a "<NAME>:" line before each instruction
// that starts a name (name returns the name over an address and the
// address's offset in it; nil: none).
func DisasmNamed(w io.Writer, addr uint64, code []byte, n int, name func(uint64) (string, uint64, bool)) {
	for i, l := range Sweep(addr, code, n) {
		if name != nil {
			if s, off, ok := name(l.Addr); ok && (off == 0 || i == 0) {
				if off != 0 {
					s = fmt.Sprintf("%s+%#x", s, off)
				}
				fmt.Fprintf(w, "<%s>:\n", s)
			}
		}
		fmt.Fprintf(w, "%#014x: %-30s %s\n", l.Addr, fmt.Sprintf("% x", l.Raw), l.Text)
	}
}

// DiffCode writes the instruction-level changes from code a, which
// starts at aAddr, to code b, which starts at bAddr, from addr to the end
// of the range both hold: a single replaced instruction as
// "  ADDR: OLD → NEW", longer changes as -/+ lines, "  no change" when the
// bytes are equal. Bytes that changed before addr are counted in a note.
func DiffCode(w io.Writer, addr, aAddr uint64, a []byte, bAddr uint64, b []byte) {
	lo, hi := max(aAddr, bAddr), min(aAddr+uint64(len(a)), bAddr+uint64(len(b)))
	if addr < lo || addr >= hi {
		fmt.Fprintf(w, "  %#x is not in both versions\n", addr)
		return
	}
	before := 0
	for i := lo; i < addr; i++ {
		if a[i-aAddr] != b[i-bAddr] {
			before++
		}
	}
	if before > 0 {
		fmt.Fprintf(w, "  (%d bytes also changed before %#x; give a lower ADDR to see them)\n", before, addr)
	}
	a, b = a[addr-aAddr:hi-aAddr], b[addr-bAddr:hi-bAddr]
	if bytes.Equal(a, b) {
		fmt.Fprintln(w, "  no change")
		return
	}
	for _, h := range DiffInsns(Sweep(addr, a, 0), Sweep(addr, b, 0)) {
		if len(h.Old) == 1 && len(h.New) == 1 && h.Old[0].Addr == h.New[0].Addr {
			fmt.Fprintf(w, "  %#x: %s → %s\n", h.Old[0].Addr, h.Old[0].Text, h.New[0].Text)
			continue
		}
		for _, l := range h.Old {
			fmt.Fprintf(w, "- %#x: %-30s %s\n", l.Addr, fmt.Sprintf("% x", l.Raw), l.Text)
		}
		for _, l := range h.New {
			fmt.Fprintf(w, "+ %#x: %-30s %s\n", l.Addr, fmt.Sprintf("% x", l.Raw), l.Text)
		}
	}
}

// Hunk is a run of instructions that differ between two sweeps.
type Hunk struct{ Old, New []InsnLine }

// DiffInsns walks two linear sweeps of the same address range and groups
// the instructions that differ into hunks; the sweeps resynchronise where
// both reach an instruction at the same address with the same bytes.
func DiffInsns(a, b []InsnLine) []Hunk {
	same := func(x, y InsnLine) bool { return x.Addr == y.Addr && bytes.Equal(x.Raw, y.Raw) }
	var hs []Hunk
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		if same(a[i], b[j]) {
			i++
			j++
			continue
		}
		var h Hunk
		for i < len(a) && j < len(b) && !same(a[i], b[j]) {
			if a[i].Addr <= b[j].Addr {
				h.Old = append(h.Old, a[i])
				i++
			} else {
				h.New = append(h.New, b[j])
				j++
			}
		}
		hs = append(hs, h)
	}
	if i < len(a) || j < len(b) {
		hs = append(hs, Hunk{a[i:], b[j:]})
	}
	return hs
}
