package clock

import _ "unsafe" // go:linkname

// nanotime is the Go runtime's CLOCK_MONOTONIC, read through the vDSO
// (no syscall: it is taken at every stop).
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
