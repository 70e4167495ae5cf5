package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// bench holds what every row needs: the binaries and the run count.
type bench struct {
	ptjit    string // bin/ptjit
	testdata string // testdata (programs in testdata/bin)
	runs     int
	verbose  bool
	outDir   string // ptjit run -o target, replaced on every run
}

// run is one execution of a command.
type run struct {
	wall   time.Duration
	cpu    time.Duration // user + system time of the command
	maxRSS int64         // peak resident set of the command, KiB
	stdout string
	stderr string
	code   int // exit status (-1: killed by a signal)
}

// exec runs argv once and fails on a non-zero status.
func (b *bench) exec(argv ...string) (run, error) { return b.execEnv(nil, argv...) }

// execEnv is exec with environment variables added to the bench's own.
func (b *bench) execEnv(env []string, argv ...string) (run, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := run{wall: time.Since(start), stdout: out.String(), stderr: errb.String()}
	if ps := cmd.ProcessState; ps != nil {
		r.cpu = ps.UserTime() + ps.SystemTime()
		r.code = ps.ExitCode()
		if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
			r.maxRSS = ru.Maxrss
		}
	}
	if err != nil {
		msg := strings.TrimSpace(r.stderr)
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return r, fmt.Errorf("%s: %v (%s)", filepath.Base(argv[0]), err, msg)
	}
	if b.verbose {
		fmt.Fprintf(os.Stderr, "  %-60.60s %8.3f s\n", strings.Join(argv, " "), r.wall.Seconds())
	}
	return r, nil
}

// ptjitRun runs argv under ptjit run (summary on, recording in b.outDir).
func (b *bench) ptjitRun(argv ...string) (run, error) {
	return b.ptjitExec(append([]string{"run", "-o", b.outDir, "--"}, argv...)...)
}

// ptjitExec runs ptjit with args after removing the previous recording,
// so that no run pays for deleting another's (a --wx=precise java run
// leaves hundreds of MB).
func (b *bench) ptjitExec(args ...string) (run, error) {
	if err := os.RemoveAll(b.outDir); err != nil {
		return run{}, err
	}
	return b.exec(append([]string{b.ptjit}, args...)...)
}

// series runs each command b.runs times, interleaved (so drift in the
// machine's load hits all of them alike), and returns the runs per command.
func (b *bench) series(cmds ...func() (run, error)) ([][]run, error) {
	out := make([][]run, len(cmds))
	for i := 0; i < b.runs; i++ {
		for c, f := range cmds {
			r, err := f()
			if err != nil {
				return nil, err
			}
			out[c] = append(out[c], r)
		}
	}
	return out, nil
}

// median returns the median of f over rs.
func median(rs []run, f func(run) float64) float64 {
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	return medianOf(v)
}

// medianOf returns the median of v (the mean of the middle two where v
// has an even length; 0 where it is empty), leaving v as it was.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func wallSeconds(r run) float64 { return r.wall.Seconds() }

// summary is what ptjit's closing stderr line says.
type summary struct {
	versions  float64
	stops     float64
	stopMS    float64
	snapBytes float64
	ok        bool
}

var (
	reVers  = regexp.MustCompile(`(\d+) versions\b`)
	reStops = regexp.MustCompile(`(\d+) stops\b`)
	reStopT = regexp.MustCompile(`([0-9.]+) ms in stops`)
	reSnap  = regexp.MustCompile(`([0-9.]+) ([kKMG]i?B|B) snapshotted`)
)

// parseSummary reads ptjit's summary line from stderr.
func parseSummary(stderr string) summary {
	var s summary
	for _, l := range strings.Split(stderr, "\n") {
		if !strings.HasPrefix(l, "ptjit: ") {
			continue
		}
		if m := reStops.FindStringSubmatch(l); m != nil {
			s.stops, _ = strconv.ParseFloat(m[1], 64)
			s.ok = true
		}
		if m := reVers.FindStringSubmatch(l); m != nil {
			s.versions, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := reStopT.FindStringSubmatch(l); m != nil {
			s.stopMS, _ = strconv.ParseFloat(m[1], 64)
		}
		if m := reSnap.FindStringSubmatch(l); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			mult := map[byte]float64{'B': 1, 'k': 1e3, 'K': 1e3, 'M': 1e6, 'G': 1e9}[m[2][0]]
			if strings.Contains(m[2], "i") {
				mult = map[byte]float64{'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[m[2][0]]
			}
			s.snapBytes = v * mult
		}
	}
	return s
}

func main() {
	var b bench
	var rowsRE string
	flag.StringVar(&b.ptjit, "ptjit", "bin/ptjit", "the ptjit binary")
	flag.StringVar(&b.testdata, "testdata", "testdata", "the testdata directory (programs in testdata/bin)")
	flag.IntVar(&b.runs, "runs", 5, "runs per measurement (the median is reported)")
	flag.StringVar(&rowsRE, "rows", "", "only rows whose name matches this regular expression")
	flag.BoolVar(&b.verbose, "v", false, "print every command and its time on stderr")
	flag.Parse()
	if err := b.check(); err != nil {
		fmt.Fprintf(os.Stderr, "ptjit-bench: %v\n", err)
		os.Exit(1)
	}
	filter, err := regexp.Compile(rowsRE)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ptjit-bench: -rows %q: %v\n", rowsRE, err)
		os.Exit(2)
	}
	tmp, err := os.MkdirTemp("", "ptjit-bench-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "ptjit-bench: %v\n", err)
		os.Exit(1)
	}
	defer os.RemoveAll(tmp)
	b.outDir = filepath.Join(tmp, "rec")

	fmt.Printf("ptjit-bench: %s, medians of %d runs, %s\n", b.ptjit, b.runs, time.Now().UTC().Format(time.RFC3339))
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROW\tVALUE\tREFERENCE\tRATIO\tTARGET\tMET")
	failed := false
	for _, r := range rows {
		if !filter.MatchString(r.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "ptjit-bench: measuring %s...\n", r.name)
		ms, err := r.measure(&b)
		if err != nil {
			fmt.Fprintf(tw, "%s\terror: %v\t\t\t%s\t\n", r.name, err, r.target)
			failed = true
			continue
		}
		for _, m := range ms {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", m.name, m.value, m.ref, m.ratio, m.target, m.met)
		}
	}
	tw.Flush()
	if failed {
		os.Exit(1)
	}
}

// check makes sure the binaries exist before anything runs.
func (b *bench) check() error {
	if b.runs < 1 {
		return fmt.Errorf("-runs %d: need at least 1", b.runs)
	}
	if _, err := os.Stat(b.ptjit); err != nil {
		return fmt.Errorf("%s: %w (run make first)", b.ptjit, errors.Unwrap(err))
	}
	for _, p := range []string{"ubpf-test", "stopbench"} {
		if _, err := os.Stat(b.prog(p)); err != nil {
			return fmt.Errorf("%s: %w (run make first)", b.prog(p), errors.Unwrap(err))
		}
	}
	return nil
}

func (b *bench) prog(name string) string { return filepath.Join(b.testdata, "bin", name) }
