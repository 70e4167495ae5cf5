package perf

import (
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

func TestPTConfig(t *testing.T) {
	info := func(hasMTC bool) *PerfAuxtraceInfo {
		ai := &PerfAuxtraceInfo{Type: AuxtraceIntelPT}
		ai.IntelPT = IntelPTInfo{HasMTC: hasMTC, MTCFreqBits: PTConfigMTCMask, TSCCTCN: 0x8c, TSCCTCD: 2, MaxNonTurboRatio: 0x1a}
		return ai
	}
	attr := &PerfAttr{Config: 3 << PTConfigMTCShift}
	opts := ptpkt.Config{MTCFreq: 9, NomFreq: 7, CPUID15EAX: 5, CPUID15EBX: 6} // as given on the command line
	recorded := ptpkt.Config{MTCFreq: 3, NomFreq: 0x1a, CPUID15EAX: 2, CPUID15EBX: 0x8c}
	tests := []struct {
		name  string
		tr    PerfTrace
		given []string
		want  ptpkt.Config
	}{
		{"recorded", PerfTrace{Info: info(true), PTAttr: attr}, nil, recorded},
		{"all given", PerfTrace{Info: info(true), PTAttr: attr}, []string{"mtc-freq", "nom-freq", "cpuid-0x15.eax", "cpuid-0x15.ebx"}, opts},
		// A given value is kept even when it is 0 (--mtc-freq 0).
		{"mtc-freq given", PerfTrace{Info: info(true), PTAttr: attr}, []string{"mtc-freq"}, ptpkt.Config{MTCFreq: 9, NomFreq: 0x1a, CPUID15EAX: 2, CPUID15EBX: 0x8c}},
		// Either CPUID option keeps both: the ratio is one value.
		{"cpuid eax given", PerfTrace{Info: info(true), PTAttr: attr}, []string{"cpuid-0x15.eax"}, ptpkt.Config{MTCFreq: 3, NomFreq: 0x1a, CPUID15EAX: 5, CPUID15EBX: 6}},
		{"nom-freq given", PerfTrace{Info: info(true), PTAttr: attr}, []string{"nom-freq"}, ptpkt.Config{MTCFreq: 3, NomFreq: 7, CPUID15EAX: 2, CPUID15EBX: 0x8c}},
		// Without the PT event the MTC frequency is unknown; the ratios
		// are the CPU's (as perf: they do not depend on the event).
		{"no PT event", PerfTrace{Info: info(true)}, nil, ptpkt.Config{MTCFreq: 9, NomFreq: 0x1a, CPUID15EAX: 2, CPUID15EBX: 0x8c}},
		{"no MTC fields", PerfTrace{Info: info(false), PTAttr: attr}, nil, opts},
		{"no AUXTRACE_INFO", PerfTrace{PTAttr: attr}, nil, opts},
		{"not Intel PT", PerfTrace{Info: &PerfAuxtraceInfo{Type: AuxtraceIntelPT + 1, IntelPT: info(true).IntelPT}, PTAttr: attr}, nil, opts},
		{"no mtc_freq_bits", PerfTrace{Info: &PerfAuxtraceInfo{Type: AuxtraceIntelPT, IntelPT: IntelPTInfo{HasMTC: true, TSCCTCN: 0x8c, TSCCTCD: 2, MaxNonTurboRatio: 0x1a}}, PTAttr: attr}, nil, ptpkt.Config{MTCFreq: 9, NomFreq: 0x1a, CPUID15EAX: 2, CPUID15EBX: 0x8c}},
	}
	for _, tt := range tests {
		c := opts
		tt.tr.PTConfig(&c, func(o string) bool {
			for _, g := range tt.given {
				if g == o {
					return true
				}
			}
			return false
		})
		if c != tt.want {
			t.Errorf("%s: %+v, want %+v", tt.name, c, tt.want)
		}
	}
}
