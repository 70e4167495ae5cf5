package clock

import (
	"time"
)

// RDTSC returns the raw time-stamp counter (not serialized: the callers take
// it while the tracee is stopped, microseconds away from any event, so the
// few cycles of out-of-order slack do not matter).
func RDTSC() uint64

// Mono returns CLOCK_MONOTONIC in nanoseconds (the same clock as
// clock_gettime(CLOCK_MONOTONIC) in the traced program; TestTSC checks
// it against the syscall).
func Mono() int64 { return nanotime() }

// Now reads the TSC and CLOCK_MONOTONIC back to back.
func Now() Stamp {
	t := RDTSC()
	return Stamp{TSC: t, MonoNS: Mono()}
}

// TSCHz measures the TSC frequency against CLOCK_MONOTONIC over about d
// (10 ms gives better than 0.1 %). The result is rounded to kHz.
func TSCHz(d time.Duration) uint64 {
	a := Now()
	time.Sleep(d)
	return HzBetween(a, Now())
}

// HzBetween is the TSC frequency two stamps imply (rounded to kHz), or 0
// when they do not go forward. Stamps far apart give a better figure than
// TSCHz's short sleep: a recording measures it over its whole run.
func HzBetween(a, b Stamp) uint64 {
	if b.MonoNS <= a.MonoNS || b.TSC <= a.TSC {
		return 0
	}
	hz := float64(b.TSC-a.TSC) * 1e9 / float64(b.MonoNS-a.MonoNS)
	return uint64(hz/1000+0.5) * 1000
}
