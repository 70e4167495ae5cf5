package bpfev

import (
	"math/bits"

	"github.com/ptjit/ptjit/clock"
)

// TSC converts an event's CLOCK_MONOTONIC time (Event.Time, Event.Done:
// bpf_ktime_get_ns, which is CLOCK_MONOTONIC) to the trace's time base,
// the raw TSC: ref is a clock.Stamp (a TSC and CLOCK_MONOTONIC read back
// to back) and hz the TSC frequency (clock.HzBetween over the recording),
//
//	tsc = ref.TSC + (mono - ref.MonoNS) * hz / 1e9
//
// exactly in 128-bit integers, the division rounded to the nearest count.
// The error is the error of hz times the distance from ref, plus the
// few cycles between the two reads of ref: take ref near the events (the
// tracker stamps every stop) for the best figure. A time before the TSC's
// zero gives 0.
func TSC(mono int64, ref clock.Stamp, hz uint64) uint64 {
	d := mono - ref.MonoNS
	neg := d < 0
	if neg {
		d = -d
	}
	hi, lo := bits.Mul64(uint64(d), hz)
	lo, c := bits.Add64(lo, 500_000_000, 0) // round half up
	hi += c
	if hi >= 1e9 {
		// more than 2^64 counts away: only a corrupt time
		if neg {
			return 0
		}
		return ^uint64(0)
	}
	q, _ := bits.Div64(hi, lo, 1e9)
	if neg {
		if q > ref.TSC {
			return 0
		}
		return ref.TSC - q
	}
	return ref.TSC + q
}
