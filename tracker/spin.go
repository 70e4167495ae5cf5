package tracker

import (
	"strconv"
	"strings"
	"time"
)

// Spinning before a wait (spinwait_linux_amd64.go). A tracee's stop wakes
// the tracer, and the tracer's resume wakes the tracee: on a machine whose
// idle CPUs halt (a VM without guest halt-polling) each wake-up of a
// sleeping CPU costs tens of microseconds, more than the stop itself. A
// tracer that polls for the stop instead of sleeping in wait4 is awake
// when it comes. It polls only while stops come close together, at most
// spinMax a wait, and only while no thread on the machine waits for a
// CPU: a program whose threads keep every CPU busy (Erlang's schedulers
// poll for work themselves) would lose to the poll what it gains.

const (
	// spinMax bounds one wait's polling.
	spinMax = 250 * time.Microsecond
	// spinSlack is added to the expected wait: a wait a little longer
	// than the recent ones is still caught.
	spinSlack = 20 * time.Microsecond
	// spinCap bounds what one long wait adds to the average, so that one
	// pause of the program stops the polling for a few waits, not for
	// hundreds.
	spinCap = 4 * spinMax
	// spinSample: how often the machine's runnable threads are counted
	// (/proc/loadavg).
	spinSample = 5 * time.Millisecond
)

// spinWait decides how long to poll before sleeping: twice the recent
// waits' average (an exponential moving average, weight 1/8), plus
// spinSlack, at most spinMax; not at all while that average exceeds
// spinMax (the program runs long between stops: polling would take its
// CPU for nothing), or when off (one CPU for tracer and program: polling
// would delay the very stop it waits for). The tracer keeps two: one for
// the main loop's waits, whose length is the program's, and one for the
// waits for a thread ptjit resumed for a step of its own (an injected
// syscall), a few microseconds each.
type spinWait struct {
	off  bool
	avg  time.Duration
	seen bool
}

// spinCrowded reports whether polling would keep a thread from a CPU:
// more threads runnable (the tracer and the thread it just resumed
// among them) than CPUs, from /proc/loadavg's line (its fourth field,
// running/total). A line it cannot read counts as crowded.
func spinCrowded(loadavg string, cpus int) bool {
	f := strings.Fields(loadavg)
	if len(f) < 4 {
		return true
	}
	run, _, ok := strings.Cut(f[3], "/")
	n, err := strconv.Atoi(run)
	return !ok || err != nil || n > cpus
}

// budget is how long the next wait polls before it sleeps.
func (s *spinWait) budget() time.Duration {
	if s.off || !s.seen || s.avg > spinMax {
		return 0
	}
	return min(2*s.avg+spinSlack, spinMax)
}

// observe takes the length of a wait that ended with a stop.
func (s *spinWait) observe(d time.Duration) {
	d = min(max(d, 0), spinCap)
	if !s.seen {
		s.avg, s.seen = d, true
		return
	}
	s.avg += (d - s.avg) / 8
}
