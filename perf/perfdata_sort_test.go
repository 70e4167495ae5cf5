package perf

import (
	"math/rand"
	"sort"
	"testing"
)

// TestSortByTime: sortByTime is a stable sort by sample time, for records
// in order (left as they are) and out of order (sorted through indices).
func TestSortByTime(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, ordered := range []bool{true, false} {
		recs := make([]PerfRecord, 500)
		for i := range recs {
			recs[i].Offset = int64(i) // identity, to check stability
			recs[i].ID.Time = uint64(rng.Intn(50))
		}
		if ordered {
			sort.SliceStable(recs, func(i, j int) bool { return recs[i].ID.Time < recs[j].ID.Time })
		}
		want := append([]PerfRecord(nil), recs...)
		sort.SliceStable(want, func(i, j int) bool { return want[i].ID.Time < want[j].ID.Time })
		sortByTime(recs)
		for i := range recs {
			if recs[i].Offset != want[i].Offset || recs[i].ID.Time != want[i].ID.Time {
				t.Fatalf("ordered %v: record %d: offset %d time %d, want offset %d time %d",
					ordered, i, recs[i].Offset, recs[i].ID.Time, want[i].Offset, want[i].ID.Time)
			}
		}
	}
}
