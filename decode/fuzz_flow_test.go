package decode

import (
	"math/rand"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/ptpkt"
)

// fuzzImage is a fixed image for FuzzFlowDecoder: real code with every
// branch kind followed by pseudo-random bytes (which decode to a mix of
// instructions and invalid opcodes).
func fuzzImage() *Image {
	code := []byte{
		0x90,       // nop
		0x74, 0x02, // je +2
		0xff, 0xd0, // call *rax
		0xe8, 0x05, 0x00, 0x00, 0x00, // call +5
		0xc3,       // ret
		0xff, 0xe3, // jmp *rbx
		0xeb, 0xf1, // jmp back
		0x0f, 0x05, // syscall
		0x0f, 0x07, // sysret
		0xcf,             // iret
		0x0f, 0x22, 0xd8, // mov cr3, rax
		0xf3, 0x0f, 0xae, 0xe0, // ptwrite eax
		0x0f, 0x01, 0xc3, // vmresume
		0xeb, 0xfe, // jmp . (endless without trace)
	}
	r := rand.New(rand.NewSource(1))
	data := make([]byte, 4096)
	copy(data, code)
	for i := len(code); i < len(data); i++ {
		data[i] = byte(r.Intn(256))
	}
	img := NewImage()
	if err := img.AddBytes(data, 0x1000, "fuzz", 0); err != nil {
		panic(err)
	}
	return img
}

// FuzzFlowDecoder decodes any bytes as a trace of fuzzImage's code, with
// every erratum workaround on, with and without --resync-on-error (and
// tick events), three ways:
//
//   - instruction by instruction (a sink that takes no blocks): the
//     reference;
//   - through blocks (a BlockSink: nextBlock, the fast path of --stat and
//     --calls);
//   - with the fast paths off (FlowConfig.noFastPaths: the query layer's
//     general dispatch packet by packet, no blocks).
//
// The three must hand their sinks the same calls in the same order: the
// same instructions (every FlowInsn field, a block standing for the
// instructions FlowBlock.Insns expands it to) with the same trace offset
// and time, the same events (every field) at the same offsets, and the
// same errors (code, offset, IP, time) of the same kind. The work stays
// bounded (no more instructions than MaxSteps a byte of trace).
func FuzzFlowDecoder(f *testing.F) {
	psb := ptpkt.PSBPattern[:]
	// PSB, MODE.Exec 64, FUP 0x1000, PSBEND, then a few TNT/TIP packets.
	seed := append(append([]byte{}, psb...),
		0x99, 0x01, // mode.exec cs.l
		0x1d, 0x00, 0x10, 0x00, 0x00, // fup ip32 0x1000
		0x02, 0x23, // psbend
		0x0a,             // tnt.8 "1"
		0x2d, 0x05, 0x10, // tip ip16 0x1005
		0x06,                         // tnt.8 "!"
		0x4d, 0x20, 0x10, 0x00, 0x00, // tip ip32
		0x01, // tip.pgd suppressed
	)
	f.Add(seed)
	f.Add(append(append([]byte{}, psb...), 0x02, 0x23, 0x02, 0xf3, 0x99, 0x01))
	f.Add([]byte{0x02, 0x82})
	// An endless direct loop (jmp . at 0x101e) and a TIP it never asks
	// for: MaxSteps ends it, at the same instruction on both paths.
	f.Add(append(append([]byte{}, psb...),
		0x99, 0x01, // mode.exec cs.l
		0x7d, 0x1e, 0x10, 0x00, 0x00, 0x00, 0x00, // fup sext48 0x101e
		0x02, 0x23, // psbend
		0x2d, 0x00, 0x10, // tip ip16 0x1000
	))
	// Timing: a soft-PT trace (MTCs, TSC, TMA, CBR, CYC, power events
	// among the TNTs and TIPs; its code is not fuzzImage's, so it ends
	// early), and libipt's traces of every packet kind.
	soft, _, _ := softPTTrace(20, 1, true)
	f.Add(soft)
	for _, b := range testenv.PacketSeeds(f) {
		f.Add(b)
	}
	img := fuzzImage()
	f.Fuzz(func(t *testing.T, pt []byte) {
		if len(pt) > 1<<16 {
			return
		}
		for _, resync := range []bool{false, true} {
			cfg := &FlowConfig{MaxSteps: 1 << 10, TickEvents: resync}
			cfg.Packet.Errata = ptpkt.Errata{BDM70: true, BDM64: true, SKD010: true, SKD022: true, SKL014: true, APL11: true, APL12: true}
			var ref recSink
			RunFlow(NewFlowDecoder(pt, img, cfg), &ref, resync)
			// Bounded work: every instruction either consumes trace or
			// is one of at most MaxSteps straight-line ones per packet.
			if n := len(ref.recs); n > (len(pt)+1)*(1<<10+64) {
				t.Fatalf("%d calls from %d bytes of trace", n, len(pt))
			}
			blk := recBlocks{recSink: recSink{ref: &ref}}
			RunFlow(NewFlowDecoder(pt, img, cfg), &blk, resync)
			if d := blk.check(); d != "" {
				t.Fatalf("resync %v: block path (%d blocks) vs instruction path: %s", resync, blk.blocks, d)
			}
			slowCfg := *cfg
			slowCfg.noFastPaths = true
			slow := recSink{ref: &ref}
			RunFlow(NewFlowDecoder(pt, img, &slowCfg), &slow, resync)
			if d := slow.check(); d != "" {
				t.Fatalf("resync %v: without fast paths vs with: %s", resync, d)
			}
		}
	})
}
