package ptrun

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/softpt"
)

// fakePerf is a stand-in for `perf record` on a machine without Intel PT:
// it checks the command line ptjit gives it, runs the workload as its child
// exactly like perf record does (so ptjit must find and seize the helper
// through perf), and writes the perf.data named by $FAKE_PERF_DATA — one
// the soft backend made in the layout perf record -e intel_pt//u writes on
// hardware (per-CPU queues, context-switch records) — as its output.
const fakePerf = `#!/bin/bash
[ "$1" = record ] || { echo "fake perf: expected record, got $1" >&2; exit 9; }
shift
while [ "$1" != "--" ]; do
	case "$1" in
	-o) out=$2; shift ;;
	-e) ev=$2; shift ;;
	-q) ;;
	--switch-events) sw=1 ;;
	*) echo "fake perf: unexpected option $1" >&2; exit 9 ;;
	esac
	shift
done
shift
[ -n "$sw" ] || { echo "fake perf: no --switch-events: a per-CPU trace could not be split by thread" >&2; exit 9; }
[ -n "$FAKE_PERF_FAIL" ] && { echo "fake perf: $FAKE_PERF_FAIL" >&2; exit 1; }
echo "$ev" > "$out.event"
"$@"
status=$?
echo "$status" > "$out.status"
cp "$FAKE_PERF_DATA" "$out"
`

// withIntelPT makes the PT probe see an intel_pt PMU and the fake perf.
func withIntelPT(t *testing.T) (perfData string) {
	t.Helper()
	dir := t.TempDir()
	pmu := filepath.Join(dir, "intel_pt")
	os.MkdirAll(pmu, 0o755)
	os.WriteFile(filepath.Join(pmu, "type"), []byte("8\n"), 0o644)
	old := sysfsPMU
	sysfsPMU = pmu
	t.Cleanup(func() { sysfsPMU = old })
	perf := filepath.Join(dir, "perf")
	os.WriteFile(perf, []byte(fakePerf), 0o755)
	t.Setenv("PTJIT_PERF", perf)

	// A perf.data in perf's intel_pt layout, from a soft-PT recording.
	soft := filepath.Join(dir, "soft")
	var stderr bytes.Buffer
	status, err := Run(Config{OutDir: soft, Argv: []string{"/bin/true"}, PT: PTSoft, SoftLayout: softpt.LayoutPerCPU, SoftCPUs: 2, Quiet: true, Stderr: &stderr})
	if err != nil || status != 0 {
		t.Fatalf("soft recording: %d %v %s", status, err, stderr.String())
	}
	perfData = filepath.Join(soft, "perf.data")
	t.Setenv("FAKE_PERF_DATA", perfData)
	return perfData
}

func TestIntelPTThroughPerf(t *testing.T) {
	want := withIntelPT(t)
	out := filepath.Join(t.TempDir(), "rec")
	var stderr bytes.Buffer
	status, err := Run(Config{OutDir: out, Argv: []string{"/bin/sh", "-c", "exit 7"}, PT: PTIntel, Quiet: true, Stderr: &stderr})
	if err != nil || status != 7 {
		t.Fatalf("run: status %d, %v, stderr %q", status, err, stderr.String())
	}
	// perf was asked for the configured event and saw its workload end
	// with the program's status: the helper it ran became the program.
	ev, _ := os.ReadFile(filepath.Join(out, "perf.data.event"))
	if strings.TrimSpace(string(ev)) != perfEvent {
		t.Errorf("perf recorded event %q, want %q", ev, perfEvent)
	}
	st, _ := os.ReadFile(filepath.Join(out, "perf.data.status"))
	if strings.TrimSpace(string(st)) != "7" {
		t.Errorf("perf's workload exited %q, want 7", st)
	}
	// The program ran traced: code.db has it, with its exec image.
	d, err := db.Open(filepath.Join(out, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ps, err := d.Processes()
	if err != nil || len(ps) == 0 || ps[len(ps)-1].ExecPath == "" || ps[len(ps)-1].ExitStatus != 7 {
		t.Fatalf("processes in code.db: %+v %v", ps, err)
	}
	// What perf wrote is what ptjit reads back as the trace.
	got, _ := os.ReadFile(filepath.Join(out, "perf.data"))
	exp, _ := os.ReadFile(want)
	if !bytes.Equal(got, exp) {
		t.Fatal("perf.data is not the file perf wrote")
	}
	pd, err := perf.OpenPerfData(filepath.Join(out, "perf.data"))
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	tr, err := perf.LoadPerfTrace(pd)
	if err != nil || len(tr.Queues) == 0 || tr.Info == nil || !tr.TSCEnabled() {
		t.Fatalf("perf.data: %v, %d queues", err, len(tr.Queues))
	}
	// perf's layout for a workload: CPU queues, and the switch records
	// that split them by thread.
	switches := 0
	for i := range tr.Sideband {
		if tr.Sideband[i].Type == perf.RecSwitchCPUWide {
			switches++
		}
	}
	if !tr.Info.IntelPT.PerCPUMmaps || tr.Queues[0].CPU < 0 || switches == 0 {
		t.Errorf("perf.data: per_cpu_mmaps %v, queue 0 %s, %d SWITCH_CPU_WIDE records; want perf's per-CPU layout", tr.Info.IntelPT.PerCPUMmaps, tr.Queues[0], switches)
	}
}

func TestIntelPTUnavailable(t *testing.T) {
	withIntelPT(t)
	for _, tc := range []struct {
		name  string
		setup func()
		want  string
	}{
		{"no PMU", func() { sysfsPMU = filepath.Join(t.TempDir(), "none") }, "this CPU has no Intel PT"},
		{"no perf", func() { t.Setenv("PTJIT_PERF", "/nonexistent/perf") }, "perf is not installed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, oldPerf := sysfsPMU, os.Getenv("PTJIT_PERF")
			defer func() { sysfsPMU = old; os.Setenv("PTJIT_PERF", oldPerf) }()
			tc.setup()
			out := filepath.Join(t.TempDir(), "rec")
			status, err := Run(Config{OutDir: out, Argv: []string{"/bin/true"}, PT: PTIntel, Quiet: true})
			if status != 2 || !errors.Is(err, ErrNoIntelPT) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("status %d, %v; want 2 and %q", status, err, tc.want)
			}
			// Nothing half-recorded.
			if ents, _ := os.ReadDir(out); len(ents) != 0 {
				t.Errorf("left %d files in %s", len(ents), out)
			}
		})
	}
	// --pt=auto on such a machine records no trace and says so once.
	sysfsPMU = filepath.Join(t.TempDir(), "none")
	var stderr bytes.Buffer
	out := filepath.Join(t.TempDir(), "rec")
	status, err := Run(Config{OutDir: out, Argv: []string{"/bin/true"}, PT: PTAuto, Stderr: &stderr})
	if status != 0 || err != nil || strings.Count(stderr.String(), "--pt=soft") != 1 {
		t.Fatalf("auto: %d %v %q", status, err, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "perf.data")); err == nil {
		t.Error("auto without Intel PT wrote a perf.data")
	}
}

func TestIntelPTPerfFails(t *testing.T) {
	withIntelPT(t)
	t.Setenv("FAKE_PERF_FAIL", "intel_pt: PMU Hardware doesn't support sampling/overflow-interrupts")
	out := filepath.Join(t.TempDir(), "rec")
	status, err := Run(Config{OutDir: out, Argv: []string{"/bin/true"}, PT: PTIntel, Quiet: true})
	if status == 0 || err == nil || !strings.Contains(err.Error(), "doesn't support sampling") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("status %d, err %v: want a one-line error with perf's message", status, err)
	}
	if _, err := os.Stat(filepath.Join(out, "code.db")); err == nil {
		t.Error("a recording whose program never ran left its code.db")
	}
}
