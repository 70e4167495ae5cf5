package decode

import (
	"fmt"
	"strings"

	"golang.org/x/arch/x86/x86asm"
)

// Disasm returns the instruction as text in GNU/AT&T syntax, close to what
// objdump -d prints (branch targets as absolute hex addresses, no symbols).
//
// x86asm does the formatting. For the instructions it gets wrong (a length
// different from ours, an error, or a known mis-decode) Disasm uses its own
// text from the fix table in insn_fix.go, and as a last resort prints the
// bytes as ".byte 0x.., ...".
func (in *Insn) Disasm() string {
	if in.Len == 0 || in.Len > MaxInsnLen {
		return "(bad)"
	}
	raw := in.Raw[:in.Len]
	if s, ok := fixedDisasm(raw, in.Mode); ok {
		return s
	}
	inst, err := x86asm.Decode(raw, in.Mode.Bits())
	if err == nil && inst.Len == int(in.Len) {
		return x86asm.GNUSyntax(inst, in.IP, nil)
	}
	return byteDirective(raw)
}

func byteDirective(raw []byte) string {
	var sb strings.Builder
	sb.WriteString(".byte ")
	for i, b := range raw {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, "%#02x", b)
	}
	return sb.String()
}
