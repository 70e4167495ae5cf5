// Package clock reads the two clocks a recording is stamped with: the raw
// time-stamp counter (RDTSC, the clock of Intel PT's TSC packets and of
// perf's time conversion) and CLOCK_MONOTONIC (the clock of the traced
// program and of perf's sample times), read back to back into a Stamp.
//
// It sits at the bottom of ptjit beside the format packages: the recorder
// (snapshot, tracker) takes Stamps and the store (db) keeps them.
//
// Must not import: any ptjit package but internal/platform. Of ptjit it
// imports only the build guard.
package clock

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
