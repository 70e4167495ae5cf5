package clock

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestTSC(t *testing.T) {
	time.Sleep(10 * time.Millisecond)
	hz := HzBetween(ProcessStart(), Now())
	if hz < 100e6 || hz > 10e9 {
		t.Fatalf("TSC frequency %d Hz is implausible", hz)
	}
	// Mono is CLOCK_MONOTONIC: bracket it with the syscall.
	var t0, t1 unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &t0)
	m := Mono()
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &t1)
	if m < t0.Nano() || m > t1.Nano() {
		t.Fatalf("Mono %d not within CLOCK_MONOTONIC [%d, %d]", m, t0.Nano(), t1.Nano())
	}
	a := Now()
	b := Now()
	if b.TSC <= a.TSC || b.MonoNS < a.MonoNS {
		t.Fatalf("stamps go backwards: %+v then %+v", a, b)
	}
}
