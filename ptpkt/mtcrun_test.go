package ptpkt

import (
	"math/rand"
	"testing"
)

// TestMTCRun drives one Timer packet by packet (UpdateMTC for every MTC:
// the libipt-conformant path TestTime and the corpus check) and another
// whose runs of MTCs go through MTCRun, over the same random streams, and
// requires the same state (every field of both) and the same decoder
// position after every packet that is not an MTC and at the end: MTC runs
// of every length, with wraps, lost MTCs (jumps past one wrap), CYC
// (calibration) between runs, TSC and TMA resets, runs followed by a TNT-8
// (which MTCRun reads) or by a BIP in a BBP block (which it must not),
// MTCs between a TSC and its TMA, the first MTC after a TMA, overflows,
// and CPUID 0x15 and MTC frequencies of every kind, bad ones included.
func TestMTCRun(t *testing.T) {
	cfgs := []Config{
		{CPUID15EAX: 1, CPUID15EBX: 1, MTCFreq: 0},
		{CPUID15EAX: 1, CPUID15EBX: 88, MTCFreq: 3},
		{CPUID15EAX: 2, CPUID15EBX: 216, MTCFreq: 3},
		{CPUID15EAX: 2, CPUID15EBX: 217, MTCFreq: 9},
		{CPUID15EAX: 3, CPUID15EBX: 250, MTCFreq: 6},
		{CPUID15EAX: 7, CPUID15EBX: 313, MTCFreq: 15},
		{CPUID15EAX: 1, CPUID15EBX: 1, MTCFreq: 24}, // the wrap is 2^32: none
		{CPUID15EAX: 1, CPUID15EBX: 1, MTCFreq: 30},
		{CPUID15EAX: 0, CPUID15EBX: 2, MTCFreq: 3}, // bad configuration
		{CPUID15EAX: 2, CPUID15EBX: 0, MTCFreq: 3},
	}
	rng := rand.New(rand.NewSource(1))
	fast := 0
	for ci := range cfgs {
		cfg := &cfgs[ci]
		for stream := 0; stream < 300; stream++ {
			pkts := randomTimingStream(rng)
			var buf []byte
			for i := range pkts {
				var err error
				if buf, err = AppendPacket(buf, &pkts[i]); err != nil {
					t.Fatal(err)
				}
			}
			fast += checkMTCRun(t, cfg, buf)
		}
	}
	// The fast loop must have run, or this compared UpdateMTC with itself.
	if fast == 0 {
		t.Fatal("no MTC went through the steady loop")
	}
}

// randomTimingStream is a PSB+ and a random mix of timing packets: mostly
// MTC runs whose CTC advances by small steps (so that the MTC's 8 bits
// wrap often), sometimes by a random jump.
func randomTimingStream(rng *rand.Rand) []Packet {
	pkts := []Packet{{Type: PktPSB}, {Type: PktTSC, Payload: rng.Uint64() >> 8},
		{Type: PktTMA, CTC: uint16(rng.Uint32()), FC: uint16(rng.Intn(512))}, {Type: PktPSBEnd}}
	mtc := uint8(rng.Uint32())
	for len(pkts) < 200 {
		switch r := rng.Intn(100); {
		case r < 70:
			for n := 1 + rng.Intn(8); n > 0; n-- {
				if rng.Intn(10) == 0 {
					mtc = uint8(rng.Uint32())
				} else {
					mtc += uint8(1 + rng.Intn(120))
				}
				pkts = append(pkts, Packet{Type: PktMTC, MTC: mtc})
			}
		case r < 85:
			pkts = append(pkts, Packet{Type: PktTNT8, TNTBits: 1, TNTPayload: uint64(rng.Intn(2))})
		case r < 93:
			pkts = append(pkts, Packet{Type: PktCYC, Payload: uint64(1 + rng.Intn(5000))})
		case r < 96:
			pkts = append(pkts, Packet{Type: PktTSC, Payload: rng.Uint64() >> 8})
			if rng.Intn(3) != 0 {
				pkts = append(pkts, Packet{Type: PktTMA, CTC: uint16(rng.Uint32()), FC: uint16(rng.Intn(512))})
			}
		case r < 97:
			pkts = append(pkts, Packet{Type: PktCBR, CBR: uint8(1 + rng.Intn(60))})
		case r < 99:
			// A BBP block with an MTC run before its BIP: the BIP's
			// first byte looks like a TNT-8, and is not one.
			pkts = append(pkts, Packet{Type: PktBBP, EvType: 1})
			for n := 1 + rng.Intn(3); n > 0; n-- {
				mtc += uint8(1 + rng.Intn(120))
				pkts = append(pkts, Packet{Type: PktMTC, MTC: mtc})
			}
			pkts = append(pkts, Packet{Type: PktBIP, ID: uint8(rng.Intn(32)), Payload: uint64(rng.Uint32())}, Packet{Type: PktBEP})
		default:
			pkts = append(pkts, Packet{Type: PktOVF})
		}
	}
	return pkts
}

// checkMTCRun decodes buf twice, as TestMTCRun says; it returns how many
// MTC packets the steady loop applied.
func checkMTCRun(t *testing.T, cfg *Config, buf []byte) int {
	t.Helper()
	// Both sides are Timers (libipt's per-packet driving); MTCRun takes
	// got's runs of MTCs.
	ref, got := NewTimer(cfg), NewTimer(cfg)
	rd, gd := NewPacketDecoder(buf, cfg), NewPacketDecoder(buf, cfg)
	if rd.SyncForward() != nil || gd.SyncForward() != nil {
		t.Fatal("no PSB")
	}
	var rp, gp Packet
	fast := 0
	afterRun := false // the last packet was a run's last MTC
	for {
		gerr := gd.Next(&gp)
		if gerr == nil && gp.Type == PktTNT8 && afterRun {
			t.Fatalf("offset %d: a TNT-8 after an MTC run that MTCRun did not take", gd.Offset())
		}
		afterRun = false
		if gerr == nil && gp.Type == PktMTC {
			before := gd.Offset()
			steady := got.Time.mtcSteady() && got.Cal.haveMTC && got.Cal.cycMTC == 0
			clock := NewMTCClock(cfg)
			tnt8 := gd.MTCRun(&gp, &got.Time, &got.Cal, &clock)
			end := gd.Offset() // after the run's last MTC
			if tnt8 {
				end--
			}
			// The reference applies the same run packet by packet.
			for {
				if err := rd.Next(&rp); err != nil || rp.Type != PktMTC {
					t.Fatalf("reference at %d: %v %v, want an MTC", rd.Offset(), rp.Type, err)
				}
				_ = ref.Packet(&rp)
				if rd.Offset() >= end {
					break
				}
			}
			if rd.Offset() != end {
				t.Fatalf("offset %d: MTCRun's run ends at %d, the reference's MTC at %d", before, end, rd.Offset())
			}
			if steady {
				fast += int(end-before)/2 + 1
			}
			if !tnt8 {
				if rp.MTC != gp.MTC {
					t.Fatalf("offset %d: MTCRun left MTC %#x, the last MTC of the run is %#x", gd.Offset(), gp.MTC, rp.MTC)
				}
				afterRun = true
			} else {
				// The TNT-8 it read: Next's packet, at Next's offset.
				rerr := rd.Next(&rp)
				if rerr != nil || rp != gp || rd.Offset() != gd.Offset() {
					t.Fatalf("offset %d: MTCRun read %+v ending at %d, Next %+v %v ending at %d", end, gp, gd.Offset(), rp, rerr, rd.Offset())
				}
				_ = ref.Packet(&rp)
				_ = got.Packet(&gp)
			}
		} else {
			rerr := rd.Next(&rp)
			if (gerr == nil) != (rerr == nil) || rp != gp {
				t.Fatalf("offset %d: %v %v, reference %v %v", gd.Offset(), gp.Type, gerr, rp.Type, rerr)
			}
			if gerr != nil {
				break
			}
			_ = ref.Packet(&rp)
			_ = got.Packet(&gp)
		}
		if got.Time != ref.Time || got.Cal != ref.Cal {
			t.Fatalf("CPUID 0x15 %d/%d, MTCFreq %d, after the packet ending at %d: MTCRun's state\n%+v\nUpdateMTC's\n%+v",
				cfg.CPUID15EBX, cfg.CPUID15EAX, cfg.MTCFreq, gd.Offset(), *got, *ref)
		}
	}
	return fast
}

// TestNextMTCTNT8 reads random streams with Next alone and with NextMTC,
// then NextTNT8, after every MTC and TNT (Next where both decline), and requires the same
// packets at the same offsets: MTC and TNT-8 among PADs, TNT-64, TIPs,
// CYCs, BBP blocks (where a byte ending in 0b100 is a BIP, not a TNT-8),
// and MTCs or TNTs cut by the end of the buffer.
func TestNextMTCTNT8(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	hot := 0
	for stream := 0; stream < 2000; stream++ {
		buf := append([]byte(nil), PSBPattern[:]...)
		for n := rng.Intn(60); n > 0; n-- {
			var p Packet
			switch r := rng.Intn(100); {
			case r < 35:
				p = Packet{Type: PktMTC, MTC: uint8(rng.Uint32())}
			case r < 65:
				bits := uint8(1 + rng.Intn(6))
				p = Packet{Type: PktTNT8, TNTBits: bits, TNTPayload: rng.Uint64() & (1<<bits - 1)}
			case r < 70:
				bits := uint8(1 + rng.Intn(47))
				p = Packet{Type: PktTNT64, TNTBits: bits, TNTPayload: rng.Uint64() & (1<<bits - 1)}
			case r < 75:
				p = Packet{Type: PktPad}
			case r < 80:
				p = Packet{Type: PktTIP, IPC: IPUpdate16, IP: uint64(rng.Intn(1 << 16))}
			case r < 85:
				p = Packet{Type: PktCYC, Payload: uint64(1 + rng.Intn(100))}
			case r < 88:
				p = Packet{Type: PktBBP, EvType: 1}
			case r < 94:
				p = Packet{Type: PktBIP, ID: uint8(rng.Intn(32)), Payload: uint64(rng.Uint32())}
			default:
				p = Packet{Type: PktBEP}
			}
			var err error
			if buf, err = AppendPacket(buf, &p); err != nil {
				t.Fatal(err)
			}
		}
		if rng.Intn(4) == 0 {
			buf = buf[:len(buf)-rng.Intn(2)] // an MTC or TNT-64 cut short
		}
		ref, got := NewPacketDecoder(buf, nil), NewPacketDecoder(buf, nil)
		if ref.SyncSet(0) != nil || got.SyncSet(0) != nil {
			t.Fatal("SyncSet(0)")
		}
		var rp, gp Packet
		for {
			rerr := ref.Next(&rp)
			var gerr error
			if (gp.Type == PktMTC || gp.Type == PktTNT8 || gp.Type == PktTNT64) && (got.NextMTC(&gp) || got.NextTNT8(&gp)) {
				hot++
			} else {
				gerr = got.Next(&gp)
			}
			if (rerr == nil) != (gerr == nil) || rp != gp || ref.Offset() != got.Offset() {
				t.Fatalf("stream %d: Next gave %+v %v at %d, with NextMTC/NextTNT8 %+v %v at %d", stream, rp, rerr, ref.Offset(), gp, gerr, got.Offset())
			}
			if rerr != nil {
				break
			}
		}
	}
	if hot == 0 {
		t.Fatal("NextMTC and NextTNT8 never took a packet")
	}
}
