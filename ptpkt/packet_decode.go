package ptpkt

import (
	"encoding/binary"
	mbits "math/bits"
)

// Opcode bytes and extended opcodes (the byte after 0x02) of the Intel PT
// packets. See the SDM, "Packet Definitions".
const (
	opcPad     = 0x00
	opcExt     = 0x02
	opcMode    = 0x99
	opcTSC     = 0x19
	opcMTC     = 0x59
	opcTrig    = 0xd9
	opcTIP     = 0x0d // low 5 bits; bits 7:5 are the IP compression
	opcTIPPGE  = 0x11
	opcTIPPGD  = 0x01
	opcFUP     = 0x1d
	opcIPMask  = 0x1f
	opcCYCMask = 0x03 // low 2 bits 0b11

	extPSB      = 0x82
	extPSBEnd   = 0x23
	extCBR      = 0x03
	extPIP      = 0x43
	extTMA      = 0x73
	extStop     = 0x83
	extTNT64    = 0xa3
	extMNT      = 0xc3 // followed by ext2 0x88
	ext2MNT     = 0x88
	extVMCS     = 0xc8
	extOVF      = 0xf3
	extPTW      = 0x12 // low 5 bits; bit 7 IP, bits 6:5 payload size
	extPTWMask  = 0x1f
	extExStop   = 0x62
	extExStopIP = 0xe2
	extMWait    = 0xc2
	extPwrE     = 0x22
	extPwrX     = 0xa2
	extBBP      = 0x63
	extBEP      = 0x33
	extBEPIP    = 0xb3
	extCFE      = 0x13
	extEVD      = 0x53
)

// Packet sizes in bytes.
const (
	sizePSB   = 16
	sizeTSC   = 8
	sizeCBR   = 4
	sizePIP   = 8
	sizeTMA   = 7
	sizeTNT64 = 8
	sizeMNT   = 11
	sizeVMCS  = 7
	sizeMWait = 10
	sizePwrE  = 4
	sizePwrX  = 7
	sizeBBP   = 3
	sizeCFE   = 4
	sizeEVD   = 11
)

// le reads an n-byte little-endian value from b (n <= 8, len(b) >= n).
func pktLE(b []byte, n int) uint64 {
	if len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		if n < 8 {
			v &= 1<<(8*uint(n)) - 1
		}
		return v
	}
	var v uint64
	for i := n - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// decodeAt decodes the packet at off into p and returns its size. Errors
// are ErrEOS (the packet is truncated by the end of the buffer, or off is
// at the end), ErrBadOpcode and ErrBadPacket; the caller adds the offset.
func (d *PacketDecoder) decodeAt(off uint64, p *Packet) (int, error) {
	buf := d.buf
	if off >= uint64(len(buf)) {
		return 0, ErrEOS
	}
	b := buf[off:]
	*p = Packet{}
	op := b[0]

	// The hot single-byte cases first.
	switch {
	case op == opcPad:
		p.Type, p.Size = PktPad, 1
		return 1, nil
	case op&1 == 0 && op != opcExt:
		// BIP (only inside a BBP block): ID in bits 7:3, 0b100.
		if d.inBlock && op&7 == 4 {
			return d.decodeBIP(b, p)
		}
		// TNT-8: bits 7:1 hold the outcomes and a stop bit.
		return decodeTNT(p, PktTNT8, uint64(op>>1), 1), nil
	case op&opcCYCMask == opcCYCMask:
		n, err := decodeCYC(b, p)
		if err == nil && n == 2 && d.cfg.Errata.SKD007 {
			n = d.skd007(b, p)
		}
		return n, err
	}

	switch op & opcIPMask {
	case opcTIP:
		return decodeIP(b, p, PktTIP)
	case opcTIPPGE:
		return decodeIP(b, p, PktTIPPGE)
	case opcTIPPGD:
		return decodeIP(b, p, PktTIPPGD)
	case opcFUP:
		return decodeIP(b, p, PktFUP)
	}

	switch op {
	case opcExt:
		return d.decodeExt(b, p)
	case opcMode:
		if len(b) < 2 {
			return 0, ErrEOS
		}
		switch b[1] >> 5 {
		case 0:
			p.Type = PktModeExec
			p.CSL, p.CSD, p.IF = b[1]&1 != 0, b[1]&2 != 0, b[1]&4 != 0
		case 1:
			p.Type = PktModeTSX
			p.InTX, p.Abort = b[1]&1 != 0, b[1]&2 != 0
		default:
			return 0, ErrBadPacket
		}
		p.Size = 2
		return 2, nil
	case opcTSC:
		if len(b) < sizeTSC {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktTSC, sizeTSC
		p.Payload = pktLE(b[1:], 7)
		return sizeTSC, nil
	case opcMTC:
		if len(b) < 2 {
			return 0, ErrEOS
		}
		p.Type, p.Size, p.MTC = PktMTC, 2, b[1]
		return 2, nil
	case opcTrig:
		if len(b) < 3 {
			return 0, ErrEOS
		}
		p.Type = PktTrig
		p.IPBit, p.ICNTValid, p.Mult = b[1]&0x80 != 0, b[1]&0x40 != 0, b[1]&0x20 != 0
		p.TRBV = b[2]
		n := 3
		if p.ICNTValid {
			if len(b) < 5 {
				return 0, ErrEOS
			}
			p.ICNT = uint16(pktLE(b[3:], 2))
			n = 5
		}
		p.Size = uint8(n)
		return n, nil
	}
	return 0, ErrBadOpcode
}

// decodeTNT fills p with a TNT packet whose payload (including the stop
// bit) is raw; it returns size.
func decodeTNT(p *Packet, t PacketType, raw uint64, size int) int {
	// The caller guarantees raw != 0: the stop bit is the highest set bit.
	bits := uint8(mbits.Len64(raw) - 1)
	p.Type, p.Size = t, uint8(size)
	p.TNTBits = bits
	p.TNTPayload = raw &^ (1 << bits)
	return size
}

// decodeIP decodes TIP, TIP.PGE, TIP.PGD and FUP.
func decodeIP(b []byte, p *Packet, t PacketType) (int, error) {
	ipc := IPCompression(b[0] >> 5)
	n := ipc.PayloadSize()
	if n < 0 {
		return 0, ErrBadPacket
	}
	if len(b) < 1+n {
		return 0, ErrEOS
	}
	p.Type, p.Size, p.IPC = t, uint8(1+n), ipc
	if n > 0 {
		p.IP = pktLE(b[1:], n)
	}
	return 1 + n, nil
}

// decodeCYC decodes a CYC packet: bits 7:3 of the header are the low five
// bits of the count; bit 2 says an extension byte follows; each extension
// byte has 7 more bits (7:1) and its own continuation bit (0). A count that
// would need more than 64 bits is a bad packet (as in libipt).
func decodeCYC(b []byte, p *Packet) (int, error) {
	v := uint64(b[0] >> 3)
	n := 1
	ext := b[0]&4 != 0
	shift := uint(5)
	for ext {
		if n >= len(b) {
			return 0, ErrEOS
		}
		c := b[n]
		n++
		ext = c&1 != 0
		bits := uint64(c>>1) << shift
		shift += 7
		if shift > 64 {
			return 0, ErrBadPacket
		}
		v |= bits
	}
	p.Type, p.Size, p.Payload = PktCYC, uint8(n), v
	return n, nil
}

// skd007 applies erratum SKD007 (an OVF may replace the rest of a
// multi-byte CYC): a 2-byte CYC whose second byte looks like an ext opcode,
// followed by an OVF ext code, is really the first byte of a CYC and an OVF.
// Like libipt, it reports the OVF at the CYC's offset, consuming 3 bytes.
func (d *PacketDecoder) skd007(b []byte, p *Packet) int {
	if (p.Payload&^0x1f) != 0x20 || len(b) < 3 || b[2] != extOVF {
		return 2
	}
	*p = Packet{Type: PktOVF, Size: 2}
	d.inBlock = false
	return 3
}

// decodeBIP decodes a Block Item Packet inside a BBP block.
func (d *PacketDecoder) decodeBIP(b []byte, p *Packet) (int, error) {
	n := 1 + int(d.bipSize)
	if len(b) < n {
		return 0, ErrEOS
	}
	p.Type, p.Size, p.ID = PktBIP, uint8(n), b[0]>>3
	p.SZ = d.bipSize == 8
	p.Payload = pktLE(b[1:], int(d.bipSize))
	return n, nil
}

// decodeExt decodes the packets with the 0x02 prefix.
func (d *PacketDecoder) decodeExt(b []byte, p *Packet) (int, error) {
	if len(b) < 2 {
		return 0, ErrEOS
	}
	ext := b[1]
	need := func(n int) bool { return len(b) >= n }
	switch ext {
	case extPSB:
		if !need(sizePSB) {
			return 0, ErrEOS
		}
		if [16]byte(b[:16]) != PSBPattern {
			return 0, ErrBadPacket
		}
		p.Type, p.Size = PktPSB, sizePSB
		d.inBlock = false
		return sizePSB, nil
	case extPSBEnd:
		p.Type, p.Size = PktPSBEnd, 2
		return 2, nil
	case extOVF:
		p.Type, p.Size = PktOVF, 2
		d.inBlock = false
		return 2, nil
	case extStop:
		p.Type, p.Size = PktTraceStop, 2
		return 2, nil
	case extCBR:
		if !need(sizeCBR) {
			return 0, ErrEOS
		}
		p.Type, p.Size, p.CBR = PktCBR, sizeCBR, b[2]
		return sizeCBR, nil
	case extPIP:
		if !need(sizePIP) {
			return 0, ErrEOS
		}
		v := pktLE(b[2:], 6)
		p.Type, p.Size = PktPIP, sizePIP
		p.NR = v&1 != 0
		p.Payload = (v >> 1) << 5
		return sizePIP, nil
	case extTMA:
		if !need(sizeTMA) {
			return 0, ErrEOS
		}
		fc := uint16(pktLE(b[5:], 2))
		if fc&^0x1ff != 0 || b[4] != 0 {
			// Reserved bits set. SKZ84: a TMA corrupted by VMX
			// TSC scaling/offsetting is followed by a bogus byte;
			// libipt reports it as an invalid 8-byte packet.
			if d.cfg.Errata.SKZ84 {
				// Like libipt, the bogus byte is not bounds
				// checked: the next Next reports the end.
				p.Type, p.Size = PktInvalid, sizeTMA+1
				return sizeTMA + 1, nil
			}
			return 0, ErrBadPacket
		}
		p.Type, p.Size = PktTMA, sizeTMA
		p.CTC = uint16(pktLE(b[2:], 2))
		p.FC = fc
		return sizeTMA, nil
	case extTNT64:
		if !need(sizeTNT64) {
			return 0, ErrEOS
		}
		raw := pktLE(b[2:], 6)
		if raw == 0 {
			return 0, ErrBadPacket
		}
		return decodeTNT(p, PktTNT64, raw, sizeTNT64), nil
	case extMNT:
		if !need(3) {
			return 0, ErrEOS
		}
		if b[2] != ext2MNT {
			return 0, ErrBadOpcode
		}
		if !need(sizeMNT) {
			return 0, ErrEOS
		}
		p.Type, p.Size, p.Payload = PktMNT, sizeMNT, pktLE(b[3:], 8)
		return sizeMNT, nil
	case extVMCS:
		if !need(sizeVMCS) {
			return 0, ErrEOS
		}
		p.Type, p.Size, p.Payload = PktVMCS, sizeVMCS, pktLE(b[2:], 5)<<12
		return sizeVMCS, nil
	case extExStop, extExStopIP:
		p.Type, p.Size, p.IPBit = PktExStop, 2, ext&0x80 != 0
		return 2, nil
	case extMWait:
		if !need(sizeMWait) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktMWait, sizeMWait
		p.Hints = uint32(pktLE(b[2:], 4))
		p.Ext = uint32(pktLE(b[6:], 4))
		return sizeMWait, nil
	case extPwrE:
		if !need(sizePwrE) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktPwrE, sizePwrE
		// libipt reads the HW flag from bit 3 of byte 2 (the SDM
		// draws it in bit 7); the oracle's encoder agrees with the
		// decoder, so follow libipt.
		p.HW = b[2]&0x08 != 0
		p.State, p.SubState = b[3]>>4, b[3]&0xf
		return sizePwrE, nil
	case extPwrX:
		if !need(sizePwrX) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktPwrX, sizePwrX
		p.LastCState, p.DeepestCState = b[2]>>4, b[2]&0xf
		p.WakeInterrupt = b[3]&0x01 != 0
		p.WakeStore = b[3]&0x04 != 0
		p.WakeAutonomous = b[3]&0x08 != 0
		return sizePwrX, nil
	case extBBP:
		if !need(sizeBBP) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktBBP, sizeBBP
		p.SZ, p.EvType = b[2]&0x80 != 0, b[2]&0x1f
		d.inBlock = true
		d.bipSize = 4
		if p.SZ {
			d.bipSize = 8
		}
		return sizeBBP, nil
	case extBEP, extBEPIP:
		p.Type, p.Size, p.IPBit = PktBEP, 2, ext&0x80 != 0
		d.inBlock = false
		return 2, nil
	case extCFE:
		if !need(sizeCFE) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktCFE, sizeCFE
		p.IPBit, p.EvType, p.Vector = b[2]&0x80 != 0, b[2]&0x1f, b[3]
		return sizeCFE, nil
	case extEVD:
		if !need(sizeEVD) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktEVD, sizeEVD
		p.EvType = b[2] & 0x1f
		p.Payload = pktLE(b[3:], 8)
		return sizeEVD, nil
	}
	if ext&extPTWMask == extPTW {
		var n int
		switch (ext >> 5) & 3 {
		case 0:
			n = 4
		case 1:
			n = 8
		default:
			return 0, ErrBadPacket
		}
		if !need(2 + n) {
			return 0, ErrEOS
		}
		p.Type, p.Size = PktPTW, uint8(2+n)
		p.PLC, p.IPBit = (ext>>5)&3, ext&0x80 != 0
		p.Payload = pktLE(b[2:], n)
		return 2 + n, nil
	}
	return 0, ErrBadOpcode
}
