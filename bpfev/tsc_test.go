package bpfev

import (
	"testing"

	"github.com/ptjit/ptjit/clock"
)

func TestTSCTable(t *testing.T) {
	ref := clock.Stamp{TSC: 1_000_000_000_000, MonoNS: 5_000_000_000}
	for _, c := range []struct {
		mono int64
		hz   uint64
		want uint64
	}{
		{5_000_000_000, 3_000_000_000, 1_000_000_000_000},
		{5_000_000_001, 3_000_000_000, 1_000_000_000_003},
		{4_999_999_999, 3_000_000_000, 999_999_999_997},
		{6_000_000_000, 2_500_000_000, 1_002_500_000_000},
		{5_000_000_001, 2_400_000_000, 1_000_000_000_002},            // 2.4 rounds down
		{5_000_000_001, 2_500_000_000, 1_000_000_000_003},            // 2.5 rounds up
		{0, 3_000_000_000, 1_000_000_000_000 - 15_000_000_000},       // far before
		{-1 << 62, 3_000_000_000, 0},                                 // before the TSC's zero
		{5_000_000_000 + 3600e9*24*365, 3e9, 1e12 + 3e9*3600*24*365}, // a year later: no overflow
		{5_000_000_000 + 1<<62, 10_000_000_000, ^uint64(0)},          // beyond 2^64 counts
	} {
		if got := TSC(c.mono, ref, c.hz); got != c.want {
			t.Errorf("TSC(%d, %+v, %d) = %d, want %d", c.mono, ref, c.hz, got, c.want)
		}
	}
}
