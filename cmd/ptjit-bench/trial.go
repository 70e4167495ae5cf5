package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// The runtime rows: runtimes nobody on the project wrote,
// each on a workload of testdata/runtimes that keeps its JIT at work for
// 0.2–2 s alone, alone and under ptjit run in the default mode,
// alternating, medians, with the load before and after. Rows
// runtime-sbcl, -qemu, -guile, -php and -erlang are held to the issue's
// target (≤ 1.5× alone), the others to staying where they were (≤ 1.15×).

func init() {
	for _, rt := range trialRuntimes {
		rows = append(rows, row{name: "runtime-" + rt.name, target: fmt.Sprintf("≤%.2f× alone", rt.limit),
			measure: func(b *bench) ([]measurement, error) { return measureTrial(b, rt) }})
	}
}

// trialRuntime is one runtime row: what it needs, how to prepare its
// command line, and its target.
type trialRuntime struct {
	name  string
	pkg   string   // the Debian package with tools
	tools []string // commands it needs
	limit float64  // ptjit run / alone
	what  string   // the workload, for the table
	// argv prepares the workload in tmp (src: testdata/runtimes) and
	// returns its command line.
	argv func(b *bench, src, tmp string) ([]string, error)
	env  []string
	// floorWX: the runtime's code is single-mapped RWX memory written
	// in bursts, which testdata/floor's wx mode (the least W^X) handles
	// as ptjit does: the row adds floor wx to its series (floor.go)
	floorWX bool
}

var trialRuntimes = []trialRuntime{
	// SBCL compiling 200 functions with COMPILE (each into its dynamic
	// space) and calling each 1000 times.
	{name: "sbcl", pkg: "sbcl", tools: []string{"sbcl"}, limit: 1.5, what: "compile.lisp 200",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			return []string{"sbcl", "--script", filepath.Join(src, "compile.lisp"), "200"}, nil
		}},
	// qemu-user (TCG) running a static glibc program's loop 5·10^7
	// times: glibc's start-up and the loop translated, then run.
	{name: "qemu", pkg: "qemu-user", tools: []string{"qemu-x86_64", "gcc"}, limit: 1.5, what: "hot.c static, 5·10^7",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			guest := filepath.Join(tmp, "hot-static")
			if _, err := b.exec("gcc", "-O2", "-static", "-o", guest, filepath.Join(src, "hot.c")); err != nil {
				return nil, err
			}
			return []string{"qemu-x86_64", guest, "50000000"}, nil
		}, floorWX: true},
	// Guile 3 compiling 60 procedures and calling each 3000 times,
	// past its JIT's threshold (the default, 1000).
	{name: "guile", pkg: "guile-3.0", tools: []string{"guile"}, limit: 1.5, what: "compile.scm 60",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			return []string{"guile", "--no-auto-compile", filepath.Join(src, "compile.scm"), "60"}, nil
		}, env: []string{"GUILE_AUTO_COMPILE=0"}, floorWX: true},
	// PHP's tracing JIT on a hot loop of 3·10^7 iterations (its JIT
	// buffer, 16 MiB here, is shared memory).
	{name: "php", pkg: "php-cli", tools: []string{"php"}, limit: 1.5, what: "hot.php 3·10^7",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			return []string{"php", "-n", "-d", "zend_extension=opcache", "-d", "opcache.enable_cli=1",
				"-d", "opcache.jit=tracing", "-d", "opcache.jit_buffer_size=16M", filepath.Join(src, "hot.php"), "30000000"}, nil
		}},
	// Erlang/OTP's BeamAsm (JIT code mapped twice: an executable view
	// and a writable one) booting and running a loop 10^6 times.
	{name: "erlang", pkg: "erlang-base", tools: []string{"erl", "erlc"}, limit: 1.5, what: "hot.erl 10^6",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			if _, err := b.exec("erlc", "-o", tmp, filepath.Join(src, "hot.erl")); err != nil {
				return nil, err
			}
			return []string{"erl", "-noshell", "-pa", tmp, "-eval", `hot:main(["1000000"]), halt().`}, nil
		}},
	{name: "pypy", pkg: "pypy3", tools: []string{"pypy3"}, limit: 1.15, what: "hot.py 3·10^7",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			return []string{"pypy3", filepath.Join(src, "hot.py"), "30000000"}, nil
		}},
	{name: "tcc", pkg: "tcc", tools: []string{"tcc"}, limit: 1.15, what: "-run hot.c 5·10^7",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			return []string{"tcc", "-run", filepath.Join(src, "hot.c"), "50000000"}, nil
		}},
	{name: "lli", pkg: "llvm-runtime", tools: []string{"lli"}, limit: 1.15, what: "hot.ll 5·10^7",
		argv: func(b *bench, src, tmp string) ([]string, error) {
			return []string{"lli", filepath.Join(src, "hot.ll"), "50000000"}, nil
		}},
}

// measureTrial runs rt's workload alone and under ptjit run (-q off: the
// summary gives the versions), alternating, and reports ptjit / alone in
// wall time (held to rt.limit) and in CPU time.
// A run under ptjit that fails, or prints other than the program alone,
// is the row's error, with what it printed and what the program does
// alone.
func measureTrial(b *bench, rt trialRuntime) ([]measurement, error) {
	for _, tool := range rt.tools {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("%s not found (apt-get install -y %s)", tool, rt.pkg)
		}
	}
	tmp := filepath.Join(filepath.Dir(b.outDir), "runtime-"+rt.name)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	argv, err := rt.argv(b, filepath.Join(b.testdata, "runtimes"), tmp)
	if err != nil {
		return nil, err
	}
	alone := func() (run, error) { return b.execEnv(rt.env, argv...) }
	first, err := alone()
	if err != nil {
		return nil, fmt.Errorf("alone: %v", err)
	}
	under := func() (run, error) {
		if err := os.RemoveAll(b.outDir); err != nil {
			return run{}, err
		}
		r, err := b.execEnv(rt.env, append([]string{b.ptjit, "run", "-o", b.outDir, "--"}, argv...)...)
		if err != nil {
			return r, fmt.Errorf("under ptjit run: %s; alone: exit 0, stdout %q", exitNote(r, err), strings.TrimSpace(first.stdout))
		}
		if r.stdout != first.stdout {
			return r, fmt.Errorf("under ptjit run it prints %q, alone %q", strings.TrimSpace(r.stdout), strings.TrimSpace(first.stdout))
		}
		return r, nil
	}
	load0 := loadavg()
	series := []func() (run, error){alone, under}
	floor := b.prog("floor")
	if rt.floorWX {
		if _, err := os.Stat(floor); err != nil {
			return nil, fmt.Errorf("%s missing (run make first)", floor)
		}
		for _, mode := range []string{"wx", "wxpoll"} {
			series = append(series, func() (run, error) {
				r, err := b.execEnv(rt.env, append([]string{floor, mode, "--"}, argv...)...)
				if err == nil && r.stdout != first.stdout {
					err = fmt.Errorf("under floor %s it prints %q, alone %q", mode, strings.TrimSpace(r.stdout), strings.TrimSpace(first.stdout))
				}
				return r, err
			})
		}
	}
	rs, err := b.series(series...)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("%s %s (%d runs, load %s → %s, %s)", rt.name, rt.what, b.runs, load0, loadavg(), versionsNote(rs[1]))
	// CPU time (user + system of the command and the children it waited
	// for: ptjit's includes the program's) is less at the mercy of other
	// load on the machine than wall time; the target is wall time's.
	cpu := func(r run) float64 { return r.cpu.Seconds() }
	out := []measurement{
		ratioLine(name+": ptjit run / alone", median(rs[1], wallSeconds), median(rs[0], wallSeconds),
			"s", "alone", fmt.Sprintf("≤%.2f×", rt.limit), func(r float64) bool { return r <= rt.limit }),
		ratioLine(rt.name+": CPU time, ptjit run / alone", median(rs[1], cpu), median(rs[0], cpu), "s", "alone", "-", nil),
	}
	if rt.floorWX {
		// the least W^X on this machine (the same faults and protection
		// changes, nothing else), blocking for each stop and polling
		// first as ptjit does, and ptjit over the polling one: what
		// ptjit's own work costs
		out = append(out,
			ratioLine(fmt.Sprintf("%s: floor wx / alone (%s)", rt.name, floorWXNote(rs[2])), median(rs[2], wallSeconds), median(rs[0], wallSeconds),
				"s", "alone", "-", nil),
			ratioLine(rt.name+": floor wxpoll / alone", median(rs[3], wallSeconds), median(rs[0], wallSeconds), "s", "alone", "-", nil),
			ratioLine(rt.name+": ptjit run / floor wxpoll", median(rs[1], wallSeconds), median(rs[3], wallSeconds), "s", "floor wxpoll", "-", nil))
	}
	return out, nil
}

// floorWXNote is the fault and injection counts of floor wx's last line
// (its median run's).
func floorWXNote(rs []run) string {
	for _, l := range strings.Split(rs[len(rs)/2].stderr, "\n") {
		if rest, ok := strings.CutPrefix(l, "floor: wx "); ok {
			return rest
		}
	}
	return "no floor summary"
}

// versionsNote says how many code versions and MB of snapshots the runs
// under ptjit made (medians, from ptjit's summary line).
func versionsNote(rs []run) string {
	if !parseSummary(rs[0].stderr).ok {
		return "no ptjit summary"
	}
	v := median(rs, func(r run) float64 { return parseSummary(r.stderr).versions })
	mb := median(rs, func(r run) float64 { return parseSummary(r.stderr).snapBytes }) / 1e6
	return fmt.Sprintf("%.0f versions, %.1f MB snapshotted", v, mb)
}

// exitNote says how a run under ptjit ended: its exit status, the signal
// that status stands for (ptjit exits 128+N when signal N killed the
// program), and the program's last line on stderr that is not ptjit's.
func exitNote(r run, err error) string {
	if r.code <= 0 {
		return err.Error()
	}
	note := fmt.Sprintf("exit status %d", r.code)
	if r.code > 128 && r.code < 128+65 {
		note += fmt.Sprintf(" (the program was killed by %s, signal %d)", unix.SignalName(syscall.Signal(r.code-128)), r.code-128)
	}
	var last string
	for _, l := range strings.Split(strings.TrimSpace(r.stderr), "\n") {
		if l != "" && !strings.HasPrefix(l, "ptjit: ") {
			last = l
		}
	}
	if last != "" {
		note += fmt.Sprintf(", its last line on stderr %q", last)
	}
	return note
}
