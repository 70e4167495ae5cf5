package clock

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

// processStart is taken when package clock is initialized, within a
// millisecond or two of the process's exec: a TSC frequency measured from
// it (HzBetween(ProcessStart(), Now())) spans the whole life of ptjit
// without sleeping for it.
var processStart = Now()

// ProcessStart returns the stamp taken when the process started (package
// clock's initialization).
func ProcessStart() Stamp { return processStart }

// HzBetween is the TSC frequency two stamps imply (rounded to kHz), or 0
// when they do not go forward. Stamps far apart give a better figure than
// a short span: a recording measures it over its whole run.
func HzBetween(a, b Stamp) uint64 {
	if b.MonoNS <= a.MonoNS || b.TSC <= a.TSC {
		return 0
	}
	hz := float64(b.TSC-a.TSC) * 1e9 / float64(b.MonoNS-a.MonoNS)
	return uint64(hz/1000+0.5) * 1000
}
