package tracker

import (
	"fmt"
	"time"
)

// ProxyMode is --proxy: whether W^X's protection changes run in the
// protection proxy (proxy_linux_amd64.go; tracker/doc.go, "The
// protection proxy") or are injected into the stopped thread.
type ProxyMode string

const (
	ProxyAuto ProxyMode = "auto" // whichever has been cheaper here (proxyPick)
	ProxyOn   ProxyMode = "on"   // the proxy, wherever there is one
	ProxyOff  ProxyMode = "off"  // no proxy: every change injected
)

// ParseProxy parses --proxy ("" is auto).
func ParseProxy(s string) (ProxyMode, error) {
	switch ProxyMode(s) {
	case "":
		return ProxyAuto, nil
	case ProxyAuto, ProxyOn, ProxyOff:
		return ProxyMode(s), nil
	}
	return "", fmt.Errorf("--proxy: %q is not auto, on or off", s)
}

// What a protection change costs through each path depends on the
// machine: on the 2-vCPU bench VM, whose idle CPUs halt, the proxy saves
// two wake-ups of another CPU (35–46 µs a change against 52–70 µs
// injected); on a 16-CPU VM whose idle CPUs poll, an injection into the
// stopped thread was the cheaper by about 8 µs (BENCHMARKS.md,
// 2026-11-27). So under --proxy=auto the tracer times both and takes the
// cheaper.

const (
	// pickWarm: calls of each path before the averages decide.
	pickWarm = 8
	// pickExplore: every pickExplore-th call takes the path the averages
	// did not choose, so that its average follows the machine's state.
	pickExplore = 32
	// pickSettle: after this many calls, a proxy that has been the
	// dearer path is given up (proxyPick.gaveUp): its mere presence costs
	// (a second user of the memory: every protection change must then
	// reach the CPUs it ran on), which no exploration can tell.
	pickSettle = 256
	// pickClamp bounds one call's time in the average to this many
	// times the average: a call the scheduler delayed by milliseconds
	// must not decide for hundreds.
	pickClamp = 4
)

// proxyPick chooses the path of each protection change from the recent
// wall time of each (an exponential moving average, weight 1/8).
type proxyPick struct {
	avg   [2]time.Duration // by path: 0 injected, 1 the proxy
	n     [2]int
	calls int
	// gaveUp: after pickSettle calls injection was the cheaper: no proxy
	// from now on (the tracer closes them and makes no more)
	gaveUp bool
}

// useProxy says which path the next call takes.
func (p *proxyPick) useProxy() bool {
	if p.gaveUp {
		return false
	}
	p.calls++
	if p.n[0] < pickWarm || p.n[1] < pickWarm {
		return p.n[1] <= p.n[0] // alternate until both have pickWarm
	}
	best := p.avg[1] <= p.avg[0]
	if !best && p.calls >= pickSettle {
		p.gaveUp = true
		return false
	}
	if p.calls%pickExplore == 0 {
		return !best
	}
	return best
}

// observe takes the wall time d of a call through the proxy (proxy) or
// injected.
func (p *proxyPick) observe(proxy bool, d time.Duration) {
	i := 0
	if proxy {
		i = 1
	}
	d = max(d, 0)
	if p.n[i] == 0 {
		p.avg[i] = d
	} else {
		p.avg[i] += (min(d, pickClamp*p.avg[i]) - p.avg[i]) / 8
	}
	p.n[i]++
}
