package perf

import (
	"math/bits"

	"github.com/ptjit/ptjit/ptpkt"
)

// PTConfig sets in c the timing configuration the trace was recorded with,
// as perf's intel-pt.c derives it: the MTC frequency from the PT event's
// config and AUXTRACE_INFO's mtc_freq_bits (intel_pt_mtc_period), the TSC
// to crystal clock ratio (CPUID 0x15: EAX the denominator, EBX the
// numerator) and the nominal frequency (max_non_turbo_ratio) from
// AUXTRACE_INFO. A value is left alone when given reports that its option
// was given ("mtc-freq", "nom-freq", "cpuid-0x15.eax", "cpuid-0x15.ebx", as
// ptdump and ptxed name them; either CPUID option keeps both), or when the
// AUXTRACE_INFO does not have it (an older perf, or no Intel PT).
func (t *PerfTrace) PTConfig(c *ptpkt.Config, given func(option string) bool) {
	if t.Info == nil || t.Info.Type != AuxtraceIntelPT || !t.Info.IntelPT.HasMTC {
		return
	}
	pt := &t.Info.IntelPT
	if !given("mtc-freq") && pt.MTCFreqBits != 0 && t.PTAttr != nil {
		c.MTCFreq = uint8((t.PTAttr.Config & pt.MTCFreqBits) >> bits.TrailingZeros64(pt.MTCFreqBits))
	}
	if !given("cpuid-0x15.eax") && !given("cpuid-0x15.ebx") {
		c.CPUID15EAX, c.CPUID15EBX = pt.TSCCTCD, pt.TSCCTCN
	}
	if !given("nom-freq") {
		c.NomFreq = uint8(pt.MaxNonTurboRatio)
	}
}
