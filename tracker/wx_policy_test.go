package tracker

import (
	"testing"
	"time"
)

// TestStorePolicy: how one faulting store into memory W^X keeps is
// carried out, by mode, the page's recent stores, whether the storing
// instruction runs from the page, whether the emulator can do it and
// whether the page holds only zeros.
func TestStorePolicy(t *testing.T) {
	const now = int64(10 * time.Second)
	recent := pageRate{n: 1, since: now - int64(time.Millisecond)}
	burst := pageRate{n: autoBatchAfter, since: now - int64(time.Millisecond)}
	old := pageRate{n: 50, since: now - 2*int64(autoWindow)}
	cases := []struct {
		name       string
		mode       WXMode
		r          pageRate
		self       bool
		emulatable bool
		zero       bool
		batch      bool
		counted    bool
		n          int
	}{
		{"batch mode", WXBatch, pageRate{}, false, true, false, true, false, 0},
		{"batch mode, store into its own page", WXBatch, pageRate{}, true, true, false, false, false, 0},
		{"precise mode, a burst", WXPrecise, burst, false, false, true, false, false, 2},
		{"off", WXOff, pageRate{}, false, true, false, false, false, 0},
		{"auto, first store", WXAuto, pageRate{}, false, true, false, false, true, 1},
		{"auto, second store", WXAuto, recent, false, true, false, false, true, 2},
		{"auto, third store within the window", WXAuto, burst, false, true, false, true, true, 3},
		{"auto, a burst long ago: a new window", WXAuto, old, false, true, false, false, true, 1},
		{"auto, not emulatable", WXAuto, pageRate{}, false, false, false, true, true, 1},
		{"auto, not emulatable, into its own page", WXAuto, pageRate{}, true, false, false, false, true, 1},
		{"auto, a burst into its own page", WXAuto, burst, true, true, false, false, true, 3},
		{"auto, first store into a zero page", WXAuto, pageRate{}, false, true, true, true, true, 1},
		{"auto, second store into a zero page (not asked)", WXAuto, recent, false, true, true, false, true, 2},
		{"auto, zero page, into its own page", WXAuto, pageRate{}, true, true, true, false, true, 1},
	}
	for _, c := range cases {
		batch, next, counted := storePolicy(c.mode, c.r, now, c.self,
			func() bool { return c.emulatable }, func() bool { return c.zero })
		if batch != c.batch || counted != c.counted || counted && next.n != c.n {
			t.Errorf("%s: batch %v counted %v n %d; want %v %v %d", c.name, batch, counted, next.n, c.batch, c.counted, c.n)
		}
	}
}
