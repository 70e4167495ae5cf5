package decode

import (
	"math/rand"
	"testing"
	"time"

	"github.com/ptjit/ptjit/ptpkt"
)

// softPTCode is the program softPTTrace traces, at softPTBase:
//
//	0x1000: nop
//	0x1001: jne 0x1000        taken 0 to 7 times
//	0x1003: call 0x100c
//	0x1008: jmp *%rax         to 0x1000 (a TIP)
//	0x100a: nop; nop
//	0x100c: nop
//	0x100d: ret               compressed (a TNT bit)
var softPTCode = []byte{0x90, 0x75, 0xfd, 0xe8, 0x04, 0x00, 0x00, 0x00, 0xff, 0xe0, 0x90, 0x90, 0x90, 0xc3}

const softPTBase = 0x1000

// softPTTrace is a trace of softPTCode as soft PT writes it (an MTC per
// instruction, a one-bit TNT-8 per conditional branch and compressed
// return, a TIP per indirect branch), iters times round its loop, and the
// instructions it stands for. With noise, random packets come between
// instructions: PAD, CYC, TSC and TMA, CBR, power events (PWRE, MWAIT,
// EXSTOP without IP), a TNT-8 of several bits instead of one per
// branch, a PSB+ carrying the current IP at the top of the loop, MTCs
// that skip CTC values.
func softPTTrace(iters int, seed int64, noise bool) (pt []byte, cfg *FlowConfig, insns uint64) {
	rng := rand.New(rand.NewSource(seed))
	cfg = &FlowConfig{}
	cfg.Packet.CPUID15EAX, cfg.Packet.CPUID15EBX, cfg.Packet.MTCFreq = 2, 100, 0
	var enc ptpkt.Encoder
	add := func(p ptpkt.Packet) {
		if err := enc.Append(&p); err != nil {
			panic(err)
		}
	}
	ctc := uint8(0)
	psb := func(ip uint64) {
		add(ptpkt.Packet{Type: ptpkt.PktPSB})
		add(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 1000 + insns*3})
		add(ptpkt.Packet{Type: ptpkt.PktTMA, CTC: uint16(ctc), FC: 0})
		add(ptpkt.Packet{Type: ptpkt.PktCBR, CBR: 20})
		add(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
		add(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: ip})
		add(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
	}
	// Outcomes of conditional branches not yet written (noise packs
	// several into one TNT-8).
	var bits []bool
	flush := func() {
		for len(bits) > 0 {
			n := min(len(bits), 6)
			var v uint64
			for _, b := range bits[:n] {
				v <<= 1
				if b {
					v |= 1
				}
			}
			add(ptpkt.Packet{Type: ptpkt.PktTNT8, TNTBits: uint8(n), TNTPayload: v})
			bits = bits[n:]
		}
	}
	// insn writes the packets of one instruction at ip.
	insn := func(ip uint64) {
		if noise {
			switch r := rng.Intn(200); {
			case r < 4:
				add(ptpkt.Packet{Type: ptpkt.PktPad})
			case r < 8:
				flush()
				add(ptpkt.Packet{Type: ptpkt.PktCYC, Payload: uint64(1 + rng.Intn(300))})
			case r < 10:
				flush()
				add(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 1000 + insns*3})
				add(ptpkt.Packet{Type: ptpkt.PktTMA, CTC: uint16(ctc), FC: uint16(rng.Intn(512))})
			case r < 11:
				flush()
				add(ptpkt.Packet{Type: ptpkt.PktCBR, CBR: uint8(10 + rng.Intn(30))})
			case r < 12 && ip == softPTBase:
				// (not between the call and its return: a
				// PSB+ empties the return stack)
				flush()
				psb(ip)
			case r < 16:
				ctc += uint8(rng.Intn(40))
			case r < 17:
				// Power events: PWRE and MWAIT wait for an
				// EXSTOP (or are flushed by the next packet).
				flush()
				add(ptpkt.Packet{Type: ptpkt.PktPwrE, State: uint8(rng.Intn(16))})
			case r < 18:
				flush()
				add(ptpkt.Packet{Type: ptpkt.PktMWait, Hints: uint32(rng.Intn(256))})
			case r < 19:
				flush()
				add(ptpkt.Packet{Type: ptpkt.PktExStop})
			}
		}
		ctc++
		add(ptpkt.Packet{Type: ptpkt.PktMTC, MTC: ctc})
		insns++
	}
	branch := func(taken bool) {
		bits = append(bits, taken)
		if !noise || rng.Intn(3) == 0 {
			flush()
		}
	}
	psb(softPTBase)
	for i := 0; i < iters; i++ {
		for k := rng.Intn(8); ; k-- {
			insn(0x1000)
			insn(0x1001)
			branch(k > 0)
			if k == 0 {
				break
			}
		}
		insn(0x1003)
		insn(0x100c)
		insn(0x100d)
		branch(true)
		insn(0x1008)
		flush()
		if i == iters-1 {
			// Tracing stops at the last indirect jump.
			add(ptpkt.Packet{Type: ptpkt.PktTIPPGD})
			break
		}
		if err := enc.IPPacket(ptpkt.PktTIP, 0x1000); err != nil {
			panic(err)
		}
	}
	return enc.Buf, cfg, insns
}

// softPTImage is the image of softPTCode.
func softPTImage() *Image {
	img := NewImage()
	if err := img.AddBytes(softPTCode, softPTBase, "softpt", 0); err != nil {
		panic(err)
	}
	return img
}

// BenchmarkDecodeSoftPT decodes a soft-PT trace (softPTTrace: an MTC per
// instruction, a TNT-8 per branch, where the query layer's fast paths
// matter most) through blocks and instruction by instruction, alternating,
// and reports both rates.
func BenchmarkDecodeSoftPT(b *testing.B) {
	pt, cfg, want := softPTTrace(100000, 1, false)
	img := softPTImage()
	var blk, insn time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		var c countSink
		RunFlow(NewFlowDecoder(pt, img, cfg), &c, false)
		blk += time.Since(t0)
		t0 = time.Now()
		var r insnCount
		RunFlow(NewFlowDecoder(pt, img, cfg), &r, false)
		insn += time.Since(t0)
		if c.n != want || r.n != want {
			b.Fatalf("decoded %d (blocks) and %d instructions, the trace has %d", c.n, r.n, want)
		}
	}
	rate := func(d time.Duration) float64 { return float64(want) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(rate(blk), "blocks-Minsn/s")
	b.ReportMetric(rate(insn), "insns-Minsn/s")
}
