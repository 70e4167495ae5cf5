package decode

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

func TestPsbOffsets(t *testing.T) {
	psb := ptpkt.PSBPattern[:]
	buf := append(append(append([]byte{0, 0}, psb...), 0x02, 0x23), psb...)
	got := psbOffsets(buf)
	if len(got) != 2 || got[0] != 2 || got[1] != 20 {
		t.Fatalf("psbOffsets = %v, want [2 20]", got)
	}
	if len(psbOffsets(psb[:15])) != 0 {
		t.Fatal("found a PSB in a truncated pattern")
	}
}

func BenchmarkDecodeParallelMid(b *testing.B) {
	pt, img := loadSynthetic(b, "mid")
	for _, jobs := range []int{1, 2} {
		b.Run(map[int]string{1: "jobs1", 2: "jobs2"}[jobs], func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				var n uint64
				ParallelFlowChunks(pt, img, &FlowConfig{}, false, jobs,
					func() FlowSink { return &countSink{} },
					func(s FlowSink) { n += s.(*countSink).n })
				if n != 2137044 {
					b.Fatalf("decoded %d instructions, want 2137044", n)
				}
			}
			b.ReportMetric(2137044*float64(b.N)/b.Elapsed().Seconds()/1e6, "Minsn/s")
		})
	}
}

type countSink struct{ n uint64 }

func (s *countSink) Insn(in *FlowInsn, off, tsc uint64) { s.n++ }

// Block makes countSink take blocks, as ptjit decode --stat does.
func (s *countSink) Block(b *FlowBlock, off, tsc uint64) { s.n += uint64(b.N) }
func (s *countSink) Event(ev *Event, off uint64)         {}
func (s *countSink) Error(e *FlowError, kind ErrorKind)  {}

// TestParallelTracingOffPSB: a per-CPU trace has a PSB+ with tracing off
// at every context switch (TIP.PGD, PSB+ without FUP, TIP.PGE where the
// thread stopped): the decoder before it reports the TIP.PGE as tracing
// resumed. Decoded on two goroutines, chunks start only at PSBs with
// tracing on, so the flow, events included (status updates aside), is the
// one-goroutine flow.
func TestParallelTracingOffPSB(t *testing.T) {
	img := NewImage()
	if err := img.AddBytes(bytes.Repeat([]byte{0x90}, 4096), 0x1000, "nops", 0); err != nil {
		t.Fatal(err)
	}
	var pt []byte
	pkt := func(p ptpkt.Packet) {
		var err error
		if pt, err = ptpkt.AppendPacket(pt, &p); err != nil {
			t.Fatal(err)
		}
	}
	ip := uint64(0x1000)
	tsc := uint64(1000)
	offPSBs := 0
	for i := 0; len(pt) < 8*parallelChunk; i++ {
		// PSB+, every fifth with tracing on (a FUP where the NOPs have
		// run to), the others with tracing off (TIP.PGE after it)
		on := i%5 == 0
		tsc += 100
		pkt(ptpkt.Packet{Type: ptpkt.PktPSB})
		pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: tsc})
		pkt(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
		if on {
			pkt(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: ip})
		}
		pkt(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
		if !on {
			offPSBs++
			pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGE, IPC: ptpkt.IPSext48, IP: ip})
		}
		pt = append(pt, make([]byte, 20000)...) // PADs
		// 16 NOPs run; before a PSB+ with tracing off, tracing stops
		// there (FUP, TIP.PGD)
		ip += 16
		if ip >= 0x1000+4000 {
			ip = 0x1000
		}
		if (i+1)%5 != 0 {
			pkt(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: ip})
			pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGD, IPC: ptpkt.IPSuppressed})
		}
	}
	var one, two flowLog
	ParallelFlow(pt, img, &FlowConfig{}, &one, false, 1)
	ParallelFlow(pt, img, &FlowConfig{}, &two, false, 2)
	resumed := 0
	for _, l := range one.lines {
		if strings.Contains(l, "Resumed:true") {
			resumed++
		}
	}
	if resumed < offPSBs/2 {
		t.Fatalf("%d of %d TIP.PGEs after a PSB+ with tracing off resume tracing", resumed, offPSBs)
	}
	// Status updates (the PSB+ packets) are not part of the flow: no
	// format prints them, and a chunk boundary repeats them.
	shown := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if !strings.Contains(l, "StatusUpdate:true") {
				out = append(out, l)
			}
		}
		return out
	}
	if d := diffLines(shown(two.lines), shown(one.lines)); d != "" {
		t.Errorf("-j 2 vs -j 1: %s", d)
	}
}
