package clock

// Stamp is a moment of the recording: the raw time-stamp counter and
// CLOCK_MONOTONIC, both read while the tracee was stopped.
type Stamp struct {
	TSC    uint64
	MonoNS int64
}
