package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDecodeTimeWindow records testdata/ubpf-test with soft PT and checks
// decode --time against a full decode: the instructions of a window in
// the middle (given as raw TSC, tsc:N) are exactly the full decode's
// instructions in that range, in order; the same window given in
// seconds since the start (as decode prints time by default) gives the
// same instructions; and the default output's times are seconds that
// grow from the window's start.
func TestDecodeTimeWindow(t *testing.T) {
	e2eSetup(t)
	dir := filepath.Join(t.TempDir(), "rec")
	if r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "-o", dir, "--", e2eProg("ubpf-test")); r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	insns := func(out string) (lines []string, tscs []uint64) {
		for _, l := range strings.Split(out, "\n") {
			f := strings.Fields(l)
			if len(f) < 3 || strings.HasPrefix(l, "[") {
				continue
			}
			if _, err := strconv.ParseFloat(f[0], 64); err != nil {
				continue
			}
			v, _ := strconv.ParseUint(f[0], 10, 64)
			lines, tscs = append(lines, l), append(tscs, v)
		}
		return lines, tscs
	}
	// A window that cannot be applied, or is not one, is refused in one
	// line naming --time.
	for _, args := range [][]string{{"--format=ptxed", "--time", "0.1,0.2"}, {"--time", "0.1"}} {
		r := e2ePtjit(t, nil, append([]string{"decode", "-i", dir}, args...)...)
		if r.code == 0 || !strings.Contains(r.stderr, "--time") || strings.Count(strings.TrimSpace(r.stderr), "\n") > 0 {
			t.Errorf("decode %v: exit %d, stderr %q: want a one-line error naming --time", args, r.code, r.stderr)
		}
	}
	full := e2ePtjit(t, nil, "decode", "-i", dir, "--tsc")
	lines, tscs := insns(full.stdout)
	if len(lines) < 10000 {
		t.Fatalf("full decode: %d instructions", len(lines))
	}
	from, to := tscs[len(tscs)*2/5], tscs[len(tscs)*3/5]
	var want []string
	for i, v := range tscs {
		if v >= from && v < to {
			want = append(want, lines[i])
		}
	}
	win := e2ePtjit(t, nil, "decode", "-i", dir, "--tsc", "--time", "tsc:"+strconv.FormatUint(from, 10)+",tsc:"+strconv.FormatUint(to, 10))
	got, _ := insns(win.stdout)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("decode --time: %d instructions, the full decode has %d in the window", len(got), len(want))
	}
	// the same window in seconds: the default time base
	h := e2ePtjit(t, nil, "decode", "-i", dir, "--json", "--time", "tsc:"+strconv.FormatUint(from, 10)+",tsc:"+strconv.FormatUint(from+1, 10))
	var startSec string
	for _, l := range strings.Split(h.stdout, "\n") {
		if i := strings.Index(l, `"time":"`); i >= 0 {
			startSec = strings.SplitN(l[i+8:], `"`, 2)[0]
			break
		}
	}
	s0, err := strconv.ParseFloat(startSec, 64)
	if err != nil || s0 <= 0 {
		t.Fatalf("decode --json time %q: not seconds since the start", startSec)
	}
	sec := e2ePtjit(t, nil, "decode", "-i", dir, "--time", startSec+",")
	secLines, _ := insns(sec.stdout)
	if len(secLines) == 0 {
		t.Fatalf("decode --time %s,: nothing\n%s", startSec, sec.stderr)
	}
	first, _ := strconv.ParseFloat(strings.Fields(secLines[0])[0], 64)
	if first != s0 {
		t.Errorf("decode --time %s,: first instruction at %v s", startSec, first)
	}
	if n := len(secLines); n < len(lines)-len(lines)*2/5-10 {
		t.Errorf("decode --time %s,: %d instructions, want those from the window's start to the end", startSec, n)
	}
	// dump --time: only the PSB segments around the window
	fullDump := e2ePtjit(t, nil, "dump", "-i", dir)
	winDump := e2ePtjit(t, nil, "dump", "-i", dir, "--time", "tsc:"+strconv.FormatUint(from, 10)+",tsc:"+strconv.FormatUint(to, 10))
	m := regexp.MustCompile(`window is in bytes \[(0x[0-9a-f]+), (0x[0-9a-f]+)\)`).FindStringSubmatch(winDump.stdout)
	if winDump.code != 0 || m == nil {
		t.Fatalf("dump --time: exit %d, no window line\n%s", winDump.code, winDump.stderr)
	}
	lo, _ := strconv.ParseUint(m[1], 0, 64)
	hi, _ := strconv.ParseUint(m[2], 0, 64)
	nFull, nWin := strings.Count(fullDump.stdout, "\n"), strings.Count(winDump.stdout, "\n")
	if lo == 0 || hi <= lo || nWin >= nFull*3/4 {
		t.Errorf("dump --time: bytes [%#x, %#x), %d of %d lines: not a cut of the trace", lo, hi, nWin, nFull)
	}
	// the cut starts at the last PSB at or before the window's start
	if m := regexp.MustCompile(`tsc=0x([0-9a-f]+)`).FindStringSubmatch(winDump.stdout); m == nil {
		t.Error("dump --time: no TSC packet")
	} else if v, _ := strconv.ParseUint(m[1], 16, 64); v > from {
		t.Errorf("dump --time: first TSC %#x after the window's start %#x", v, from)
	}
}
