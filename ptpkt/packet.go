package ptpkt

import (
	"errors"
	"fmt"
	"io"
)

// PacketType identifies an Intel PT packet kind.
type PacketType uint8

// Packet kinds, in the order of the Intel SDM "Packet Definitions" section
// (plus the newer packets the SDM added later).
const (
	PktInvalid   PacketType = iota // zero value; Next returns it only for an SKZ84-corrupted TMA
	PktPad                         // PAD
	PktPSB                         // PSB
	PktPSBEnd                      // PSBEND
	PktTNT8                        // short TNT
	PktTNT64                       // long TNT
	PktTIP                         // TIP
	PktTIPPGE                      // TIP.PGE
	PktTIPPGD                      // TIP.PGD
	PktFUP                         // FUP
	PktPIP                         // PIP
	PktModeExec                    // MODE.Exec
	PktModeTSX                     // MODE.TSX
	PktTraceStop                   // TraceStop
	PktCBR                         // CBR
	PktTSC                         // TSC
	PktMTC                         // MTC
	PktTMA                         // TMA
	PktCYC                         // CYC
	PktVMCS                        // VMCS
	PktOVF                         // OVF
	PktMNT                         // MNT
	PktPTW                         // PTWRITE
	PktExStop                      // EXSTOP
	PktMWait                       // MWAIT
	PktPwrE                        // PWRE
	PktPwrX                        // PWRX
	PktBBP                         // Block Begin Packet (PEBS via PT)
	PktBIP                         // Block Item Packet
	PktBEP                         // Block End Packet
	PktCFE                         // Control Flow Event
	PktEVD                         // Event Data
	PktTrig                        // TRIG (trigger tracing)
	numPacketTypes
)

var packetTypeNames = [numPacketTypes]string{
	PktInvalid:   "invalid",
	PktPad:       "pad",
	PktPSB:       "psb",
	PktPSBEnd:    "psbend",
	PktTNT8:      "tnt.8",
	PktTNT64:     "tnt.64",
	PktTIP:       "tip",
	PktTIPPGE:    "tip.pge",
	PktTIPPGD:    "tip.pgd",
	PktFUP:       "fup",
	PktPIP:       "pip",
	PktModeExec:  "mode.exec",
	PktModeTSX:   "mode.tsx",
	PktTraceStop: "stop",
	PktCBR:       "cbr",
	PktTSC:       "tsc",
	PktMTC:       "mtc",
	PktTMA:       "tma",
	PktCYC:       "cyc",
	PktVMCS:      "vmcs",
	PktOVF:       "ovf",
	PktMNT:       "mnt",
	PktPTW:       "ptw",
	PktExStop:    "exstop",
	PktMWait:     "mwait",
	PktPwrE:      "pwre",
	PktPwrX:      "pwrx",
	PktBBP:       "bbp",
	PktBIP:       "bip",
	PktBEP:       "bep",
	PktCFE:       "cfe",
	PktEVD:       "evd",
	PktTrig:      "trig",
}

// String returns the packet's name as ptdump prints it ("tip.pge").
func (t PacketType) String() string {
	if t < numPacketTypes {
		return packetTypeNames[t]
	}
	return fmt.Sprintf("PacketType(%d)", uint8(t))
}

// IPCompression is the IPBytes field of an IP packet (TIP, TIP.PGE, TIP.PGD,
// FUP): how the payload combines with the last IP.
type IPCompression uint8

// IP compressions; the values are the field's encoding.
const (
	IPSuppressed IPCompression = 0 // no payload, IP out of context
	IPUpdate16   IPCompression = 1 // payload [15:0], upper from last IP
	IPUpdate32   IPCompression = 2 // payload [31:0], upper from last IP
	IPSext48     IPCompression = 3 // payload [47:0], sign-extended
	IPUpdate48   IPCompression = 4 // payload [47:0], upper from last IP
	IPFull       IPCompression = 6 // payload [63:0]
)

// ipcSize is the payload size in bytes of each compression; -1 = reserved.
var ipcSize = [8]int8{0, 2, 4, 6, 6, -1, 8, -1}

// PayloadSize returns the number of payload bytes of the compression, or -1
// for a reserved encoding (5, 7).
func (c IPCompression) PayloadSize() int {
	if c > 7 {
		return -1
	}
	return int(ipcSize[c])
}

// CFE types (Control Flow Event, SDM table "CFE Packet Type and Vector
// Fields").
const (
	CFEIntr       = 1
	CFEIRet       = 2
	CFESMI        = 3
	CFERSM        = 4
	CFESIPI       = 5
	CFEInit       = 6
	CFEVMEntry    = 7
	CFEVMExit     = 8
	CFEVMExitIntr = 9
	CFEShutdown   = 10
	CFEUIntr      = 12
	CFEUIRet      = 13
	CFESWIntr     = 14
	CFESyscall    = 15
)

// EVD types (Event Data).
const (
	EVDCR2  = 0 // page-fault linear address
	EVDVMXQ = 1 // VMX exit qualification
	EVDVMXR = 2 // VMX exit reason
)

// Packet is one decoded Intel PT packet. The decoder fills a caller-owned
// Packet and never allocates; only the fields of the packet's Type are
// meaningful, all others are zero.
type Packet struct {
	Type PacketType
	Size uint8 // encoded size in bytes

	// TIP, TIP.PGE, TIP.PGD, FUP: the compression and the raw
	// (zero-extended, not yet combined with the last IP) payload.
	IPC IPCompression
	IP  uint64

	// TNT-8, TNT-64: TNTBits branch outcomes, the oldest in bit
	// TNTBits-1 and the youngest in bit 0 (1 = taken), stop bit removed
	// (libipt's pt_packet_tnt).
	TNTBits    uint8
	TNTPayload uint64

	// Payload is the packet's main value: TSC (TSC value), CYC (cycle
	// counter), PIP (CR3, already shifted into place), VMCS (VMCS base
	// address, shifted into place), MNT, PTW, EVD and BIP (payload).
	Payload uint64

	// IPBit is the "IP" flag of PTW, EXSTOP, BEP, CFE and TRIG: a FUP
	// with the IP follows.
	IPBit bool

	// PIP: the NR (non-root) flag.
	NR bool

	// MODE.Exec: CS.L, CS.D and RFLAGS.IF. MODE.TSX: InTX and Abort.
	CSL, CSD, IF bool
	InTX, Abort  bool

	// CBR: the core:bus ratio. MTC: CTC[N+7:N]. TMA: CTC[15:0] and the
	// 9-bit fast counter.
	CBR uint8
	MTC uint8
	CTC uint16
	FC  uint16

	// PTW: the payload size code (0 = 4 bytes, 1 = 8 bytes).
	PLC uint8

	// MWAIT: EAX hints and ECX extensions (only bit 0 defined).
	Hints, Ext uint32

	// PWRE: target C-state and sub-state (encoded as in the MWAIT hint,
	// i.e. C0 is 0xf) and the HW flag. PWRX: last and deepest core
	// C-state and the wake reason.
	State, SubState           uint8
	HW                        bool
	LastCState, DeepestCState uint8
	WakeInterrupt, WakeStore  bool
	WakeAutonomous            bool

	// CFE: type and vector. EVD: type. BBP: type and the SZ flag
	// (BIP payloads are 8 bytes when set, else 4). BIP: ID.
	EvType uint8
	Vector uint8
	SZ     bool
	ID     uint8

	// TRIG: the trigger bit vector, MULT flag and, if ICNTValid, the
	// instruction count.
	TRBV      uint8
	Mult      bool
	ICNTValid bool
	ICNT      uint16
}

// Errors returned by the packet decoder, always wrapped in a *DecodeError
// carrying the trace offset. The texts are libipt's pt_errstr, which ptdump
// prints.
var (
	ErrBadOpcode = errors.New("unknown opcode")
	ErrBadPacket = errors.New("unknown packet")
	ErrEOS       = errors.New("reached end of trace stream")
	ErrNoSync    = errors.New("decoder out of sync")
)

// DecodeError is an error at a trace offset. IP is the instruction pointer
// when the layer that failed knows it (HasIP).
type DecodeError struct {
	Offset uint64
	IP     uint64
	HasIP  bool
	Err    error
}

func (e *DecodeError) Error() string {
	if e.HasIP {
		return fmt.Sprintf("trace offset %#x, ip %#x: %v", e.Offset, e.IP, e.Err)
	}
	return fmt.Sprintf("trace offset %#x: %v", e.Offset, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// PacketDecoder walks the packets of an Intel PT buffer.
//
// It starts unsynchronized: call SyncForward (or SyncSet) before Next. After
// an error, Next keeps returning errors at the same offset; the recovery is
// SyncForward to the next PSB.
type PacketDecoder struct {
	buf    []byte
	cfg    Config
	pos    uint64 // offset of the next packet; ^0 when not synchronized
	sync   uint64 // offset of the last PSB synchronized to
	synced bool
	// inBlock is set between a BBP and the next BEP/PSB/OVF: only there
	// are bytes ending in 0b100 BIP packets rather than TNT-8 (SDM:
	// "BIP packets only occur between BBP and BEP").
	inBlock bool
	bipSize uint8
}

// NewPacketDecoder returns a decoder over buf. cfg may be nil (no errata,
// no timing parameters). The decoder does not copy buf.
func NewPacketDecoder(buf []byte, cfg *Config) *PacketDecoder {
	d := &PacketDecoder{buf: buf}
	if cfg != nil {
		d.cfg = *cfg
	}
	return d
}

// Config returns the decoder's configuration.
func (d *PacketDecoder) Config() *Config { return &d.cfg }

// Buffer returns the trace buffer.
func (d *PacketDecoder) Buffer() []byte { return d.buf }

// Offset returns the offset of the next packet Next will decode.
func (d *PacketDecoder) Offset() uint64 { return d.pos }

// SyncOffset returns the offset of the PSB the decoder last synchronized
// to.
func (d *PacketDecoder) SyncOffset() uint64 { return d.sync }

// PSBPattern is the 16-byte PSB packet (read-only).
var PSBPattern = [16]byte{2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82}

// isPSB reports whether a full PSB starts at off.
func (d *PacketDecoder) isPSB(off uint64) bool {
	if off > uint64(len(d.buf)) || uint64(len(d.buf))-off < sizePSB {
		return false
	}
	return [16]byte(d.buf[off:off+sizePSB]) == PSBPattern
}

// findPSB locates the PSB around a 64-bit word of PSB payload pattern at
// off: it walks to the end of the run of 02 82 pairs and backs up one PSB.
// This is libipt's pt_find_psb, so a run longer than one PSB (a PSB
// preceded by stray pattern bytes) syncs to the last 16 bytes, as ptdump
// does.
func (d *PacketDecoder) findPSB(off uint64) (uint64, bool) {
	n := uint64(len(d.buf))
	if d.buf[off] != 0x02 {
		off++
	}
	for ; off+1 < n; off += 2 {
		if d.buf[off] != 0x02 || d.buf[off+1] != 0x82 {
			break
		}
	}
	if off < sizePSB {
		return 0, false
	}
	off -= sizePSB
	return off, d.isPSB(off)
}

// syncForward returns the first PSB that starts at or after start, found
// through an 8-byte aligned search for the PSB payload pattern (libipt's
// pt_sync_forward).
func (d *PacketDecoder) syncForward(start uint64) (uint64, bool) {
	n := uint64(len(d.buf))
	for pos := (start + 7) &^ 7; pos+8 <= n; pos += 8 {
		w := d.buf[pos : pos+8 : pos+8]
		if w[0] != w[2] || w[0] != w[4] || w[0] != w[6] ||
			w[1] != w[3] || w[1] != w[5] || w[1] != w[7] {
			continue
		}
		if !(w[0] == 0x02 && w[1] == 0x82) && !(w[0] == 0x82 && w[1] == 0x02) {
			continue
		}
		psb, ok := d.findPSB(pos)
		if !ok || psb < start {
			continue
		}
		return psb, true
	}
	return 0, false
}

// SyncForward moves to the next PSB after the current position (the first
// PSB in the buffer if never synchronized), including a PSB that the
// previous (bad) packet partially overlapped. It returns a *DecodeError
// wrapping ErrEOS when there is none.
func (d *PacketDecoder) SyncForward() error {
	pos := uint64(0)
	if d.synced {
		pos = d.pos
		if pos == d.sync {
			pos += sizePSB
		}
	}
	if pos > uint64(len(d.buf)) {
		pos = uint64(len(d.buf))
	}
	// Start a bit earlier so we find a PSB partially consumed by a
	// preceding packet.
	back := pos
	if back >= sizePSB {
		back = sizePSB - 1
	}
	off, ok := d.syncForward(pos - back)
	if !ok {
		return &DecodeError{Offset: uint64(len(d.buf)), Err: ErrEOS}
	}
	d.pos, d.sync, d.synced = off, off, true
	d.inBlock = false
	return nil
}

// SyncSet sets the position to off, which must be inside the buffer or at
// its end. No PSB check is made (libipt's pt_pkt_sync_set): decoding starts
// there.
func (d *PacketDecoder) SyncSet(off uint64) error {
	if off > uint64(len(d.buf)) {
		return &DecodeError{Offset: off, Err: ErrEOS}
	}
	d.pos, d.sync, d.synced = off, off, true
	d.inBlock = false
	return nil
}

// Next decodes the packet at the current position into p and advances.
// At the end of the buffer, or when the packet is cut short by it, it
// returns a *DecodeError wrapping ErrEOS (test with IsEOS). On a bad packet
// it returns a *DecodeError with the packet's offset (ErrBadOpcode,
// ErrBadPacket) and does not advance. Next does not allocate.
func (d *PacketDecoder) Next(p *Packet) error {
	if !d.synced {
		return &DecodeError{Offset: d.pos, Err: ErrNoSync}
	}
	n, err := d.decodeAt(d.pos, p)
	if err != nil {
		return &DecodeError{Offset: d.pos, Err: err}
	}
	d.pos += uint64(n)
	return nil
}

// NextMTC decodes the next packet into p and reports true when it is an
// MTC, whose only fields are Type, Size and MTC: the decoder's one hot
// packet where timing packets are dense (soft PT writes one MTC per
// instruction), read without Next's general dispatch. Anything else (or
// the end of the trace) consumes nothing and reports false, for Next.
//
// Precondition: p holds an MTC, a TNT-8 or a TNT-64 (only Type, Size,
// MTC, TNTBits and TNTPayload may be non-zero).
func (d *PacketDecoder) NextMTC(p *Packet) bool {
	pos := d.pos
	if !d.synced || pos+1 >= uint64(len(d.buf)) || d.buf[pos] != opcMTC {
		return false
	}
	p.Type, p.Size, p.MTC, p.TNTBits, p.TNTPayload = PktMTC, 2, d.buf[pos+1], 0, 0
	d.pos = pos + 2
	return true
}

// NextTNT8 is NextMTC for a TNT-8: the packet after a run of MTCs in a
// soft-PT trace. (A BIP context takes bytes that look like TNT-8s: false.)
//
// Precondition: as NextMTC's; p was decoded by d (so d is synchronized).
func (d *PacketDecoder) NextTNT8(p *Packet) bool {
	pos := d.pos
	if pos >= uint64(len(d.buf)) || d.inBlock {
		return false
	}
	op := d.buf[pos]
	if !isTNT8(op) {
		return false
	}
	p.MTC = 0
	decodeTNT(p, PktTNT8, uint64(op>>1), 1)
	d.pos = pos + 1
	return true
}

// isTNT8 reports whether op opens a TNT-8 (outside a BBP block): bits 7:1
// are the outcomes and a stop bit; not PAD, not the extended opcode.
func isTNT8(op byte) bool { return op&1 == 0 && op > opcExt }

// IsEOS reports whether err means the decoder reached the end of the trace.
func IsEOS(err error) bool { return errors.Is(err, ErrEOS) || errors.Is(err, io.EOF) }
