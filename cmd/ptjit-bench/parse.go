package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// The readers of what the measured commands print. Each reads one line
// format, says whether the line was there, and has a table test with the
// command's real output (parse_test.go).

var reStatInsns = regexp.MustCompile(`(?m)^instructions: (\d+)$`)
var reStatErrors = regexp.MustCompile(`(?m)^errors: (\d+)$`)

// statCounts reads `ptjit decode --stat`: the instructions decoded and the
// decode errors (0 where the line is absent).
func statCounts(stdout string) (insns, errs float64, ok bool) {
	m := reStatInsns.FindStringSubmatch(stdout)
	if m == nil {
		return 0, 0, false
	}
	insns, _ = strconv.ParseFloat(m[1], 64)
	if e := reStatErrors.FindStringSubmatch(stdout); e != nil {
		errs, _ = strconv.ParseFloat(e[1], 64)
	}
	return insns, errs, true
}

var reSoftPT = regexp.MustCompile(`soft PT: (\d+) instructions, (\d+) trace bytes \(([0-9.]+) B/insn, ([0-9.]+) B/insn without MTC`)

// softPT is ptjit run --pt=soft's closing line on stderr.
type softPT struct {
	insns, bytes          float64
	perInsn, perInsnNoMTC float64 // trace bytes per instruction, with and without MTC
}

// parseSoftPT reads the soft-PT line of ptjit run's stderr.
func parseSoftPT(stderr string) (softPT, bool) {
	m := reSoftPT.FindStringSubmatch(stderr)
	if m == nil {
		return softPT{}, false
	}
	var s softPT
	s.insns, _ = strconv.ParseFloat(m[1], 64)
	s.bytes, _ = strconv.ParseFloat(m[2], 64)
	s.perInsn, _ = strconv.ParseFloat(m[3], 64)
	s.perInsnNoMTC, _ = strconv.ParseFloat(m[4], 64)
	return s, true
}

var reSteps = regexp.MustCompile(`steps: (\d+) in (\d+) ns`)

// stepRate reads stepbench --trace's account of its bare single-step
// loop: steps per second.
func stepRate(stdout string) (float64, bool) {
	m := reSteps.FindStringSubmatch(stdout)
	if m == nil {
		return 0, false
	}
	steps, _ := strconv.ParseFloat(m[1], 64)
	ns, _ := strconv.ParseFloat(m[2], 64)
	if ns == 0 {
		return 0, false
	}
	return steps / (ns / 1e9), true
}

var reWorkload = regexp.MustCompile(`workload: (\d+) mprotect calls in (\d+) ns`)

// workload reads stopbench's own account: mprotect calls and their time.
func workload(r run) (calls, ns float64, err error) {
	m := reWorkload.FindStringSubmatch(r.stdout)
	if m == nil {
		return 0, 0, fmt.Errorf("stopbench printed no workload line: %q", r.stdout)
	}
	calls, _ = strconv.ParseFloat(m[1], 64)
	ns, _ = strconv.ParseFloat(m[2], 64)
	return calls, ns, nil
}

var reTracerStops = regexp.MustCompile(`tracer: (\d+) stops`)

// tracerStops reads the stop count stopbench trace's own tracer prints.
func tracerStops(stdout string) (float64, bool) {
	m := reTracerStops.FindStringSubmatch(stdout)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return n, true
}

// helperCount reads libipt-helper's bench modes ("COUNT NS"): the
// instructions libipt decoded.
func helperCount(stdout string) (float64, error) {
	f := strings.Fields(stdout)
	if len(f) != 2 {
		return 0, fmt.Errorf("libipt-helper printed %q, want \"COUNT NS\"", stdout)
	}
	n, err := strconv.ParseFloat(f[0], 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("libipt-helper printed no count: %q", stdout)
	}
	return n, nil
}

var reSlices = regexp.MustCompile(`: (\d+) slices of`)

// perfettoSlices reads the slice count ptjit export perfetto prints.
func perfettoSlices(stdout string) (float64, bool) {
	m := reSlices.FindStringSubmatch(stdout)
	if m == nil {
		return 0, false
	}
	n, _ := strconv.ParseFloat(m[1], 64)
	return n, true
}

// bulkRange reads alias-jit's "BULK ADDR PAGES" line: the range its bulk
// fill wrote.
func bulkRange(stdout string) (lo uint64, pages int, err error) {
	for _, l := range strings.Split(stdout, "\n") {
		if a, ok := strings.CutPrefix(l, "BULK "); ok {
			if _, err := fmt.Sscanf(a, "%v %d", &lo, &pages); err != nil {
				return 0, 0, fmt.Errorf("alias-jit: %q: %v", l, err)
			}
		}
	}
	if lo == 0 || pages <= 0 {
		return 0, 0, fmt.Errorf("alias-jit printed no BULK line")
	}
	return lo, pages, nil
}

// firstField returns the first field of /proc/loadavg's text (the
// 1-minute load average), or "?".
func firstField(loadavg string) string {
	f := strings.Fields(loadavg)
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}
