package ptpkt

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// allPacketKinds holds one or more packets of every kind and every IP
// compression, with boundary values.
var allPacketKinds = []Packet{
	{Type: PktPad},
	{Type: PktPSB},
	{Type: PktPSBEnd},
	{Type: PktTNT8, TNTBits: 1, TNTPayload: 1},
	{Type: PktTNT8, TNTBits: 6, TNTPayload: 0x2a},
	{Type: PktTNT64, TNTBits: 1, TNTPayload: 0},
	{Type: PktTNT64, TNTBits: 47, TNTPayload: 0x5555_5555_5555},
	{Type: PktTIP, IPC: IPSuppressed},
	{Type: PktTIP, IPC: IPUpdate16, IP: 0xbeef},
	{Type: PktTIP, IPC: IPUpdate32, IP: 0xdeadbeef},
	{Type: PktTIP, IPC: IPSext48, IP: 0xffff_8000_1234},
	{Type: PktTIP, IPC: IPUpdate48, IP: 0x7fff_ffff_f000},
	{Type: PktTIP, IPC: IPFull, IP: 0xffff_ffff_8100_0000},
	{Type: PktTIPPGE, IPC: IPUpdate32, IP: 0x400000},
	{Type: PktTIPPGE, IPC: IPFull, IP: 1},
	{Type: PktTIPPGD, IPC: IPSuppressed},
	{Type: PktTIPPGD, IPC: IPUpdate16, IP: 0x1},
	{Type: PktFUP, IPC: IPSext48, IP: 0x0000_7fff_0000},
	{Type: PktFUP, IPC: IPUpdate48, IP: 0x1234_5678_9abc},
	{Type: PktPIP, Payload: 0xafafa0, NR: true},
	{Type: PktPIP, Payload: 0x000f_ffff_ffff_ffe0},
	{Type: PktModeExec, CSL: true},
	{Type: PktModeExec, CSD: true, IF: true},
	{Type: PktModeExec},
	{Type: PktModeTSX, InTX: true},
	{Type: PktModeTSX, Abort: true},
	{Type: PktTraceStop},
	{Type: PktCBR, CBR: 0x24},
	{Type: PktTSC, Payload: 0x00ff_ffff_ffff_ffff},
	{Type: PktMTC, MTC: 0x94},
	{Type: PktTMA, CTC: 0xffff, FC: 0x1ff},
	{Type: PktCYC, Payload: 0},
	{Type: PktCYC, Payload: 0x1f},
	{Type: PktCYC, Payload: 0x20},
	{Type: PktCYC, Payload: 0xfff},
	{Type: PktCYC, Payload: 1<<61 - 1},
	{Type: PktVMCS, Payload: 0xabcd000},
	{Type: PktOVF},
	{Type: PktMNT, Payload: 0x2a2242e5d4c3b2a1},
	{Type: PktPTW, PLC: 0, Payload: 0x90abcdef, IPBit: true},
	{Type: PktPTW, PLC: 1, Payload: 0x1234567890abcdef},
	{Type: PktExStop},
	{Type: PktExStop, IPBit: true},
	{Type: PktMWait, Hints: 0xb, Ext: 1},
	{Type: PktPwrE, State: 0xf, SubState: 0xf, HW: true},
	{Type: PktPwrX, LastCState: 0, DeepestCState: 5, WakeInterrupt: true},
	{Type: PktPwrX, LastCState: 2, DeepestCState: 3, WakeStore: true, WakeAutonomous: true},
	{Type: PktBBP, SZ: true, EvType: 0x11},
	{Type: PktBIP, ID: 0x1f, SZ: true, Payload: 0x0123456789abcdef},
	{Type: PktBEP, IPBit: true},
	{Type: PktBBP, EvType: 1},
	{Type: PktBIP, ID: 3, Payload: 0xcafef00d},
	{Type: PktBEP},
	{Type: PktCFE, EvType: CFEIntr, Vector: 14, IPBit: true},
	{Type: PktCFE, EvType: 31},
	{Type: PktEVD, EvType: EVDVMXR, Payload: 0xf00baa},
	{Type: PktTrig, TRBV: 0xa1, Mult: true},
	{Type: PktTrig, TRBV: 0x1a, IPBit: true, ICNTValid: true, ICNT: 0xffff},
}

// TestPacketRoundTrip encodes every packet kind, decodes the whole stream
// and compares packet by packet, offset by offset.
func TestPacketRoundTrip(t *testing.T) {
	var buf []byte
	var offs []uint64
	for i := range allPacketKinds {
		offs = append(offs, uint64(len(buf)))
		var err error
		if buf, err = AppendPacket(buf, &allPacketKinds[i]); err != nil {
			t.Fatalf("encode %d (%s): %v", i, allPacketKinds[i].Type, err)
		}
	}
	dec := NewPacketDecoder(buf, nil)
	if err := dec.SyncForward(); err != nil {
		t.Fatal(err)
	}
	// allPacketKinds[1] is the PSB; sync lands there.
	if dec.Offset() != offs[1] {
		t.Fatalf("synced at %#x, want %#x", dec.Offset(), offs[1])
	}
	var p Packet
	for i := 1; i < len(allPacketKinds); i++ {
		want := allPacketKinds[i]
		if dec.Offset() != offs[i] {
			t.Fatalf("packet %d (%s) at %#x, want %#x", i, want.Type, dec.Offset(), offs[i])
		}
		if err := dec.Next(&p); err != nil {
			t.Fatalf("packet %d (%s): %v", i, want.Type, err)
		}
		n, _ := want.EncodedSize()
		want.Size = uint8(n)
		if p != want {
			t.Errorf("packet %d:\n got %+v\nwant %+v", i, p, want)
		}
	}
	if err := dec.Next(&p); !IsEOS(err) {
		t.Errorf("after the last packet: %v, want end of stream", err)
	}
}

// TestPacketEncodeKnownBytes checks the encoder against bytes libipt's
// encoder produced (the corpus's dump-all-packets.pt, decoded by libipt's
// ptdump into the .exp the conformance test checks).
func TestPacketEncodeKnownBytes(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	for _, r := range testenv.CorpusIndex(t, dir) {
		pt := testenv.ReadExpected(t, filepath.Join(dir, r.PT))
		dec := NewPacketDecoder(pt, nil)
		if err := dec.SyncSet(0); err != nil {
			t.Fatal(err)
		}
		var p Packet
		var enc [MaxPacketSize]byte
		for {
			off := dec.Offset()
			err := dec.Next(&p)
			if IsEOS(err) {
				break
			}
			if err != nil {
				if err := dec.SyncForward(); err != nil {
					break
				}
				continue
			}
			n, err := p.Encode(enc[:])
			if err != nil {
				t.Errorf("%s: %#x: re-encoding %s: %v", r.Name, off, p.Type, err)
				continue
			}
			orig := pt[off : off+uint64(p.Size)]
			if !bytes.Equal(enc[:n], orig) {
				t.Errorf("%s: %#x: %s re-encodes to % x, libipt wrote % x", r.Name, off, p.Type, enc[:n], orig)
			}
		}
	}
}

func psbThen(b ...byte) []byte { return append(PSBPattern[:], b...) }

// TestPacketDecodeErrors checks that every bad or truncated packet is
// reported with its offset and the right error.
func TestPacketDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
		cfg  *Config
		want error
		off  uint64 // 0 means 0x10, right after the PSB
	}{
		{"bad opcode c9", psbThen(0xc9), nil, ErrBadOpcode, 0},
		{"bad opcode 05", psbThen(0x05), nil, ErrBadOpcode, 0},
		{"bad ext opcode", psbThen(0x02, 0x04), nil, ErrBadOpcode, 0},
		{"bad ext2 opcode", psbThen(0x02, 0xc3, 0x00, 0, 0, 0, 0, 0, 0, 0, 0), nil, ErrBadOpcode, 0},
		{"bbp without sz is fine, 02 63 truncated", psbThen(0x02, 0x63), nil, ErrEOS, 0},
		{"reserved ipc 5", psbThen(0xad, 0, 0, 0, 0, 0, 0), nil, ErrBadPacket, 0},
		{"reserved ipc 7", psbThen(0xfd, 0, 0, 0, 0, 0, 0, 0, 0), nil, ErrBadPacket, 0},
		{"mode leaf 2", psbThen(0x99, 0x40), nil, ErrBadPacket, 0},
		{"tnt64 without stop bit", psbThen(0x02, 0xa3, 0, 0, 0, 0, 0, 0), nil, ErrBadPacket, 0},
		{"tma reserved byte", psbThen(0x02, 0x73, 1, 1, 1, 1, 0), nil, ErrBadPacket, 0},
		{"tma fc bit 9", psbThen(0x02, 0x73, 1, 1, 0, 1, 2), nil, ErrBadPacket, 0},
		{"ptw payload size 2", psbThen(0x02, 0x52, 0, 0, 0, 0, 0, 0, 0, 0), nil, ErrBadPacket, 0},
		{"cyc over 64 bits", psbThen(0x07, 3, 3, 3, 3, 3, 3, 3, 3, 2), nil, ErrBadPacket, 0},
		{"partial psb", psbThen(0x00, 0x02, 0x82, 0x02, 0x82, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), nil, ErrBadPacket, 0x11},
		{"truncated tsc", psbThen(0x19, 1, 2, 3), nil, ErrEOS, 0},
		{"truncated tip", psbThen(0x4d, 1), nil, ErrEOS, 0},
		{"truncated cyc", psbThen(0x07, 0x01), nil, ErrEOS, 0},
		{"truncated ext", psbThen(0x02), nil, ErrEOS, 0},
		{"truncated mnt", psbThen(0x02, 0xc3, 0x88, 1), nil, ErrEOS, 0},
		{"truncated trig icnt", psbThen(0xd9, 0x40, 1, 2), nil, ErrEOS, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dec := NewPacketDecoder(tc.in, tc.cfg)
			if err := dec.SyncForward(); err != nil {
				t.Fatal(err)
			}
			var p Packet
			if err := dec.Next(&p); err != nil || p.Type != PktPSB {
				t.Fatalf("first packet: %v %v", p.Type, err)
			}
			want := tc.off
			if want == 0 {
				want = 0x10
			}
			for dec.Offset() < want {
				if err := dec.Next(&p); err != nil {
					t.Fatalf("before %#x: %v", want, err)
				}
			}
			err := dec.Next(&p)
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("got %v, want a *DecodeError", err)
			}
			if !errors.Is(err, tc.want) || de.Offset != want {
				t.Errorf("got %v (offset %#x), want %v at %#x", err, de.Offset, tc.want, want)
			}
			// The decoder does not advance past a bad packet.
			if dec.Offset() != want {
				t.Errorf("offset after error %#x, want %#x", dec.Offset(), want)
			}
		})
	}
}

func TestPacketErrata(t *testing.T) {
	skz84 := &Config{Errata: Errata{SKZ84: true}}
	dec := NewPacketDecoder(psbThen(0x02, 0x73, 1, 1, 1, 1, 0, 0xff, 0x00), skz84)
	var p Packet
	dec.SyncForward()
	dec.Next(&p)
	if err := dec.Next(&p); err != nil || p.Type != PktInvalid || p.Size != 8 {
		t.Errorf("SKZ84 corrupt TMA: got %v size %d, %v; want invalid size 8", p.Type, p.Size, err)
	}
	if err := dec.Next(&p); err != nil || p.Type != PktPad {
		t.Errorf("after SKZ84 TMA: got %v, %v; want pad", p.Type, err)
	}

	// SKD007: a 2-byte CYC that looks like "cyc, 02 (ext)" followed by
	// f3 is the first byte of a CYC and an OVF.
	skd007 := &Config{Errata: Errata{SKD007: true}}
	for _, cfg := range []*Config{nil, skd007} {
		dec = NewPacketDecoder(psbThen(0x0f, 0x02, 0xf3, 0x00), cfg)
		dec.SyncForward()
		dec.Next(&p)
		err := dec.Next(&p)
		if cfg == nil {
			if err != nil || p.Type != PktCYC || p.Size != 2 {
				t.Errorf("no errata: got %v size %d, %v; want a 2-byte cyc", p.Type, p.Size, err)
			}
			continue
		}
		if err != nil || p.Type != PktOVF || dec.Offset() != 19 {
			t.Errorf("SKD007: got %v at next offset %#x, %v; want ovf, next at 0x13", p.Type, dec.Offset(), err)
		}
	}
}

func TestPacketSync(t *testing.T) {
	var p Packet
	// Next before any sync.
	dec := NewPacketDecoder(psbThen(), nil)
	if err := dec.Next(&p); !errors.Is(err, ErrNoSync) {
		t.Errorf("Next before sync: %v, want ErrNoSync", err)
	}
	// No PSB at all.
	dec = NewPacketDecoder(bytes.Repeat([]byte{0}, 100), nil)
	if err := dec.SyncForward(); !IsEOS(err) {
		t.Errorf("SyncForward without PSB: %v, want end of stream", err)
	}
	// Resync after an error skips to the next PSB, also one at an odd
	// offset that the bad packet partially overlapped.
	in := psbThen(0x00, 0xc9, 0x19)   // bad opcode at 0x11; TSC opcode eats 7 bytes of the next PSB
	in = append(in, PSBPattern[:]...) // PSB at 0x13
	in = append(in, 0x02, 0x23)       // PSBEND at 0x23
	in = append(in, 0x00, 0x00, 0x00) // pad
	in = append(in, PSBPattern[:]...) // PSB at 0x28
	in = append(in, 0xc9)             // bad at 0x38
	dec = NewPacketDecoder(in, nil)
	if err := dec.SyncForward(); err != nil || dec.SyncOffset() != 0 {
		t.Fatalf("first sync: %v at %#x", err, dec.SyncOffset())
	}
	dec.Next(&p)
	dec.Next(&p)
	if err := dec.Next(&p); !errors.Is(err, ErrBadOpcode) {
		t.Fatalf("want bad opcode at 0x11, got %v", err)
	}
	if err := dec.SyncForward(); err != nil || dec.Offset() != 0x13 {
		t.Fatalf("resync: %v at %#x, want 0x13", err, dec.Offset())
	}
	if err := dec.SyncForward(); err != nil || dec.Offset() != 0x28 {
		t.Fatalf("second resync: %v at %#x, want 0x28", err, dec.Offset())
	}
	if err := dec.SyncForward(); !IsEOS(err) {
		t.Fatalf("third resync: %v, want end of stream", err)
	}
	// SyncSet needs no PSB.
	if err := dec.SyncSet(0x25); err != nil || dec.Next(&p) != nil || p.Type != PktPad {
		t.Errorf("SyncSet(0x25): %v", p.Type)
	}
	if err := dec.SyncSet(uint64(len(in) + 1)); !IsEOS(err) {
		t.Errorf("SyncSet past the end: %v", err)
	}
}

func TestPacketEncodeErrors(t *testing.T) {
	bad := []Packet{
		{Type: PktTNT8, TNTBits: 7},
		{Type: PktTNT8, TNTBits: 0},
		{Type: PktTNT8, TNTBits: 2, TNTPayload: 4},
		{Type: PktTNT64, TNTBits: 48},
		{Type: PktTIP, IPC: 5},
		{Type: PktFUP, IPC: IPUpdate16, IP: 0x10000},
		{Type: PktPIP, Payload: 0x10},
		{Type: PktTSC, Payload: 1 << 56},
		{Type: PktCYC, Payload: 1 << 61},
		{Type: PktTMA, FC: 0x200},
		{Type: PktVMCS, Payload: 0x1001},
		{Type: PktPTW, PLC: 2},
		{Type: PktPTW, PLC: 0, Payload: 1 << 32},
		{Type: PktPwrE, State: 16},
		{Type: PktCFE, EvType: 32},
		{Type: PktTrig, ICNT: 1},
		{Type: PktInvalid},
	}
	for _, p := range bad {
		var ee *EncodeError
		if _, err := p.Encode(make([]byte, 16)); !errors.As(err, &ee) {
			t.Errorf("%+v: got %v, want an EncodeError", p, err)
		}
	}
	p := Packet{Type: PktPSB}
	if _, err := p.Encode(make([]byte, 15)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("PSB into 15 bytes: %v", err)
	}
}

func TestPacketNextDoesNotAllocate(t *testing.T) {
	pt, err := os.ReadFile(filepath.Join(testenv.ConformanceDir(t), "synthetic", "small.pt"))
	if err != nil {
		t.Fatal(err)
	}
	dec := NewPacketDecoder(pt, nil)
	var p Packet
	n := 0
	for dec.SyncSet(0); dec.Next(&p) == nil; n++ {
	}
	// Only reaching the end allocates (the *DecodeError).
	allocs := testing.AllocsPerRun(5, func() {
		dec.SyncSet(0)
		for i := 0; i < n; i++ {
			if err := dec.Next(&p); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n < 1000 || allocs != 0 {
		t.Errorf("decoding %d packets of small.pt allocates %v times", n, allocs)
	}
}

// BenchmarkPacketDecode decodes synthetic/mid.pt (648 KB) packet by packet.
func BenchmarkPacketDecode(b *testing.B) {
	pt, err := os.ReadFile(filepath.Join(testenv.ConformanceDir(b), "synthetic", "mid.pt"))
	if err != nil {
		b.Fatal(err)
	}
	dec := NewPacketDecoder(pt, nil)
	var p Packet
	b.SetBytes(int64(len(pt)))
	b.ReportAllocs()
	n := 0
	for i := 0; i < b.N; i++ {
		dec.SyncSet(0)
		for dec.Next(&p) == nil {
			n++
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "packets/op")
}

// TestPacketBlockContext checks that a byte ending in 0b100 is a BIP only
// between BBP and BEP (SDM: BIP is only valid inside a block) and a TNT-8
// elsewhere.
func TestPacketBlockContext(t *testing.T) {
	in := psbThen(0x0c)                                             // TNT-8 "!." outside a block
	in = append(in, 0x02, 0x63, 0x01)                               // BBP, 4-byte items
	in = append(in, 0x0c, 1, 2, 3, 4)                               // BIP id 1
	in = append(in, 0x02, 0x33)                                     // BEP
	in = append(in, 0x0c)                                           // TNT-8 again
	in = append(in, 0x02, 0x63, 0x81, 0x14, 1, 2, 3, 4, 5, 6, 7, 8) // BBP sz, BIP id 2 (8 bytes)
	in = append(in, PSBPattern[:]...)                               // a PSB ends the block
	in = append(in, 0x0c)
	want := []Packet{
		{Type: PktPSB, Size: 16},
		{Type: PktTNT8, Size: 1, TNTBits: 2, TNTPayload: 2},
		{Type: PktBBP, Size: 3, EvType: 1},
		{Type: PktBIP, Size: 5, ID: 1, Payload: 0x04030201},
		{Type: PktBEP, Size: 2},
		{Type: PktTNT8, Size: 1, TNTBits: 2, TNTPayload: 2},
		{Type: PktBBP, Size: 3, EvType: 1, SZ: true},
		{Type: PktBIP, Size: 9, ID: 2, SZ: true, Payload: 0x0807060504030201},
		{Type: PktPSB, Size: 16},
		{Type: PktTNT8, Size: 1, TNTBits: 2, TNTPayload: 2},
	}
	dec := NewPacketDecoder(in, nil)
	if err := dec.SyncForward(); err != nil {
		t.Fatal(err)
	}
	var p Packet
	for i, w := range want {
		if err := dec.Next(&p); err != nil || p != w {
			t.Fatalf("packet %d: got %+v (%v), want %+v", i, p, err, w)
		}
	}
	if err := dec.Next(&p); !IsEOS(err) {
		t.Errorf("at the end: %v", err)
	}
}

func TestHostCPU(t *testing.T) {
	c, err := HostCPU()
	if err != nil || c.Family == 0 {
		t.Fatalf("HostCPU: %+v, %v", c, err)
	}
	// An AMD or other non-Intel host decodes by the spec: no errata.
	if c.Vendor != VendorIntel {
		if _, err := c.Errata(); !errors.Is(err, ErrUnknownCPU) {
			t.Errorf("non-Intel cpu %+v: errata error %v", c, err)
		}
	}
}

// TestNextMTC: NextMTC takes exactly the MTC packets Next would, with the
// same fields, and consumes nothing otherwise (another packet, an MTC cut
// by the end of the trace, an unsynchronized decoder).
func TestNextMTC(t *testing.T) {
	// After the PSB: MTC 0x11, MTC 0xff, TNT-8, MTC 0x22, PAD, then an
	// MTC opcode with no payload byte.
	in := psbThen(0x59, 0x11, 0x59, 0xff, 0x06, 0x59, 0x22, 0x00, 0x59)
	var want []Packet
	ref := NewPacketDecoder(in, nil)
	if err := ref.SyncForward(); err != nil {
		t.Fatal(err)
	}
	for {
		var p Packet
		if err := ref.Next(&p); err != nil {
			break
		}
		want = append(want, p)
	}

	unsynced := NewPacketDecoder(in, nil)
	var p Packet
	if unsynced.NextMTC(&p) || p != (Packet{}) {
		t.Errorf("NextMTC before sync: true or %+v", p)
	}

	dec := NewPacketDecoder(in, nil)
	if err := dec.SyncForward(); err != nil {
		t.Fatal(err)
	}
	var got []Packet
	mtcs := 0
	for {
		before := dec.Offset()
		var q Packet
		if len(got) > 0 && got[len(got)-1].Type == PktMTC {
			q = got[len(got)-1] // the precondition: p holds the previous MTC
		}
		if dec.NextMTC(&q) {
			mtcs++
			got = append(got, q)
			continue
		}
		if dec.Offset() != before {
			t.Fatalf("NextMTC reported false and moved from %#x to %#x", before, dec.Offset())
		}
		q = Packet{}
		if err := dec.Next(&q); err != nil {
			break
		}
		got = append(got, q)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d packets, want %d:\n%+v\n%+v", len(got), len(want), got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("packet %d: NextMTC/Next gave %+v, Next alone %+v", i, got[i], want[i])
		}
	}
	if mtcs != 3 { // 0x11, 0xff and 0x22; the cut MTC at the end is Next's (end of trace)
		t.Errorf("NextMTC took %d packets, want 3", mtcs)
	}
}
