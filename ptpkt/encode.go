package ptpkt

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrShortBuffer is returned by Packet.Encode when dst is too small.
var ErrShortBuffer = errors.New("encode: destination buffer too small")

// EncodeError says which field of which packet cannot be encoded.
type EncodeError struct {
	Type  PacketType
	Field string
	Value uint64
}

func (e *EncodeError) Error() string {
	return fmt.Sprintf("encode %s: %s %#x does not fit the packet", e.Type, e.Field, e.Value)
}

// MaxPacketSize is the size of the largest packet (PSB).
const MaxPacketSize = 16

// EncodedSize returns the number of bytes p encodes to, or an error if p
// cannot be encoded.
func (p *Packet) EncodedSize() (int, error) {
	var tmp [MaxPacketSize]byte
	return p.Encode(tmp[:])
}

// Encode writes the packet to dst and returns the number of bytes written.
// Only the fields of p.Type are used (p.Size is ignored). It returns
// ErrShortBuffer if dst is too small and an *EncodeError if a field does not
// fit the packet format (e.g. TNTBits > 6 for TNT-8, an IP with bits
// outside its compression's payload, a CR3 not 32-byte aligned).
func (p *Packet) Encode(dst []byte) (int, error) {
	var b [MaxPacketSize]byte
	n, err := p.encode(&b)
	if err != nil {
		return 0, err
	}
	if len(dst) < n {
		return 0, ErrShortBuffer
	}
	copy(dst, b[:n])
	return n, nil
}

// AppendPacket appends the encoding of p to dst.
func AppendPacket(dst []byte, p *Packet) ([]byte, error) {
	var b [MaxPacketSize]byte
	n, err := p.encode(&b)
	if err != nil {
		return dst, err
	}
	return append(dst, b[:n]...), nil
}

func (p *Packet) bad(field string, v uint64) error {
	return &EncodeError{Type: p.Type, Field: field, Value: v}
}

// putLE writes the low n bytes of v to b, little-endian.
func pktPutLE(b []byte, v uint64, n int) {
	for i := 0; i < n; i++ {
		b[i] = byte(v >> (8 * i))
	}
}

// fits reports whether v has no bits at or above bit n.
func pktFits(v uint64, n uint) bool { return n >= 64 || v>>n == 0 }

func pktBit(b bool, bit uint) byte {
	if b {
		return 1 << bit
	}
	return 0
}

func (p *Packet) encode(b *[MaxPacketSize]byte) (int, error) {
	switch p.Type {
	case PktPad:
		b[0] = opcPad
		return 1, nil
	case PktPSB:
		*b = PSBPattern
		return sizePSB, nil
	case PktPSBEnd, PktOVF, PktTraceStop, PktExStop, PktBEP:
		b[0] = opcExt
		switch p.Type {
		case PktPSBEnd:
			b[1] = extPSBEnd
		case PktOVF:
			b[1] = extOVF
		case PktTraceStop:
			b[1] = extStop
		case PktExStop:
			b[1] = extExStop | pktBit(p.IPBit, 7)
		case PktBEP:
			b[1] = extBEP | pktBit(p.IPBit, 7)
		}
		return 2, nil
	case PktTNT8:
		if p.TNTBits < 1 || p.TNTBits > 6 {
			return 0, p.bad("TNTBits", uint64(p.TNTBits))
		}
		if !pktFits(p.TNTPayload, uint(p.TNTBits)) {
			return 0, p.bad("TNTPayload", p.TNTPayload)
		}
		b[0] = byte((1<<p.TNTBits | p.TNTPayload) << 1)
		return 1, nil
	case PktTNT64:
		if p.TNTBits < 1 || p.TNTBits > 47 {
			return 0, p.bad("TNTBits", uint64(p.TNTBits))
		}
		if !pktFits(p.TNTPayload, uint(p.TNTBits)) {
			return 0, p.bad("TNTPayload", p.TNTPayload)
		}
		b[0], b[1] = opcExt, extTNT64
		pktPutLE(b[2:], 1<<p.TNTBits|p.TNTPayload, 6)
		return sizeTNT64, nil
	case PktTIP, PktTIPPGE, PktTIPPGD, PktFUP:
		n := p.IPC.PayloadSize()
		if n < 0 {
			return 0, p.bad("IPC", uint64(p.IPC))
		}
		if !pktFits(p.IP, uint(8*n)) {
			return 0, p.bad("IP", p.IP)
		}
		var opc byte
		switch p.Type {
		case PktTIP:
			opc = opcTIP
		case PktTIPPGE:
			opc = opcTIPPGE
		case PktTIPPGD:
			opc = opcTIPPGD
		default:
			opc = opcFUP
		}
		b[0] = byte(p.IPC)<<5 | opc
		pktPutLE(b[1:], p.IP, n)
		return 1 + n, nil
	case PktPIP:
		if p.Payload&0x1f != 0 || !pktFits(p.Payload, 52) {
			return 0, p.bad("CR3", p.Payload)
		}
		b[0], b[1] = opcExt, extPIP
		pktPutLE(b[2:], (p.Payload>>5)<<1|uint64(pktBit(p.NR, 0)), 6)
		return sizePIP, nil
	case PktModeExec:
		b[0], b[1] = opcMode, pktBit(p.CSL, 0)|pktBit(p.CSD, 1)|pktBit(p.IF, 2)
		return 2, nil
	case PktModeTSX:
		b[0], b[1] = opcMode, 1<<5|pktBit(p.InTX, 0)|pktBit(p.Abort, 1)
		return 2, nil
	case PktTSC:
		if !pktFits(p.Payload, 56) {
			return 0, p.bad("TSC", p.Payload)
		}
		b[0] = opcTSC
		pktPutLE(b[1:], p.Payload, 7)
		return sizeTSC, nil
	case PktCBR:
		b[0], b[1], b[2], b[3] = opcExt, extCBR, p.CBR, 0
		return sizeCBR, nil
	case PktMTC:
		b[0], b[1] = opcMTC, p.MTC
		return 2, nil
	case PktTMA:
		if p.FC > 0x1ff {
			return 0, p.bad("FC", uint64(p.FC))
		}
		b[0], b[1] = opcExt, extTMA
		pktPutLE(b[2:], uint64(p.CTC), 2)
		b[4] = 0
		pktPutLE(b[5:], uint64(p.FC), 2)
		return sizeTMA, nil
	case PktCYC:
		// libipt rejects a CYC whose extension bytes go past 64
		// bits, so at most 5 + 8*7 = 61 bits are decodable.
		if !pktFits(p.Payload, 61) {
			return 0, p.bad("cycles", p.Payload)
		}
		v := p.Payload
		b[0] = byte(v&0x1f)<<3 | opcCYCMask
		v >>= 5
		n := 1
		if v != 0 {
			b[0] |= 4
		}
		for v != 0 {
			c := byte(v&0x7f) << 1
			v >>= 7
			if v != 0 {
				c |= 1
			}
			b[n] = c
			n++
		}
		return n, nil
	case PktVMCS:
		if p.Payload&0xfff != 0 || !pktFits(p.Payload, 52) {
			return 0, p.bad("VMCS base", p.Payload)
		}
		b[0], b[1] = opcExt, extVMCS
		pktPutLE(b[2:], p.Payload>>12, 5)
		return sizeVMCS, nil
	case PktMNT:
		b[0], b[1], b[2] = opcExt, extMNT, ext2MNT
		binary.LittleEndian.PutUint64(b[3:], p.Payload)
		return sizeMNT, nil
	case PktPTW:
		var n int
		switch p.PLC {
		case 0:
			n = 4
			if !pktFits(p.Payload, 32) {
				return 0, p.bad("Payload", p.Payload)
			}
		case 1:
			n = 8
		default:
			return 0, p.bad("PLC", uint64(p.PLC))
		}
		b[0], b[1] = opcExt, extPTW|p.PLC<<5|pktBit(p.IPBit, 7)
		pktPutLE(b[2:], p.Payload, n)
		return 2 + n, nil
	case PktMWait:
		b[0], b[1] = opcExt, extMWait
		pktPutLE(b[2:], uint64(p.Hints), 4)
		pktPutLE(b[6:], uint64(p.Ext), 4)
		return sizeMWait, nil
	case PktPwrE:
		if p.State > 0xf || p.SubState > 0xf {
			return 0, p.bad("State", uint64(p.State)<<4|uint64(p.SubState))
		}
		b[0], b[1], b[2], b[3] = opcExt, extPwrE, pktBit(p.HW, 3), p.State<<4|p.SubState
		return sizePwrE, nil
	case PktPwrX:
		if p.LastCState > 0xf || p.DeepestCState > 0xf {
			return 0, p.bad("C-state", uint64(p.LastCState)<<4|uint64(p.DeepestCState))
		}
		b[0], b[1] = opcExt, extPwrX
		b[2] = p.LastCState<<4 | p.DeepestCState
		b[3] = pktBit(p.WakeInterrupt, 0) | pktBit(p.WakeStore, 2) | pktBit(p.WakeAutonomous, 3)
		b[4], b[5], b[6] = 0, 0, 0
		return sizePwrX, nil
	case PktBBP:
		if p.EvType > 0x1f {
			return 0, p.bad("EvType", uint64(p.EvType))
		}
		b[0], b[1], b[2] = opcExt, extBBP, pktBit(p.SZ, 7)|p.EvType
		return sizeBBP, nil
	case PktBIP:
		if p.ID > 0x1f {
			return 0, p.bad("ID", uint64(p.ID))
		}
		n := 4
		if p.SZ {
			n = 8
		} else if !pktFits(p.Payload, 32) {
			return 0, p.bad("Payload", p.Payload)
		}
		b[0] = p.ID<<3 | 4
		pktPutLE(b[1:], p.Payload, n)
		return 1 + n, nil
	case PktCFE:
		if p.EvType > 0x1f {
			return 0, p.bad("EvType", uint64(p.EvType))
		}
		b[0], b[1], b[2], b[3] = opcExt, extCFE, pktBit(p.IPBit, 7)|p.EvType, p.Vector
		return sizeCFE, nil
	case PktEVD:
		if p.EvType > 0x1f {
			return 0, p.bad("EvType", uint64(p.EvType))
		}
		b[0], b[1], b[2] = opcExt, extEVD, p.EvType
		binary.LittleEndian.PutUint64(b[3:], p.Payload)
		return sizeEVD, nil
	case PktTrig:
		b[0] = opcTrig
		b[1] = pktBit(p.IPBit, 7) | pktBit(p.ICNTValid, 6) | pktBit(p.Mult, 5)
		b[2] = p.TRBV
		if !p.ICNTValid {
			if p.ICNT != 0 {
				return 0, p.bad("ICNT", uint64(p.ICNT))
			}
			return 3, nil
		}
		pktPutLE(b[3:], uint64(p.ICNT), 2)
		return 5, nil
	}
	return 0, p.bad("Type", uint64(p.Type))
}

// CompressIP returns the shortest IP compression that reconstructs ip from
// the last IP last (haveLast false: no last IP yet), and the payload to
// store: update16/32/48 when the upper bits equal last's, sext48 when ip is
// the sign extension of its low 48 bits, else the full IP.
func CompressIP(ip, last uint64, haveLast bool) (IPCompression, uint64) {
	switch {
	case haveLast && ip>>16 == last>>16:
		return IPUpdate16, ip & 0xffff
	case haveLast && ip>>32 == last>>32:
		return IPUpdate32, ip & 0xffffffff
	case SignExtend48(ip) == ip:
		return IPSext48, ip & 0xffffffffffff
	case haveLast && ip>>48 == last>>48:
		return IPUpdate48, ip & 0xffffffffffff
	}
	return IPFull, ip
}

// Encoder appends packets to Buf and keeps the last IP the way a decoder
// will see it, so IP packets can be written with the shortest compression
// (TIPAt). The soft-PT backend and the tests generate traces with it.
type Encoder struct {
	Buf  []byte
	last LastIP
}

// Append encodes p. IP packets update the encoder's last IP exactly as
// LastIP does in a decoder (a PSB does not reset it: decoders keep the last
// IP across PSB, and PSB+ normally carries a FUP with a full IP anyway).
func (e *Encoder) Append(p *Packet) error {
	b, err := AppendPacket(e.Buf, p)
	if err != nil {
		return err
	}
	e.Buf = b
	switch p.Type {
	case PktTIP, PktTIPPGE, PktTIPPGD, PktFUP:
		e.last.Update(p.IPC, p.IP)
	}
	return nil
}

// IPPacket appends a TIP, TIP.PGE, TIP.PGD or FUP for ip, compressed
// against the last IP.
func (e *Encoder) IPPacket(t PacketType, ip uint64) error {
	switch t {
	case PktTIP, PktTIPPGE, PktTIPPGD, PktFUP:
	default:
		return &EncodeError{Type: t, Field: "Type (not an IP packet)", Value: uint64(t)}
	}
	last, err := e.last.IP()
	have := err == nil || errors.Is(err, ErrIPSuppressed)
	if errors.Is(err, ErrIPSuppressed) {
		last = e.last.ip
	}
	ipc, payload := CompressIP(ip, last, have)
	return e.Append(&Packet{Type: t, IPC: ipc, IP: payload})
}

// ResetLastIP forgets the last IP, e.g. after an overflow the encoder
// wants decoders to see a full IP next.
func (e *Encoder) ResetLastIP() { e.last.Reset() }
