package ptfmt

import (
	"io"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/ptpkt"
)

// FuzzPtdump runs ptdump, with every option that changes its path through
// the trace, on arbitrary bytes: it must never panic nor fail on a bad
// trace (decode errors are part of its output).
func FuzzPtdump(f *testing.F) {
	for _, b := range testenv.PacketSeeds(f) {
		f.Add(b)
	}
	errata := ptpkt.Config{Errata: ptpkt.Errata{SKD007: true, SKZ84: true, SKL168: true}, MTCFreq: 3,
		CPUID15EAX: 2, CPUID15EBX: 7, NomFreq: 9}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s PtdumpSettings
		s.Options = PtdumpOptions{LastIP: true, Time: true, TimeDelta: true, Raw: true, ExecMode: true}
		s.Config = errata
		if err := PtdumpRun(io.Discard, data, &s); err != nil {
			t.Fatalf("ptdump: %v", err)
		}
		s.Options = PtdumpOptions{Tcal: true, NoSync: true}
		if err := PtdumpRun(io.Discard, data, &s); err != nil {
			t.Fatalf("ptdump --tcal: %v", err)
		}
	})
}
