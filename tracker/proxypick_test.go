package tracker

import (
	"testing"
	"time"
)

// TestProxyPick: the chooser alternates until each path has pickWarm
// calls, then takes the path whose recent calls were cheaper, but for
// every pickExplore-th call, and follows a change of the machine.
func TestProxyPick(t *testing.T) {
	for _, tc := range []struct {
		name          string
		proxy, inject time.Duration
		wantProxy     float64 // share of the calls after warm-up
	}{
		{"proxy cheaper", 35 * time.Microsecond, 60 * time.Microsecond, 1 - 1.0/pickExplore},
		{"injection cheaper: the proxy is given up", 40 * time.Microsecond, 30 * time.Microsecond, 0},
		{"an outlier is clamped", 35 * time.Microsecond, 60 * time.Microsecond, 1 - 1.0/pickExplore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p proxyPick
			proxyCalls, calls := 0, 0
			for i := range 4096 {
				useProxy := p.useProxy()
				d := tc.inject
				if useProxy {
					d = tc.proxy
					if tc.name == "an outlier is clamped" && i == 100 {
						d = time.Second
					}
				}
				p.observe(useProxy, d)
				if i >= 2*pickWarm+200 {
					calls++
					if useProxy {
						proxyCalls++
					}
				}
			}
			if got := float64(proxyCalls) / float64(calls); got < tc.wantProxy-0.01 || got > tc.wantProxy+0.01 {
				t.Errorf("proxy share %.3f, want %.3f", got, tc.wantProxy)
			}
			if p.gaveUp != (tc.wantProxy == 0) {
				t.Errorf("gave up %v", p.gaveUp)
			}
		})
	}
	// warm-up alternates
	var p proxyPick
	var seq []bool
	for range 2 * pickWarm {
		u := p.useProxy()
		seq = append(seq, u)
		p.observe(u, time.Microsecond)
	}
	for i, u := range seq {
		if u != (i%2 == 0) {
			t.Fatalf("warm-up %v: want alternating, proxy first", seq)
		}
	}
	// the machine changes after the settling: the proxy gets dear,
	// injections win within a few hundred calls, and the proxy is given
	// up
	p = proxyPick{}
	cost := func(proxy bool, phase int) time.Duration {
		if proxy == (phase == 0) {
			return 20 * time.Microsecond
		}
		return 50 * time.Microsecond
	}
	last := 0
	for i := range 2000 {
		phase := 0
		if i >= 1000 {
			phase = 1
		}
		u := p.useProxy()
		p.observe(u, cost(u, phase))
		if i >= 1400 && u {
			last++
		}
	}
	if last != 0 || !p.gaveUp {
		t.Errorf("after the change: %d of the last 600 calls through the proxy, given up %v: want 0, true", last, p.gaveUp)
	}
}
