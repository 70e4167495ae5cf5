package x86

// Layout locates the parts of a decoded instruction: prefixes, escape,
// opcode map, opcode and ModRM position. The length decoder does not need
// it; the AT&T formatter (package att) does.
type Layout struct {
	Prefixes []byte // legacy prefixes in order
	REX      byte   // REX in effect (0 if none or cancelled)
	REXPos   int    // position of the REX in effect, or -1
	Escape   byte   // 0, or 0xC4/0xC5 (VEX), 0x62 (EVEX), 0x8F (XOP)
	VEXL     byte   // VEX.L / EVEX.L'L
	VEXW     bool
	VEXPP    byte // implied prefix: 0 none, 1 66, 2 F3, 3 F2
	VEXPos   int  // position of the escape byte
	OpMap    int  // 0: one-byte, 1: 0F, 2: 0F38, 3: 0F3A; VEX/EVEX/XOP map number
	OpPos    int  // position of the opcode byte
	Op       byte // the opcode
	ModRMPos int  // position of ModRM, or -1
	Rep      byte // last F2/F3
	P66      bool
	Mode     ExecMode
}

// ModRM returns the ModRM byte (0 if none).
func (l *Layout) ModRM(raw []byte) byte {
	if l.ModRMPos < 0 || l.ModRMPos >= len(raw) {
		return 0
	}
	return raw[l.ModRMPos]
}

// ParseLayout splits raw (a complete instruction, as DecodeInsn found it)
// into prefixes, escape, opcode and ModRM position.
func ParseLayout(raw []byte, mode ExecMode) Layout {
	l := Layout{REXPos: -1, ModRMPos: -1, VEXPos: -1, Mode: mode}
	i := 0
	for ; i < len(raw); i++ {
		b := raw[i]
		k := prefixKind[b]
		if k == pfxNone || (k == pfxREX && mode != Mode64) {
			break
		}
		if k == pfxREX {
			l.REX, l.REXPos = b, i
			continue
		}
		l.REX, l.REXPos = 0, -1
		l.Prefixes = append(l.Prefixes, b)
		switch k {
		case pfx66:
			l.P66 = true
		case pfxF2, pfxF3:
			l.Rep = b
		}
	}
	if i >= len(raw) {
		return l
	}
	b := raw[i]
	vexLike := false
	switch b {
	case 0xC4, 0xC5, 0x62:
		vexLike = mode == Mode64 || (i+1 < len(raw) && raw[i+1] >= 0xC0)
	case 0x8F:
		vexLike = i+1 < len(raw) && raw[i+1]&0x1F >= 8
	}
	if vexLike {
		l.Escape, l.VEXPos = b, i
		switch b {
		case 0xC5:
			if i+1 < len(raw) {
				p := raw[i+1]
				l.OpMap, l.VEXL, l.VEXPP = 1, p>>2&1, p&3
			}
			i += 2
		case 0xC4, 0x8F:
			if i+2 < len(raw) {
				l.OpMap = int(raw[i+1] & 0x1F)
				p := raw[i+2]
				l.VEXW, l.VEXL, l.VEXPP = p&0x80 != 0, p>>2&1, p&3
			}
			i += 3
		case 0x62:
			if i+3 < len(raw) {
				l.OpMap = int(raw[i+1] & 7)
				l.VEXW, l.VEXPP = raw[i+2]&0x80 != 0, raw[i+2]&3
				l.VEXL = raw[i+3] >> 5 & 3
			}
			i += 4
		}
		if i < len(raw) {
			l.OpPos, l.Op = i, raw[i]
			if !(l.OpMap == 1 && l.Op == 0x77) && i+1 < len(raw) {
				l.ModRMPos = i + 1
			}
		}
		return l
	}
	if b == 0x0F && i+1 < len(raw) {
		i++
		switch raw[i] {
		case 0x38:
			l.OpMap = 2
			i++
		case 0x3A:
			l.OpMap = 3
			i++
		default:
			l.OpMap = 1
		}
	}
	if i < len(raw) {
		l.OpPos, l.Op = i, raw[i]
		var a opAttr
		switch l.OpMap {
		case 0:
			a = map0[l.Op]
		case 1:
			a = map1[l.Op]
			if l.Op == 0x0F {
				a = aModRM
			}
		default:
			a = aModRM
		}
		if a&aModRM != 0 && i+1 < len(raw) {
			l.ModRMPos = i + 1
		}
	}
	return l
}

// IsPrefix reports whether b is an instruction prefix in mode: a legacy
// prefix, or a REX prefix in 64-bit mode.
func IsPrefix(b byte, mode ExecMode) bool {
	k := prefixKind[b]
	return k != pfxNone && !(k == pfxREX && mode != Mode64)
}

// IsREX reports whether b is a REX byte (40-4F), a prefix in 64-bit mode only.
func IsREX(b byte) bool { return prefixKind[b] == pfxREX }
