package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/perf"
)

// TestSoftPTPerCPUPerf records programs with --pt=soft
// --soft-layout=per-cpu and checks the layout against perf's own decoder:
// perf script --itrace=i0ns -F tid,ip splits each CPU's queue into threads
// by the context-switch records alone, so per-thread flows equal to the
// ground truth mean the layout is the one perf expects.
//
// perf reads instruction bytes from the files named by MMAP2 records; it
// cannot see JIT code, nor code patched in memory. Every one of these
// programs runs such code, so the comparison is made after ptjit export
// jitdump and perf inject --jit, which give perf every code version ptjit
// recorded (as jitted-PID-N.so): then every executed instruction is
// decodable, and the comparison is exact — every thread's flow, in order,
// nothing left out.
//
// With --soft-filter=jit only JIT code is traced: each CPU's stream then
// also has the filter's TIP.PGE/TIP.PGD at the JIT code's boundaries.
//
// With --soft-cpus=2 (deterministic placement) the test also checks that
// the recordings contain what makes the layout hard: threads interleaved on
// one CPU, two processes on one CPU's queue, and threads migrating between
// CPUs. A run placed on the CPUs the threads really ran on (--pin=off) is
// checked too.
func TestSoftPTPerCPUPerf(t *testing.T) {
	e2eSetup(t)
	perfBin := testenv.Tool(t, "perf", "linux-perf")
	type want struct{ interleave, twoProcs, migrate bool }
	for _, tc := range []struct {
		prog string
		args []string
		want want
	}{
		{"jit-threads", []string{"--soft-cpus=2"}, want{interleave: true, migrate: true}},
		{"forker", []string{"--soft-cpus=2"}, want{twoProcs: true, migrate: true}},
		{"static-keys", []string{"--soft-cpus=2"}, want{migrate: true}},
		{"rwx-threads", []string{"--soft-cpus=2"}, want{interleave: true, migrate: true}},
		// jit-threads runs too few JIT instructions (about 2,400) for
		// the placement to move threads every 3,000.
		{"jit-threads", []string{"--soft-cpus=2", "--soft-filter=jit"}, want{interleave: true}},
		{"forker", []string{"--soft-cpus=2", "--soft-filter=jit"}, want{twoProcs: true, migrate: true}},
		{"static-keys", []string{"--soft-cpus=2", "--soft-filter=jit"}, want{}},
		{"rwx-threads", []string{"--soft-cpus=2", "--soft-filter=jit"}, want{interleave: true}},
		{"smc", []string{"--soft-cpus=2"}, want{}},
		{"smc", []string{"--soft-cpus=2", "--soft-filter=jit"}, want{}},
		{"ubpf-test", []string{"--soft-cpus=2"}, want{}},
		{"ubpf-test", []string{"--soft-cpus=2", "--soft-filter=jit"}, want{}},
		{"jit-threads", []string{"--pin=off"}, want{}},
		// perf's decoder pops its call stack at every ret, compressed
		// or not, where libipt's rule (ptjit decode) pops only at a
		// compressed one: the trace of retpush decodes the same under
		// both.
		{"retpush", nil, want{}},
		{"retpush", []string{"--soft-filter=jit"}, want{}},
	} {
		t.Run(tc.prog+strings.Join(tc.args, ""), func(t *testing.T) {
			tmp := t.TempDir()
			dir, gt := filepath.Join(tmp, "rec"), filepath.Join(tmp, "truth")
			native := e2eRun(t, []string{e2eProg(tc.prog)}, nil, "", "")
			args := append([]string{"run", "-q", "--pt=soft", "--soft-layout=per-cpu", "--ground-truth", gt, "-o", dir}, tc.args...)
			r := e2ePtjit(t, nil, append(args, "--", e2eProg(tc.prog))...)
			if r.code != native.code || r.stdout != native.stdout {
				t.Fatalf("under --soft-layout=per-cpu: exit %d, stdout\n%s\nalone: exit %d, stdout\n%s\nptjit stderr: %s", r.code, r.stdout, native.code, native.stdout, r.stderr)
			}
			truth := groundTruth(t, gt)
			l := perCPULayout(t, filepath.Join(dir, "perf.data"))
			t.Logf("%d CPU queues; interleaving on one CPU: %v, two processes on one CPU: %v, migration: %v", l.queues, l.interleave, l.twoProcs, l.migrate)
			if strings.Contains(strings.Join(tc.args, " "), "--soft-cpus") {
				if tc.want != (want{}) && l.queues < 2 {
					t.Errorf("%d AUX queues, want at least 2 CPUs", l.queues)
				}
				if tc.want.migrate && !l.migrate || tc.want.interleave && !l.interleave || tc.want.twoProcs && !l.twoProcs {
					t.Errorf("the deterministic placement did not produce what the test needs (want %+v)", tc.want)
				}
			}

			// ptjit decode splits the CPU queues by the same sideband:
			// every thread's flow equals the ground truth.
			checkAllFlows(t, dir, truth, "--format=ptxed", "--no-inst")
			// Through ptjit decode's own format, decoded in small
			// windows on 3 goroutines: the same flows.
			checkAllFlows(t, dir, truth, "--format=insn", "-j", "3", "--window", "16384")
			// Every event and offset of --json, where threads change
			// CPUs too, is the same decoded on one goroutine as on two.
			sameOnJobs(t, dir, "--json")

			exp := filepath.Join(tmp, "exp")
			if r := e2ePtjit(t, nil, "export", "jitdump", "-i", dir, "-o", exp); r.code != 0 {
				t.Fatalf("export: %d %s", r.code, r.stderr)
			}
			injected := filepath.Join(exp, "perf.jit.data")
			if out, err := exec.Command(perfBin, "inject", "--jit", "-i", filepath.Join(exp, "perf.data"), "-o", injected).CombinedOutput(); err != nil {
				t.Fatalf("perf inject: %v\n%s", err, out)
			}
			got := perfFlows(t, perfBin, injected)
			var tids []int
			for tid := range truth {
				tids = append(tids, tid)
			}
			sort.Ints(tids)
			total := 0
			for _, tid := range tids {
				if i := firstDiff(truth[tid], got[tid]); i >= 0 {
					t.Errorf("tid %d: %d instructions executed, perf decoded %d; first difference at #%d", tid, len(truth[tid]), len(got[tid]), i)
				}
				total += len(truth[tid])
				delete(got, tid)
			}
			for tid, ips := range got {
				t.Errorf("perf decoded %d instructions for tid %d, which executed none", len(ips), tid)
			}
			t.Logf("%d threads, %d instructions: perf's per-thread flows equal the ground truth", len(tids), total)
		})
	}
}

// sameOnJobs fails unless ptjit decode -i dir args prints the same with
// -j 1 as with -j 2.
func sameOnJobs(t *testing.T, dir string, args ...string) {
	t.Helper()
	r1 := e2ePtjit(t, nil, append([]string{"decode", "-i", dir, "-j", "1"}, args...)...)
	r2 := e2ePtjit(t, nil, append([]string{"decode", "-i", dir, "-j", "2"}, args...)...)
	if r1.code != 0 || r2.code != 0 {
		t.Fatalf("decode %v: exit %d with -j 1, %d with -j 2: %s%s", args, r1.code, r2.code, r1.stderr, r2.stderr)
	}
	if r1.stdout != r2.stdout {
		a, b := strings.Split(r1.stdout, "\n"), strings.Split(r2.stdout, "\n")
		for i := 0; i < len(a) && i < len(b); i++ {
			if a[i] != b[i] {
				t.Errorf("decode %v: line %d with -j 1:\n%s\nwith -j 2:\n%s", args, i+1, a[i], b[i])
				return
			}
		}
		t.Errorf("decode %v: %d lines with -j 1, %d with -j 2", args, len(a), len(b))
	}
}

// reFlowTID finds the thread in a decode's "== " header.
var reFlowTID = regexp.MustCompile(`(?:^|\()tid (\d+)`)

// checkAllFlows decodes every thread of the recording in dir in one run
// of ptjit decode (args: its format options, printing one address per
// line, as --format=ptxed --no-inst and --format=insn do) and checks that
// each thread's flow equals the ground truth, that no thread that ran
// nothing has a flow, and that the output has no error line (an
// unattributed stretch of a per-CPU trace is one).
func checkAllFlows(t *testing.T, dir string, truth map[int][]uint64, args ...string) {
	t.Helper()
	r := e2ePtjit(t, nil, append([]string{"decode", "-i", dir}, args...)...)
	if r.code != 0 {
		t.Fatalf("decode %v: exit %d: %s", args, r.code, r.stderr)
	}
	got := map[int][]uint64{}
	tid := -1
	if len(truth) == 1 {
		for k := range truth {
			tid = k // one thread: no "== " header
		}
	}
	var errs []string
	for _, l := range strings.Split(r.stdout, "\n") {
		if h, ok := strings.CutPrefix(l, "== "); ok {
			// "tid T, pid P" (per-CPU), "queue Q (tid T), pid P"
			// (per-thread)
			if m := reFlowTID.FindStringSubmatch(h); m != nil {
				tid, _ = strconv.Atoi(m[1])
			} else {
				tid = -1 // the unattributed pseudo-thread
			}
			continue
		}
		if len(l) >= 16 {
			if ip, err := strconv.ParseUint(l[:16], 16, 64); err == nil && (len(l) == 16 || l[16] == ' ') {
				got[tid] = append(got[tid], ip)
				continue
			}
		}
		if strings.Contains(l, "error") {
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 {
		t.Errorf("decode %v: %d error lines: %q", args, len(errs), errs[:min(3, len(errs))])
	}
	total := 0
	for tid, want := range truth {
		if i := firstDiff(want, got[tid]); i >= 0 {
			t.Errorf("decode %v: tid %d: %d instructions executed, %d decoded; first difference at #%d", args, tid, len(want), len(got[tid]), i)
		}
		total += len(want)
		delete(got, tid)
	}
	for tid, ips := range got {
		t.Errorf("decode %v: %d instructions decoded for tid %d, which executed none", args, len(ips), tid)
	}
	t.Logf("ptjit decode %v: %d threads, %d instructions equal the ground truth", args, len(truth), total)
}

// perfFlows runs perf script --itrace=i0nse -F tid,ip and returns each
// thread's instruction addresses; a decode error (an 'e' line) fails.
func perfFlows(t *testing.T, perfBin, file string) map[int][]uint64 {
	t.Helper()
	cmd := exec.Command(perfBin, "script", "-i", file, "--itrace=i0nse", "-F", "tid,ip")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("perf script -i %s: %v\n%s", file, err, stderr.String())
	}
	flows := map[int][]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		var tid int
		var ip uint64
		var err1, err2 error
		if len(f) == 2 {
			tid, err1 = strconv.Atoi(f[0])
			ip, err2 = strconv.ParseUint(f[1], 16, 64)
		}
		if len(f) != 2 || err1 != nil || err2 != nil {
			t.Fatalf("perf script: %q (a decode error?)", l)
		}
		flows[tid] = append(flows[tid], ip)
	}
	return flows
}

// perCPUScenarios is what a per-cpu perf.data's switch records show.
type perCPUScenarios struct {
	queues                        int
	interleave, twoProcs, migrate bool
}

// perCPULayout checks the per-cpu form of a perf.data (every AUX queue a
// CPU's, with the workload's pid as tid; one ITRACE_START per CPU; every
// switch record with a sample_id on a CPU that has a queue) and reports
// which scenarios its switch-in records show.
func perCPULayout(t *testing.T, path string) perCPUScenarios {
	t.Helper()
	pd, err := perf.OpenPerfData(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	tr, err := perf.LoadPerfTraceLazy(pd)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Info == nil || !tr.Info.IntelPT.PerCPUMmaps {
		t.Fatalf("AUXTRACE_INFO: per_cpu_mmaps not set")
	}
	var s perCPUScenarios
	cpus := map[int32]bool{}
	for _, q := range tr.Queues {
		if q.CPU < 0 || q.Tid != tr.Queues[0].Tid || q.Tid <= 0 {
			t.Errorf("%s: want a CPU queue whose tid is the workload's pid (%d)", q, tr.Queues[0].Tid)
		}
		cpus[q.CPU] = true
		s.queues++
	}
	tidsOn := map[uint32]map[uint32]bool{} // cpu → tids switched in
	pidsOn := map[uint32]map[uint32]bool{}
	cpusOf := map[uint32]map[uint32]bool{} // tid → cpus
	add := func(m map[uint32]map[uint32]bool, k, v uint32) {
		if m[k] == nil {
			m[k] = map[uint32]bool{}
		}
		m[k][v] = true
	}
	itrace := map[uint32]int{}
	for i := range tr.Sideband {
		rec := &tr.Sideband[i]
		switch rec.Type {
		case perf.RecItraceStart:
			itrace[rec.ID.CPU]++
		case perf.RecSwitch:
			t.Fatalf("record at %#x: PERF_RECORD_SWITCH in a recording whose switches are CPU-wide", rec.Offset)
		case perf.RecSwitchCPUWide:
			if !cpus[int32(rec.ID.CPU)] {
				t.Errorf("record at %#x: switch on cpu %d, which has no queue", rec.Offset, rec.ID.CPU)
			}
			if rec.SwitchOut() || rec.ID.Tid == 0 {
				continue
			}
			add(tidsOn, rec.ID.CPU, rec.ID.Tid)
			add(pidsOn, rec.ID.CPU, rec.ID.Pid)
			add(cpusOf, rec.ID.Tid, rec.ID.CPU)
		}
	}
	for c := range cpus {
		if itrace[uint32(c)] != 1 {
			t.Errorf("cpu %d: %d ITRACE_START records, want 1", c, itrace[uint32(c)])
		}
	}
	for c := range tidsOn {
		s.interleave = s.interleave || len(tidsOn[c]) > 1
		s.twoProcs = s.twoProcs || len(pidsOn[c]) > 1
	}
	for tid := range cpusOf {
		s.migrate = s.migrate || len(cpusOf[tid]) > 1
	}
	if len(tidsOn) == 0 {
		t.Error(fmt.Errorf("no switch-in record"))
	}
	return s
}

// TestSoftPTLayoutsAgree records the same single-threaded programs twice,
// in the per-thread and in the per-cpu layout, with address-space
// randomization off (ptjit runs under setarch -R, and its children
// inherit that), and checks that ptjit decode gives the same instructions
// at the same addresses, in the same order, from both: demultiplexing a
// CPU's queue by the sideband loses, adds or reorders nothing. Only the
// events differ (a per-cpu flow is preempted and resumed at each switch).
func TestSoftPTLayoutsAgree(t *testing.T) {
	e2eSetup(t)
	setarch := testenv.Tool(t, "setarch", "util-linux")
	for _, tc := range []struct {
		prog string
		args []string
	}{
		{"static-keys", nil},
		{"smc", nil},
		{"ubpf-test", nil},
		{"ubpf-test", []string{"--soft-filter=jit"}},
	} {
		t.Run(tc.prog+strings.Join(tc.args, ""), func(t *testing.T) {
			flows := map[string][]uint64{}
			for _, layout := range []string{"per-thread", "per-cpu"} {
				dir := filepath.Join(t.TempDir(), "rec")
				args := append([]string{setarch, "x86_64", "-R", e2e.ptjit, "run", "-q", "--pt=soft", "--soft-cpus=2", "--soft-layout=" + layout, "-o", dir}, tc.args...)
				if r := e2eRun(t, append(args, "--", e2eProg(tc.prog)), nil, "", ""); r.code != 0 {
					t.Fatalf("%s: exit %d: %s", layout, r.code, r.stderr)
				}
				r := e2ePtjit(t, nil, "decode", "-i", dir, "--format=insn")
				if r.code != 0 {
					t.Fatalf("decode %s: exit %d: %s", layout, r.code, r.stderr)
				}
				for _, l := range strings.Split(r.stdout, "\n") {
					if strings.HasPrefix(l, "== ") {
						t.Fatalf("decode %s: more than one thread: %q", layout, l)
					}
					if strings.Contains(l, "error") {
						t.Errorf("decode %s: %s", layout, l)
					}
					if len(l) > 16 && l[16] == ' ' {
						if ip, err := strconv.ParseUint(l[:16], 16, 64); err == nil {
							flows[layout] = append(flows[layout], ip)
						}
					}
				}
			}
			a, b := flows["per-thread"], flows["per-cpu"]
			if len(a) == 0 {
				t.Fatal("nothing decoded")
			}
			if i := firstDiff(a, b); i >= 0 {
				t.Errorf("per-thread: %d instructions, per-cpu: %d; first difference at #%d", len(a), len(b), i)
			}
			t.Logf("%d instructions, the same in both layouts", len(a))
		})
	}
}
