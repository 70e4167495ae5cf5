package recording

import (
	"math/rand"
	"reflect"
	"testing"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptpkt"
)

// splitQueueRef is pass 1 the plain way, the truth splitQueue is checked
// against: every packet decoded, every timing packet applied where it is
// met, the whole queue in one window.
func splitQueueRef(t *testing.T, q *perf.PerfAuxQueue, pt []byte, cfg *ptpkt.Config) []piece {
	var out []piece
	var last ptpkt.LastIP
	var tm ptpkt.Time
	cur := piece{q: q}
	cut := func(at uint64, psb bool) {
		if at > cur.from {
			cur.to = at
			out = append(out, cur)
		}
		cur = piece{q: q, from: at, psb: psb}
	}
	d := ptpkt.NewPacketDecoder(pt, cfg)
	var p ptpkt.Packet
	if d.SyncForward() != nil {
		t.Fatal("no PSB")
	}
	for {
		off := d.Offset()
		if err := d.Next(&p); err != nil {
			if ptpkt.IsEOS(err) || d.SyncForward() != nil {
				break
			}
			continue
		}
		switch p.Type {
		case ptpkt.PktPSB:
			cut(off, true)
			last.Reset()
		case ptpkt.PktTSC:
			tm.UpdateTSC(&p, cfg)
		case ptpkt.PktTMA:
			tm.UpdateTMA(&p, cfg)
		case ptpkt.PktMTC:
			tm.UpdateMTC(&p, cfg)
		case ptpkt.PktCBR:
			tm.UpdateCBR(&p, cfg)
		case ptpkt.PktTIP, ptpkt.PktTIPPGE, ptpkt.PktTIPPGD, ptpkt.PktFUP:
			if p.Type != ptpkt.PktTIPPGD && !cur.ipPacket {
				cur.ipPacket = true
				tsc, _, _, err := tm.TSC()
				cur.tsc, cur.haveTSC = tsc, err == nil
				if !cur.psb && (p.IPC == ptpkt.IPUpdate16 || p.IPC == ptpkt.IPUpdate32 || p.IPC == ptpkt.IPUpdate48) {
					prev := last
					if prev.Update(p.IPC, p.IP) == nil {
						if ip, err := prev.IP(); err == nil {
							full := ptpkt.Packet{Type: p.Type, IPC: ptpkt.IPFull, IP: ip}
							b, _ := ptpkt.AppendPacket(nil, &full)
							cur.fixOff, cur.fixLen, cur.fixFull = off, int(d.Offset()-off), b
						}
					}
				}
			}
			last.Update(p.IPC, p.IP)
			if p.Type == ptpkt.PktTIPPGD {
				cut(d.Offset(), false)
			}
		}
	}
	cut(uint64(len(pt)), false)
	return out
}

// TestSplitQueueLazyTime: pass 1 steps over MTCs and applies them only
// where a piece needs its time, across windows, around BBP blocks (whose
// BIPs may hold 0x59 bytes and are followed by MTCs) and after TSCs
// without TMA: on a long random CPU queue it cuts the same pieces, with
// the same times and IP fixes, as the plain walk that applies every
// timing packet.
func TestSplitQueueLazyTime(t *testing.T) {
	cfg := ptpkt.Config{MTCFreq: 3, CPUID15EAX: 2, CPUID15EBX: 84, NomFreq: 30}
	rng := rand.New(rand.NewSource(1))
	b := &ptBuf{t: t}
	var tsc uint64 = 1 << 20
	ctc := uint16(0)
	ip := uint64(0x400000)
	for len(b.b) < 3*splitWindow+splitWindow/3 {
		// PSB+: TSC and TMA (or, rarely, neither: the time goes on
		// from the MTCs before), tracing on (FUP) or off.
		b.pkt(ptpkt.Packet{Type: ptpkt.PktPSB})
		if rng.Intn(8) > 0 {
			tsc += uint64(rng.Intn(1 << 14))
			b.pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: tsc}).
				pkt(ptpkt.Packet{Type: ptpkt.PktTMA, CTC: ctc, FC: uint16(rng.Intn(256))})
		}
		if rng.Intn(4) == 0 {
			b.pkt(ptpkt.Packet{Type: ptpkt.PktCBR, CBR: uint8(1 + rng.Intn(40))})
		}
		b.pkt(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
		if rng.Intn(3) > 0 {
			b.pkt(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: ip})
		}
		b.pkt(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
		for n := rng.Intn(300); n > 0; n-- {
			switch k := rng.Intn(20); {
			case k < 8:
				ctc += uint16(1 + rng.Intn(40))
				b.pkt(ptpkt.Packet{Type: ptpkt.PktMTC, MTC: uint8(ctc >> cfg.MTCFreq)})
			case k < 12:
				b.pkt(ptpkt.Packet{Type: ptpkt.PktTNT8, TNTBits: 6, TNTPayload: uint64(rng.Intn(64))})
			case k < 14:
				ip = 0x400000 + uint64(rng.Intn(1<<20))
				b.pkt(ptpkt.Packet{Type: ptpkt.PktTIP, IPC: ptpkt.IPUpdate16, IP: ip & 0xffff})
			case k == 14:
				// tracing off and on again: a cut, then an IP
				// compressed against the last IP
				b.pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGD, IPC: ptpkt.IPSuppressed})
				ctc += uint16(rng.Intn(600))
				b.pkt(ptpkt.Packet{Type: ptpkt.PktMTC, MTC: uint8(ctc >> cfg.MTCFreq)})
				b.pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGE, IPC: ptpkt.IPUpdate16, IP: uint64(rng.Intn(1 << 16))})
			case k == 15:
				// a BBP block whose BIPs hold MTC opcodes, MTCs inside
				b.pkt(ptpkt.Packet{Type: ptpkt.PktBBP, EvType: 1})
				for i := rng.Intn(4); i >= 0; i-- {
					b.pkt(ptpkt.Packet{Type: ptpkt.PktBIP, ID: uint8(rng.Intn(32)), Payload: 0x59595959})
					ctc += uint16(1 + rng.Intn(40))
					b.pkt(ptpkt.Packet{Type: ptpkt.PktMTC, MTC: uint8(ctc >> cfg.MTCFreq)})
				}
				b.pkt(ptpkt.Packet{Type: ptpkt.PktBEP})
			case k == 16:
				// a TSC without TMA: the MTCs after it do not count
				tsc += uint64(rng.Intn(1 << 12))
				b.pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: tsc})
			case k == 17:
				b.pkt(ptpkt.Packet{Type: ptpkt.PktPad})
				if rng.Intn(8) == 0 {
					// a long stretch without IP packets, its MTCs
					// wrapping several times: each one counts
					for i := 100 + rng.Intn(300); i > 0; i-- {
						ctc += uint16(20 + rng.Intn(40))
						b.pkt(ptpkt.Packet{Type: ptpkt.PktMTC, MTC: uint8(ctc >> cfg.MTCFreq)})
					}
				}
			default:
				b.pkt(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPUpdate32, IP: ip & 0xffffffff}).
					pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGD, IPC: ptpkt.IPSuppressed})
			}
		}
	}
	// A PSB+ without TSC where a window ends, after MTCs that wrap many
	// times: the time there needs every one of them.
	b.pkt(ptpkt.Packet{Type: ptpkt.PktPSB}).pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: tsc}).
		pkt(ptpkt.Packet{Type: ptpkt.PktTMA, CTC: ctc}).pkt(ptpkt.Packet{Type: ptpkt.PktPSBEnd}).
		pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGE, IPC: ptpkt.IPSext48, IP: ip})
	for i := 0; i < 5000; i++ {
		ctc += 50
		b.pkt(ptpkt.Packet{Type: ptpkt.PktMTC, MTC: uint8(ctc >> cfg.MTCFreq)})
	}
	b.pkt(ptpkt.Packet{Type: ptpkt.PktPSB}).pkt(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: ip}).
		pkt(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
	for i := 0; i < 16<<10; i++ {
		b.pkt(ptpkt.Packet{Type: ptpkt.PktTNT8, TNTBits: 6, TNTPayload: uint64(i % 64)})
	}
	b.pkt(ptpkt.Packet{Type: ptpkt.PktPSB}).pkt(ptpkt.Packet{Type: ptpkt.PktPSBEnd})

	q := &perf.PerfAuxQueue{CPU: 0, Tid: -1}
	want := splitQueueRef(t, q, b.b, &cfg)
	timed := 0
	for _, p := range want {
		if p.haveTSC {
			timed++
		}
	}
	if len(want) < 1000 || timed < 500 {
		t.Fatalf("the queue has %d pieces, %d with a time: too few to test", len(want), timed)
	}
	defer func(w int) { splitWindow = w }(splitWindow)
	// 16 KiB windows: the one before the PSB+ without TSC ends at it.
	for _, w := range []int{splitWindow, 16 << 10} {
		splitWindow = w
		var buf []byte
		got, err := splitQueue(q, decode.BytesTrace(b.b), &cfg, &buf, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("window %d: %d pieces, the plain walk cuts %d", w, len(got), len(want))
		}
		for i := range want {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Fatalf("window %d: piece %d: %+v, the plain walk gives %+v", w, i, got[i], want[i])
			}
		}
	}
}
