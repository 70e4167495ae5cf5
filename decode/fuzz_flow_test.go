package decode

import (
	"math/rand"
	"testing"

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
	img := fuzzImage()
	f.Fuzz(func(t *testing.T, pt []byte) {
		if len(pt) > 1<<16 {
			return
		}
		for _, resync := range []bool{false, true} {
			s := &countSink{}
			cfg := &FlowConfig{MaxSteps: 1 << 10, TickEvents: resync}
			cfg.Packet.Errata = ptpkt.Errata{BDM70: true, BDM64: true, SKD010: true, SKD022: true, SKL014: true, APL11: true, APL12: true}
			RunFlow(NewFlowDecoder(pt, img, cfg), s, resync)
			// Bounded work: every instruction either consumes trace or
			// is one of at most MaxSteps straight-line ones per packet.
			if s.n > uint64(len(pt)+1)*(1<<10+64) {
				t.Fatalf("%d instructions from %d bytes of trace", s.n, len(pt))
			}
		}
	})
}
