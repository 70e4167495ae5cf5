package tracker

import (
	"testing"
	"time"
)

func TestSpinWait(t *testing.T) {
	us := time.Microsecond
	for _, tc := range []struct {
		name  string
		off   bool
		waits []time.Duration
		want  time.Duration
	}{
		{"nothing seen yet: sleep", false, nil, 0},
		{"off: never", true, []time.Duration{10 * us, 10 * us}, 0},
		{"short waits: twice plus slack", false, []time.Duration{40 * us}, 100 * us},
		{"average of several", false, []time.Duration{40 * us, 40 * us, 120 * us}, 2*50*us + spinSlack},
		{"long waits: sleep", false, []time.Duration{time.Millisecond}, 0},
		{"just under spinMax: capped budget", false, []time.Duration{200 * us}, spinMax},
		// one long pause is capped at spinCap: 8 short waits later the
		// average is back under spinMax
		{"a pause, then a burst", false, append([]time.Duration{10 * us, time.Second}, repeat(10*us, 9)...), 2*time.Duration(avgAfter(10*us, time.Second, 10*us, 9)) + spinSlack},
		// a pause counts as spinCap (an eighth of it is 125 µs): one
		// still leaves the average under spinMax, three in a row stop the
		// polling
		{"a pause, right after", false, []time.Duration{10 * us, time.Second}, spinMax},
		{"three pauses", false, []time.Duration{10 * us, time.Second, time.Second, time.Second}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := spinWait{off: tc.off}
			for _, d := range tc.waits {
				s.observe(d)
			}
			// the average is kept in integer nanoseconds: within 100 ns
			// of the value computed in floating point
			if got := s.budget(); got < tc.want-100 || got > tc.want+100 {
				t.Errorf("budget after %v = %v, want %v", tc.waits, got, tc.want)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	r := make([]time.Duration, n)
	for i := range r {
		r[i] = d
	}
	return r
}

// avgAfter computes, the long way, the average spinWait keeps after a
// first wait, a pause (capped at spinCap) and n waits of d.
func avgAfter(first, pause, d time.Duration, n int) float64 {
	a := float64(first)
	a += (float64(min(pause, spinCap)) - a) / 8
	for range n {
		a += (float64(d) - a) / 8
	}
	return a
}

func TestSpinCrowded(t *testing.T) {
	for _, tc := range []struct {
		line string
		cpus int
		want bool
	}{
		{"1.14 1.25 1.31 1/80 5021\n", 2, false},
		{"1.14 1.25 1.31 2/80 5021\n", 2, false}, // the tracer and the thread it resumed
		{"3.02 2.10 1.31 3/95 5021\n", 2, true},  // and one more: it would wait for a CPU
		{"3.02 2.10 1.31 3/95 5021\n", 4, false},
		{"", 2, true},
		{"1 2 3", 2, true},
		{"1.0 1.0 1.0 x/80 1", 2, true},
		{"1.0 1.0 1.0 80 1", 2, true},
	} {
		if got := spinCrowded(tc.line, tc.cpus); got != tc.want {
			t.Errorf("spinCrowded(%q, %d) = %v, want %v", tc.line, tc.cpus, got, tc.want)
		}
	}
}
