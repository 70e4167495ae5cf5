package att

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/x86"
	"golang.org/x/arch/x86/x86asm"
)

// Disasm returns the instruction as text in GNU/AT&T syntax as objdump -d
// -M intel64 (binutils 2.40) prints it without symbols: branch targets as
// hex addresses ("jmp 0x401000"), no size suffix on call/jmp/ret/push/pop
// in 64-bit mode. The sweeps check it against objdump on every instruction
// of libc and perl (TestSweepLibc, TestSweepPerl).
//
// x86asm formats the instruction; insn_fix.go corrects it where x86asm
// v0.32 is wrong (see there). An instruction nobody can format prints as
// ".byte 0x.., ...".
func Text(in *x86.Insn) string {
	if in.Len == 0 || in.Len > x86.MaxInsnLen {
		return "(bad)"
	}
	raw := in.Raw[:in.Len]
	l := x86.ParseLayout(raw, in.Mode)
	if s, ok := fixedText(raw, &l, in); ok {
		return s
	}
	if l.Escape == 0x62 && (l.OpMap == 5 || l.OpMap == 6) {
		// AVX512-FP16: x86asm ignores the map and prints a different
		// instruction, so only the known forms are formatted.
		if s, ok := fp16Text(raw, &l, in); ok {
			return s
		}
		return byteDirective(raw)
	}
	if s, ok := tryDecode(raw, in, "", ""); ok {
		return s
	}
	if s, ok := rewriteDecode(raw, &l, in); ok {
		return s
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

// gnuPrefixWords are the words GNUSyntax may print before a mnemonic.
var gnuPrefixWords = map[string]bool{
	"lock": true, "rep": true, "repn": true, "repz": true, "repnz": true, "repe": true, "repne": true,
	"data16": true, "data32": true, "addr16": true, "addr32": true, "bnd": true, "notrack": true,
	"cs": true, "ds": true, "es": true, "fs": true, "gs": true, "ss": true, "xacquire": true, "xrelease": true,
}

// gnuAliases maps x86asm's mnemonics to objdump's.
var gnuAliases = map[string]string{
	"cdqe": "cltq", "cdq": "cltd", "cqo": "cqto", "cwde": "cwtl", "cbw": "cbtw", "cwd": "cwtd",
	"movsxd": "movslq",
}

// polish corrects x86asm's GNU text for raw (see insn_fix.go).
func polish(text string, raw []byte, in *x86.Insn, inst x86asm.Inst) string {
	l := x86.ParseLayout(raw, in.Mode)
	if s, ok := nopText(raw, &l); ok {
		return s
	}
	words := strings.Split(text, " ")
	mi := 0
	for mi < len(words)-1 && (gnuPrefixWords[words[mi]] || strings.HasPrefix(words[mi], "rex")) {
		mi++
	}
	mn := words[mi]
	ops := strings.Join(words[mi+1:], " ")
	if a, ok := gnuAliases[mn]; ok && (mn != "movsxd" || l.REX&8 != 0) {
		mn = a
	}
	if in.Mode == x86.Mode64 && l.REX&8 == 0 {
		switch mn {
		case "lretq", "pushfq", "popfq", "enterq", "lcallq", "ljmpq":
			mn = strings.TrimSuffix(mn, "q") // 64-bit operands need REX.W (lret) or are implied
		}
	}
	if strings.HasSuffix(mn, "pclmulqdq") && strings.HasPrefix(ops, "$0x") {
		// objdump's aliases for the four selector values.
		sel := map[string]string{"$0x0": "lqlq", "$0x1": "hqlq", "$0x10": "lqhq", "$0x11": "hqhq"}
		imm, rest, _ := strings.Cut(ops, ",")
		if a, ok := sel[imm]; ok {
			mn, ops = strings.TrimSuffix(mn, "qdq")+a+"dq", rest
		}
	}
	if in.Mode == x86.Mode64 {
		switch mn {
		case "callq", "jmpq", "retq", "pushq", "popq", "leaveq", "xbeginq":
			mn = strings.TrimSuffix(mn, "q")
		}
	}
	if mn == "xbeginl" || mn == "xbeginw" {
		mn = "xbegin"
	}
	switch {
	case mn == "sysretq" && mi > 0 && words[mi-1] == "rex.W":
		words, mi = words[:mi-1], mi-1 // the W is the q
	case mn == "sysexit" && in.Mode == x86.Mode64:
		mn = "sysexitl"
	case mn == "iretw" && in.Mode == x86.Mode16 && !l.P66:
		mn = "iret"
	case mn == "lcall" && in.Mode == x86.Mode16 && l.P66:
		mn = "lcalll"
	}
	for k := 0; k < mi; k++ {
		switch {
		case words[k] == "rep" && !isStringOp(mn):
			words[k] = "repz" // objdump: rep only on string instructions
		case words[k] == "repn":
			words[k] = "repnz"
		case words[k] == "ds" && l.Escape == 0 && l.OpMap == 0 && l.Op == 0xFF && hasByte(l.Prefixes, 0x3E) &&
			(l.ModRM(raw)>>3&7 == 2 || l.ModRM(raw)>>3&7 == 4):
			words[k] = "notrack" // CET: 3E on an indirect call/jmp
		}
	}
	if l.Escape == 0 && l.OpMap == 0 && (l.Op >= 0xB8 && l.Op <= 0xBF && l.REX&8 != 0 || l.Op >= 0xA0 && l.Op <= 0xA3 && in.Mode == x86.Mode64 && !hasByte(l.Prefixes, 0x67)) {
		mn = "movabs"
	}
	if (l.Escape == 0xC4 || l.Escape == 0xC5) && bmiNames[strings.TrimRight(mn, "lq")] {
		mn = strings.TrimRight(mn, "lq") // BMI1/2: the registers give the size
	}
	if l.Escape == 0x62 && l.OpMap == 3 && (l.Op == 0x3E || l.Op == 0x3F || l.Op == 0x1E || l.Op == 0x1F) {
		mn, ops = vpcmpAlias(mn, ops)
	}
	if in.Class.IsDirect() {
		ops = "0x" + strconv.FormatUint(in.Target, 16)
		if in.Mode == x86.Mode64 && (l.P66 || l.REX != 0) {
			// Intel ignores 66 on near branches (objdump -M intel64), and
			// REX: objdump names each such prefix ("data16 data16 rex.W
			// call", the TLS call sequence).
			mn = strings.TrimSuffix(mn, "w")
			var keep []string
			for _, w := range words[:mi] {
				if w != "data16" && w != "data32" && !strings.HasPrefix(w, "rex") {
					keep = append(keep, w)
				}
			}
			for _, b := range l.Prefixes {
				if b == 0x66 {
					keep = append(keep, "data16")
				}
			}
			if l.REX != 0 {
				keep = append(keep, prefixWord(l.REX, in.Mode))
			}
			words, mi = keep, len(keep)
		}
		if in.Mode == x86.Mode16 {
			switch mn {
			case "call", "jmp":
				if l.P66 {
					mn += "l"
				}
			case "loopw", "loopew", "loopnew":
				mn = strings.TrimSuffix(mn, "w")
			}
		}
	} else if mn == "xbegin" {
		ops = "0x" + strconv.FormatUint(xbeginTarget(raw, in), 16)
	} else if ops != "" {
		ops = polishOperands(mn, ops, raw, &l, in, inst)
	}
	if l.Escape == 0 && l.OpMap == 0 && (l.Op == 0xDE || l.Op == 0xDF && l.ModRM(raw)>>3&7 < 4) &&
		l.ModRM(raw)>>6 != 3 && strings.HasPrefix(mn, "fi") && !strings.HasSuffix(mn, "s") {
		mn += "s" // 16-bit integer operand (objdump: fiadds, filds, fistps)
	}
	if l.Escape == 0 && l.OpMap == 0 && l.Op >= 0xD8 && l.Op <= 0xDF {
		// x87: objdump names the ModRM register st(i) even for i = 0.
		switch {
		case ops == "%st":
			ops = "%st(0)"
		case ops == "%st,%st" && (l.Op == 0xDC || l.Op == 0xDE):
			ops = "%st,%st(0)"
		case ops == "%st,%st":
			ops = "%st(0),%st"
		}
	}
	out := words[:mi:mi]
	if in.Mode == x86.Mode16 && hasByte(l.Prefixes, 0x67) && !strings.Contains(text, "addr") && !strings.Contains(ops, "(") && !in.Class.IsDirect() &&
		(l.ModRMPos >= 0 && l.ModRM(raw)>>6 != 3 || l.Escape == 0 && l.OpMap == 0 && l.Op >= 0xA0 && l.Op <= 0xA3) {
		out = append(out, prefixWord(0x67, in.Mode)) // objdump names the address size it cannot show
	}
	if pre, rest, ok := strings.Cut(ops, " \x00"); ok {
		out = append(out, pre)
		ops = rest
	}
	out = append(out, mn)
	if ops != "" {
		out = append(out, ops)
	}
	return strings.Join(out, " ")
}

// isStringOp reports the string instructions, which objdump prints with
// "rep" rather than "repz".
func isStringOp(mn string) bool {
	for _, p := range []string{"movs", "stos", "lods", "ins", "outs"} {
		if strings.HasPrefix(mn, p) {
			return true
		}
	}
	return false
}

// xbeginTarget is the abort address of xbegin (C7 F8 rel16/32), computed
// like a branch target.
func xbeginTarget(raw []byte, in *x86.Insn) uint64 {
	n := len(raw)
	var rel int64
	l := x86.ParseLayout(raw, in.Mode)
	size := n - (l.ModRMPos + 1)
	switch size {
	case 2:
		rel = int64(int16(uint16(raw[n-2]) | uint16(raw[n-1])<<8))
	case 4:
		rel = int64(int32(uint32(raw[n-4]) | uint32(raw[n-3])<<8 | uint32(raw[n-2])<<16 | uint32(raw[n-1])<<24))
	}
	t := in.IP + uint64(n) + uint64(rel)
	switch {
	case in.Mode == x86.Mode64:
	case size == 2:
		t &= 0xFFFF
	default:
		t &= 0xFFFFFFFF
	}
	return t
}

// bmiNames are the VEX-encoded general-register instructions objdump
// prints without a size suffix.
var bmiNames = map[string]bool{
	"andn": true, "bextr": true, "blsi": true, "blsmsk": true, "blsr": true, "bzhi": true, "mulx": true,
	"pdep": true, "pext": true, "rorx": true, "sarx": true, "shlx": true, "shrx": true,
}

// vpcmpAlias turns "vpcmp[u]{b,w,d,q} $imm," into objdump's predicate name
// ("vpcmpeqb", "vpcmpltub", ...).
func vpcmpAlias(mn, ops string) (string, string) {
	if !strings.HasPrefix(mn, "vpcmp") || !strings.HasPrefix(ops, "$0x") {
		return mn, ops
	}
	imm, rest, ok := strings.Cut(ops[1:], ",")
	v, err := strconv.ParseUint(imm, 0, 8)
	if !ok || err != nil || v > 7 {
		return mn, ops
	}
	suffix := mn[len("vpcmp"):] // "b", "ub", "d", "uq", ...
	if len(suffix) < 1 || len(suffix) > 2 {
		return mn, ops
	}
	preds := [8]string{"eq", "lt", "le", "false", "neq", "nlt", "nle", "true"}
	return "vpcmp" + preds[v] + suffix, rest
}

// nopText formats the multi-byte nops (0F 1F /0 with memory, 66 90) as
// objdump does: surplus prefixes as words, the explicit 0x0 displacement.
func nopText(raw []byte, l *x86.Layout) (string, bool) {
	if l.Escape != 0 || l.REXPos >= 0 {
		return "", false
	}
	var words []string
	n66 := 0
	for _, b := range l.Prefixes {
		switch b {
		case 0x66:
			n66++
		case 0x26, 0x2E, 0x36, 0x3E, 0x64, 0x65:
			words = append(words, prefixWord(b, l.Mode))
		default:
			return "", false
		}
	}
	for k := 1; k < n66; k++ {
		words = append([]string{"data16"}, words...)
	}
	switch {
	case l.OpMap == 0 && l.Op == 0x90 && n66 > 0 && len(words) == 0 && l.Mode != x86.Mode16:
		return strings.Join(append(words, "xchg %ax,%ax"), " "), true
	case l.OpMap == 1 && l.Op == 0x1F && l.ModRMPos >= 0 && l.Mode == x86.Mode64:
		modrm := raw[l.ModRMPos]
		if modrm>>6 == 3 || modrm>>3&7 != 0 {
			return "", false
		}
		mem, ok := memOperand64(raw, l)
		if !ok {
			return "", false
		}
		mn := "nopl"
		if n66 > 0 {
			mn = "nopw"
		}
		return strings.Join(append(words, mn+" "+mem), " "), true
	}
	return "", false
}

// memOperand64 formats the ModRM memory operand of a 64-bit-mode legacy
// instruction without REX (enough for nops) in objdump's style.
func memOperand64(raw []byte, l *x86.Layout) (string, bool) {
	regs := [8]string{"%rax", "%rcx", "%rdx", "%rbx", "%rsp", "%rbp", "%rsi", "%rdi"}
	i := l.ModRMPos
	modrm := raw[i]
	mod, rm := modrm>>6, modrm&7
	i++
	base, index, scale := "", "", 0
	if rm == 4 {
		sib := raw[i]
		i++
		scale = 1 << (sib >> 6)
		if x := sib >> 3 & 7; x != 4 {
			index = regs[x]
		} else if sib>>6 != 0 {
			index = "%riz"
		}
		if sib&7 == 5 && mod == 0 {
			base = "" // disp32, no base
		} else {
			base = regs[sib&7]
		}
	} else if rm == 5 && mod == 0 {
		return "", false // RIP-relative: leave it to x86asm
	} else {
		base = regs[rm]
	}
	var disp int64
	switch {
	case mod == 1:
		disp = int64(int8(raw[i]))
	case mod == 2 || mod == 0 && rm == 4 && base == "":
		disp = int64(int32(uint32(raw[i]) | uint32(raw[i+1])<<8 | uint32(raw[i+2])<<16 | uint32(raw[i+3])<<24))
	}
	s := ""
	if mod != 0 || base == "" {
		if disp < 0 {
			s = fmt.Sprintf("-%#x", -disp)
		} else {
			s = fmt.Sprintf("%#x", disp)
		}
	}
	if index != "" {
		return fmt.Sprintf("%s(%s,%s,%d)", s, base, index, scale), true
	}
	if base == "" {
		return s, true
	}
	return fmt.Sprintf("%s(%s)", s, base), true
}

// gprBits gives the size of a general register operand by name.
func gprBits(op string) int {
	if !strings.HasPrefix(op, "%") {
		return 0
	}
	r := op[1:]
	switch {
	case len(r) == 2 && (r[1] == 'l' || r[1] == 'h') && strings.ContainsRune("abcd", rune(r[0])),
		r == "sil" || r == "dil" || r == "spl" || r == "bpl",
		strings.HasPrefix(r, "r") && strings.HasSuffix(r, "b") && len(r) <= 4:
		return 8
	case strings.HasPrefix(r, "r") && strings.HasSuffix(r, "w") && len(r) <= 4,
		len(r) == 2 && r[1] == 'x' && strings.ContainsRune("abcd", rune(r[0])),
		r == "si" || r == "di" || r == "sp" || r == "bp":
		return 16
	case strings.HasPrefix(r, "e"), strings.HasPrefix(r, "r") && strings.HasSuffix(r, "d") && len(r) <= 4:
		return 32
	case strings.HasPrefix(r, "r") && len(r) <= 3:
		return 64
	}
	return 0
}

// polishOperands fixes the operand text: empty absolute addresses, unsigned
// negative displacements, %riz, the scale objdump always prints, a zero
// displacement the encoding has, signed immediates, and invented segment
// overrides.
func polishOperands(mn, ops string, raw []byte, l *x86.Layout, in *x86.Insn, inst x86asm.Inst) string {
	ops = strings.ReplaceAll(ops, " {", "{")
	parts := splitOperands(ops)
	var segWords []string
	// Operand size for immediates: a general register operand, else the
	// mnemonic's suffix, else x86asm's data size.
	immBits := 0
	for _, p := range parts {
		if b := gprBits(p); b > immBits {
			immBits = b
		}
	}
	if immBits == 0 {
		switch {
		case mn == "movabs":
			immBits = 64
		case strings.HasSuffix(mn, "b"):
			immBits = 8
		case strings.HasSuffix(mn, "w"):
			immBits = 16
		case strings.HasSuffix(mn, "l"):
			immBits = 32
		case strings.HasSuffix(mn, "q"):
			immBits = 64
		default:
			immBits = inst.DataSize
		}
	}
	// Does the encoding carry an explicit zero displacement? Is it a SIB
	// with neither base nor index (objdump: "disp" with a 64-bit address,
	// "disp(,%eiz,1)" with a 32-bit one)?
	zeroDisp, sibAbs, sibAbs32 := false, false, false
	if l.ModRMPos >= 0 && l.ModRMPos < len(raw) {
		modrm := raw[l.ModRMPos]
		mod := modrm >> 6
		di := l.ModRMPos + 1
		a16 := in.Mode == x86.Mode16 && !hasByte(l.Prefixes, 0x67) || in.Mode == x86.Mode32 && hasByte(l.Prefixes, 0x67)
		if !a16 && mod != 3 && modrm&7 == 4 {
			di++
		}
		sibNoBase := !a16 && mod == 0 && modrm&7 == 4 && l.ModRMPos+1 < len(raw) && raw[l.ModRMPos+1]&7 == 5
		xExt := l.REX&2 != 0 // REX.X, or VEX/EVEX/XOP X (inverted)
		if (l.Escape == 0xC4 || l.Escape == 0x8F || l.Escape == 0x62) && l.VEXPos+1 < len(raw) {
			xExt = raw[l.VEXPos+1]&0x40 == 0
		}
		sibAbs = sibNoBase && raw[l.ModRMPos+1]>>3&7 == 4 && !xExt
		if sibAbs && (in.Mode != x86.Mode64 || hasByte(l.Prefixes, 0x67)) {
			sibAbs32 = true
		}
		switch {
		case mod == 0 && modrm&7 == 5 && !a16 && di+3 < len(raw):
			zeroDisp = raw[di]|raw[di+1]|raw[di+2]|raw[di+3] == 0 // disp32 or RIP-relative
		case sibNoBase && di+3 < len(raw):
			zeroDisp = raw[di]|raw[di+1]|raw[di+2]|raw[di+3] == 0
		case mod == 1 && di < len(raw):
			zeroDisp = raw[di] == 0
		case mod == 2 && !a16 && di+3 < len(raw):
			zeroDisp = raw[di]|raw[di+1]|raw[di+2]|raw[di+3] == 0
		case mod == 2 && a16 && di+1 < len(raw):
			zeroDisp = raw[di]|raw[di+1] == 0
		}
	}
	ripRel := in.Mode == x86.Mode64 && l.ModRMPos >= 0 && l.ModRMPos < len(raw) && raw[l.ModRMPos]&0xC7 == 0x05
	for k, p := range parts {
		if l.Escape != 0 && len(p) > 4 && p[0] == '%' && p[3] == ':' && !hasSegPrefix(l.Prefixes, p[1:3]) {
			p = p[4:] // x86asm (avx.go) invents a segment for VEX/EVEX
		}
		if ripRel && l.Escape != 0 && (strings.HasPrefix(p, "0x") || strings.HasPrefix(p, "-0x")) && !strings.Contains(p, "(") {
			// x86asm (avx.go) drops the base of RIP-relative VEX/EVEX
			// operands; it goes before an EVEX broadcast "{1toN}".
			if i := strings.IndexByte(p, '{'); i > 0 {
				p = p[:i] + "(%rip)" + p[i:]
			} else {
				p += "(%rip)"
			}
		}
		if p == "" || strings.HasSuffix(p, ":") {
			p += "0x0" // absolute address 0
		}
		if in.Mode == x86.Mode64 && l.Escape == 0 && l.OpMap == 0 && (l.Op == 0x68 || l.Op == 0x6A) && !l.P66 && strings.HasPrefix(p, "$") {
			// push imm sign-extends to 64 bits
			var v int64
			if l.Op == 0x6A {
				v = int64(int8(raw[len(raw)-1]))
			} else {
				v = int64(int32(binary.LittleEndian.Uint32(raw[len(raw)-4:])))
			}
			p = "$0x" + strconv.FormatUint(uint64(v), 16)
		}
		if in.Mode == x86.Mode64 && !hasByte(l.Prefixes, 0x67) && len(p) == 10 && strings.HasPrefix(p, "0x") && p[2] >= '8' && l.ModRMPos >= 0 && !strings.Contains(p, "(") {
			p = "0xffffffff" + p[2:] // an absolute disp32 sign-extends to a 64-bit address
		}

		if strings.HasPrefix(p, "$-0x") && immBits > 0 {
			if v, err := strconv.ParseUint(p[4:], 16, 64); err == nil {
				p = "$" + "0x" + strconv.FormatUint(-v&(1<<uint(immBits)-1|mask64(immBits)), 16)
			}
		}
		if in.Mode == x86.Mode64 && len(p) > 4 && p[0] == '%' && p[3] == ':' && !isStringOp(mn) &&
			strings.Contains("cs ds es ss", p[1:3]) && hasSegPrefix(l.Prefixes, p[1:3]) {
			// objdump shows the segment overrides 64-bit mode ignores as
			// prefix words.
			segWords = append(segWords, p[1:3])
			p = p[4:]
		}
		seg := ""
		if strings.HasPrefix(p, "*") {
			seg, p = "*", p[1:] // indirect branch operand
		}
		if i := strings.Index(p, ":"); i >= 0 && strings.HasPrefix(p, "%") {
			seg, p = seg+p[:i+1], p[i+1:]
		}
		if mn == "movabs" && strings.HasPrefix(p, "-0x") {
			if v, err := strconv.ParseUint(p[3:], 16, 64); err == nil {
				p = "0x" + strconv.FormatUint(-v, 16) // moffs64 is unsigned
			}
		}
		bcast := ""
		if i := strings.IndexByte(p, '{'); i > 0 && strings.HasSuffix(p, "}") {
			p, bcast = p[:i], p[i:]
		}
		if sibAbs {
			if j := strings.IndexByte(p, '('); j >= 0 && strings.HasPrefix(p[j:], "(,%") {
				p = p[:j]
				if p == "" {
					p = "0x0"
				}
			}
			if sibAbs32 && l.ModRMPos >= 0 && !strings.HasPrefix(p, "$") && !strings.HasPrefix(p, "%") && !strings.Contains(p, "(") {
				p += "(,%eiz,1)"
			}
		}
		if j := strings.IndexByte(p, '('); j >= 0 && strings.HasSuffix(p, ")") && !(sibAbs && strings.HasSuffix(p, "(,%eiz,1)")) {
			addr := p[j+1 : len(p)-1]
			disp := p[:j]
			// x86asm prints a SIB without index as ",%riz"; objdump drops it
			// only where the SIB is required (base rsp or r12).
			if b, _, _ := strings.Cut(addr, ","); b == "%r12" || b == "%r12d" {
				addr = strings.TrimSuffix(strings.TrimSuffix(addr, ",%riz"), ",%eiz")
			}
			if f := strings.Split(addr, ","); len(f) == 2 && gprBits(f[1]) != 16 {
				addr += ",1" // objdump prints scale 1
			}
			// A negative disp32 printed as unsigned: 0xffffff78(%rbp).
			if len(disp) == 10 && strings.HasPrefix(disp, "0x") {
				if v, err := strconv.ParseUint(disp[2:], 16, 32); err == nil && v >= 0x80000000 {
					disp = fmt.Sprintf("-%#x", 0x100000000-v)
				}
			}
			if disp == "" && zeroDisp {
				disp = "0x0"
			}
			p = disp + "(" + addr + ")"
		}
		parts[k] = seg + p + bcast
	}
	s := strings.Join(parts, ",")
	if len(segWords) > 0 {
		s = strings.Join(segWords, " ") + " \x00" + s // polish moves the words before the mnemonic
	}
	return s
}

// splitOperands splits AT&T operands at the commas outside parentheses
// and braces.
func splitOperands(ops string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(ops); i++ {
		switch ops[i] {
		case '(', '{':
			depth++
		case ')', '}':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, ops[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, ops[start:])
}

// mask64 returns all ones for 64 bits (1<<64-1 overflows to 0 otherwise).
func mask64(bits int) uint64 {
	if bits >= 64 {
		return ^uint64(0)
	}
	return 0
}

func hasByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// hasSegPrefix reports whether the legacy prefixes include the segment
// override for register name seg ("cs", "ds", ...).
func hasSegPrefix(pfx []byte, seg string) bool {
	want := map[string]byte{"es": 0x26, "cs": 0x2E, "ss": 0x36, "ds": 0x3E, "fs": 0x64, "gs": 0x65}[seg]
	return hasByte(pfx, want)
}
