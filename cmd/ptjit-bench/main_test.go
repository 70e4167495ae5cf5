package main

import (
	"errors"
	"testing"
)

// TestParseSummary reads ptjit's closing lines as ptjit run printed them
// (SBCL and tcc under the default mode, 2026-11-26), and a stderr
// without any.
func TestParseSummary(t *testing.T) {
	for _, tc := range []struct {
		name, stderr string
		want         summary
	}{
		{"sbcl", "sbcl says\nptjit: no PT trace recorded: this CPU has no Intel PT (no intel_pt PMU in /sys/bus/event_source/devices); use --pt=soft to trace in software\n" +
			"ptjit: 1 process, 2 threads, 38 regions, 1353 versions, 57 file mappings, 1457 stops, 1813.7 ms in stops (1244.8 µs/stop), 1277.1 MB snapshotted, copy: full (shared, file-backed or special memory), 877 writes (877 emulated, 0 stepped), 449 batch-writable pages, waited 545.3 ms for the database writer (29 times)\n",
			summary{versions: 1353, stops: 1457, stopMS: 1813.7, snapBytes: 1277.1e6, ok: true}},
		{"tcc", "ptjit: 1 process, 1 thread, 2 regions, 5 versions, 6 file mappings, 48 stops, 3.0 ms in stops (62.5 µs/stop), 0.0 MB snapshotted, copy: full (no range of 1 MiB or more made executable)\n",
			summary{versions: 5, stops: 48, stopMS: 3.0, ok: true}},
		{"KiB", "ptjit: 1 process, 1 thread, 1 region, 1 version, 7 stops, 2.5 ms in stops, 12 KiB snapshotted\n",
			summary{stops: 7, stopMS: 2.5, snapBytes: 12 << 10, ok: true}},
		{"none", "12 versions, 3 stops (the program's own words)\n", summary{}},
	} {
		if got := parseSummary(tc.stderr); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestVersionsNote: medians of the versions and snapshots of runs under
// ptjit, and a clear note where ptjit printed no summary.
func TestVersionsNote(t *testing.T) {
	line := func(v, mb string) run {
		return run{stderr: "ptjit: 1 process, 1 thread, 3 regions, " + v + " versions, 9 stops, 1.0 ms in stops, " + mb + " MB snapshotted\n"}
	}
	rs := []run{line("100", "2.0"), line("300", "9.0"), line("200", "4.0")}
	if got, want := versionsNote(rs), "200 versions, 4.0 MB snapshotted"; got != want {
		t.Errorf("versionsNote = %q, want %q", got, want)
	}
	if got, want := versionsNote([]run{{stderr: "crashed\n"}}), "no ptjit summary"; got != want {
		t.Errorf("versionsNote without a summary = %q, want %q", got, want)
	}
}

// TestExitNote: how the runtime rows report a run under ptjit that
// failed (Erlang's SIGSEGV, 2026-11-26).
func TestExitNote(t *testing.T) {
	for _, tc := range []struct {
		r    run
		want string
	}{
		{run{code: 139, stderr: "ptjit: 4 processes, 7 threads, 2306 versions, 2538 stops\n"},
			"exit status 139 (the program was killed by SIGSEGV, signal 11)"},
		{run{code: 1, stderr: "Traceback\nValueError: bad\nptjit: 1 process, 3 versions\n"},
			`exit status 1, its last line on stderr "ValueError: bad"`},
		{run{code: -1}, "ptjit: signal: killed"},
	} {
		if got := exitNote(tc.r, errors.New("ptjit: signal: killed")); got != tc.want {
			t.Errorf("exitNote(%+v) = %q, want %q", tc.r, got, tc.want)
		}
	}
}
