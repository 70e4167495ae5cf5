package recording

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptfmt"
)

// PerfettoUsage is the help of ptjit export perfetto.
const PerfettoUsage = `perfetto writes a timeline of the recording in DIR as Chrome Trace Event
Format JSON (FILE), which https://ui.perfetto.dev ("Open trace file") and
chrome://tracing open: per thread its calls as nested slices, named as
decode --calls names them (the names the JIT published, per code version),
at the times of the trace, in microseconds since the recording started (the
seconds of decode and history × 10^6); per process a track "code versions"
(an instant per version: region, version, address, size, cause, writer tid
and ip, names) and a track "W^X writes" (an instant per logged write).

A big trace: the output streams, about 130 bytes per call, and a thread's
timeline ends after --max-slices (default 1000000: about 130 MB; the warning
says at what time; 0: no limit). To see more, cut a window with --time
START,END (as decode: only its PSB segments are decoded), or leave short
calls out with --min-dur (each parent's end event counts them in
args.short_calls). What was left out is in the file's otherData and on
stderr. An existing FILE is refused without --force; -o - writes to stdout.`

// PerfettoOptions configure ExportPerfetto.
type PerfettoOptions struct {
	// Time is a window "START,END" as decode --time takes it (TimeBase
	// ParseRange); "": the whole recording.
	Time string
	// MinDur: calls shorter than this are left out (ptfmt.Timeline);
	// 0 keeps them all.
	MinDur time.Duration
	// MaxSlices: at most this many slices per thread; the thread's
	// timeline ends where it reached them (0: no limit).
	MaxSlices uint64
	// Force: replace an existing output file. Without it an existing
	// file is refused (ptjit does not know what it holds).
	Force        bool
	Jobs, Window int // as decode's -j and --window (0: defaults)
	// Warn receives what the export goes on without (a mapped file that
	// changed since the recording, an incomplete code.db), one line each.
	Warn func(msg string)
}

// PerfettoResult says what ExportPerfetto wrote.
type PerfettoResult struct {
	Threads          int
	Slices, Short    uint64 // slices written; left out, shorter than MinDur
	Versions, Writes int    // code-version and W^X-write instants
	Errors           uint64 // decode errors (each restarts a thread's stack)
	Cut              []string
}

// Pseudo-threads for a process's code versions and W^X writes: their own
// tracks. Linux thread ids stay below 1<<22 (PID_MAX_LIMIT), these above.
const (
	versionTrackTID = 2 << 22
	writeTrackTID   = 3 << 22
)

// ExportPerfetto writes the recording in dir as a Chrome Trace Event
// Format JSON file (ptfmt.TraceEventWriter) at out ("-": w): per traced
// thread, its calls as nested slices named as decode --calls names
// functions (the names the JIT published, per code version), with the
// trace's times; per process, a track "code versions" with an instant
// each time a version became valid and a track "W^X writes" with an
// instant per logged write. Times are microseconds since the recording
// started (the recording's time base: decode's seconds × 10^6).
//
// The output streams; what keeps it loadable is up to the options: Time
// decodes only a window (the PSB segments around it), MinDur leaves short
// calls out (each parent's end counts them), MaxSlices ends a thread's
// timeline. otherData in the file and the result say what was left out.
func ExportPerfetto(dir, out string, w io.Writer, o PerfettoOptions) (*PerfettoResult, error) {
	if out == "" {
		return nil, errors.New("-o FILE is required (-o - for stdout)")
	}
	if o.Warn == nil {
		o.Warn = func(string) {}
	}
	warn := o.Warn
	rec, err := Open(dir, Options{Warn: warn})
	if err != nil {
		return nil, err
	}
	defer rec.Close()
	tb, err := LoadTimeBase(rec.DB, false)
	if err != nil {
		return nil, err
	}
	from, to := uint64(0), uint64(0)
	if o.Time != "" {
		if from, to, err = tb.ParseRange("--time", o.Time); err != nil {
			return nil, err
		}
	}
	if o.MinDur < 0 {
		return nil, fmt.Errorf("--min-dur %v: negative", o.MinDur)
	}
	cfg, _ := ptfmt.NewPtxedOptions().FlowConfig()
	var srcs []Source
	if len(rec.Threads()) > 0 || rec.PerCPU() {
		if srcs, err = rec.Sources(0, cfg, func(string) bool { return false }); err != nil {
			return nil, err
		}
	} else {
		warn(rec.PerfPath + ": no PT trace: the timeline has the code versions and writes only")
	}
	procs, err := rec.DB.Processes()
	if err != nil {
		return nil, err
	}
	threads, err := rec.DB.Threads()
	if err != nil {
		return nil, err
	}
	versions, err := rec.DB.Versions(db.VersionFilter{})
	if err != nil {
		return nil, err
	}
	writes, err := rec.DB.Writes(0)
	if err != nil {
		return nil, err
	}
	names, err := LoadNames(rec.DB, 0, nil)
	if err != nil {
		return nil, err
	}

	if out != "-" {
		for _, in := range []string{rec.PerfPath, rec.DB.Path()} {
			if perf.SameFile(in, out) {
				return nil, fmt.Errorf("-o %s: is the recording's %s", out, filepath.Base(in))
			}
		}
		f, err := createOutput(out, o.Force)
		if err != nil {
			return nil, err
		}
		ok := false
		defer func() {
			if !ok {
				f.Close()
				os.Remove(out) // made here: a partial file would not load
			}
		}()
		res, err := writePerfetto(f, rec, srcs, perfettoInput{tb, from, to, procs, threads, versions, writes, names}, o)
		if err == nil {
			err = f.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", out, err)
		}
		ok = true
		return res, nil
	}
	return writePerfetto(w, rec, srcs, perfettoInput{tb, from, to, procs, threads, versions, writes, names}, o)
}

// createOutput creates path for writing; an existing file is replaced only
// with force, and a directory never.
func createOutput(path string, force bool) (*os.File, error) {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return nil, fmt.Errorf("-o %s: is a directory", path)
		}
		if !force {
			return nil, fmt.Errorf("-o %s: the file exists (ptjit does not know what it holds); remove it or give --force", path)
		}
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("-o %s: %v", path, err)
	}
	return f, nil
}

type perfettoInput struct {
	tb       TimeBase
	from, to uint64 // to 0: no window
	procs    []db.ProcessInfo
	threads  []db.ThreadInfo
	versions []db.VersionInfo
	writes   []db.WriteInfo
	names    *Names
}

func (in *perfettoInput) inWindow(tsc uint64) bool {
	return in.to == 0 || tsc >= in.from && tsc < in.to
}

func writePerfetto(w io.Writer, rec *Recording, srcs []Source, in perfettoInput, o PerfettoOptions) (*PerfettoResult, error) {
	tb := in.tb
	tw := ptfmt.NewTraceEventWriter(w, func(tsc uint64) float64 { return tb.Seconds(tsc) * 1e6 })
	res := &PerfettoResult{}

	// Names of the processes and threads; a process's last image names it.
	procName := map[int]string{}
	for _, p := range in.procs {
		n := filepath.Base(p.ExecPath)
		if p.ExecPath == "" && len(p.Argv) > 0 {
			n = filepath.Base(p.Argv[0])
		}
		if n == "" || n == "." {
			n = "process"
		}
		procName[p.PID] = n
	}
	threadName := map[int]string{}
	threadStart := map[int]uint64{}
	for _, t := range in.threads {
		threadName[t.TID] = t.Name
		threadStart[t.TID] = t.Start.TSC
	}
	pids := map[int]bool{}
	for _, s := range srcs {
		if s.TID > 0 {
			pids[s.PID] = true
		}
	}
	for _, v := range in.versions {
		pids[v.PID] = true
	}
	for _, wr := range in.writes {
		pids[wr.PID] = true
	}
	var pidList []int
	for p := range pids {
		pidList = append(pidList, p)
	}
	sort.Ints(pidList)
	for _, p := range pidList {
		name := procName[p]
		if name == "" {
			name = "process"
		}
		tw.Meta(p, p, "process_name", name)
		tw.Meta(p, versionTrackTID+p, "thread_name", "code versions")
		tw.Meta(p, versionTrackTID+p, "thread_sort_index", -2)
		tw.Meta(p, writeTrackTID+p, "thread_name", "W^X writes")
		tw.Meta(p, writeTrackTID+p, "thread_sort_index", -1)
	}

	// The calls of each thread, in turn.
	minDur := uint64(o.MinDur.Seconds() * float64(tb.Hz))
	run := FlowRun{Format: "stack", Window: o.Window, Jobs: o.Jobs, Time: tb, From: in.from, To: in.to,
		Stack: func(s *Source) (ptfmt.StackSink, func()) {
			if s.TID <= 0 {
				if len(s.Unattributed) > 0 {
					o.Warn(fmt.Sprintf("%d stretches of CPU queues belong to no thread: left out", len(s.Unattributed)))
				}
				return nil, nil
			}
			res.Threads++
			name := threadName[s.TID]
			if name == "" {
				name = "thread"
			}
			tw.Meta(s.PID, s.TID, "thread_name", fmt.Sprintf("%s %d", name, s.TID))
			start := threadStart[s.TID]
			if start == 0 || start < in.from {
				start = max(tb.StartTSC, in.from)
			}
			tl := &ptfmt.Timeline{W: tw, PID: s.PID, TID: s.TID, MinDur: minDur, MaxSlices: o.MaxSlices, Start: start}
			return tl, func() {
				res.Slices += tl.Slices
				res.Short += tl.Short
				if tl.Cut {
					res.Cut = append(res.Cut, fmt.Sprintf("tid %d at %s s", s.TID, tb.Format(tl.CutAt)))
				}
			}
		}}
	if run.Jobs <= 0 {
		run.Jobs = runtime.NumCPU()
	}
	if run.Window <= 0 {
		run.Window = decode.DefaultWindow
	}
	counts, err := WriteFlows(bufio.NewWriter(io.Discard), srcs, run)
	if err != nil {
		return nil, err
	}
	res.Errors = counts.Errors

	// The code versions and the W^X writes, on their processes' tracks.
	for i := range in.versions {
		v := &in.versions[i]
		if !in.inWindow(v.Valid.TSC) {
			continue
		}
		args := map[string]any{"region": v.Region, "version": v.Vno, "addr": hexAddr(v.Addr), "size": v.Size,
			"cause": v.Cause, "ip": hexAddr(v.IP), "tid": v.TID, "sha256": hex.EncodeToString(v.SHA256)}
		if ns := versionNames(in.names, v); len(ns) > 0 {
			args["names"] = ns
		}
		if v.HasEnd {
			args["until_us"] = math.Round(tb.Seconds(v.End.TSC)*1e9) / 1e3
		}
		tw.Instant(v.PID, versionTrackTID+v.PID, v.Valid.TSC, "code", fmt.Sprintf("region %d v%d", v.Region, v.Vno), args)
		res.Versions++
	}
	for i := range in.writes {
		wr := &in.writes[i]
		if !in.inWindow(wr.At.TSC) {
			continue
		}
		args := map[string]any{"addr": hexAddr(wr.Addr), "size": len(wr.New), "tid": wr.TID, "ip": hexAddr(wr.IP),
			"insn": wr.Insn, "old": hex.EncodeToString(wr.Old), "new": hex.EncodeToString(wr.New)}
		if wr.Version != 0 {
			args["version_id"] = wr.Version
		}
		tw.Instant(wr.PID, writeTrackTID+wr.PID, wr.At.TSC, "wx", fmt.Sprintf("write %s+%d", hexAddr(wr.Addr), len(wr.New)), args)
		res.Writes++
	}

	other := map[string]any{"ptjit_recording": rec.PerfPath, "ptjit_time_unit": "microseconds since the recording started",
		"ptjit_slices": res.Slices, "ptjit_decode_errors": res.Errors}
	if in.to != 0 {
		other["ptjit_time_window"] = o.Time
	}
	if minDur > 0 {
		other["ptjit_min_dur"] = o.MinDur.String()
		other["ptjit_short_calls_left_out"] = res.Short
	}
	if len(res.Cut) > 0 {
		other["ptjit_cut_by_max_slices"] = strings.Join(res.Cut, ", ")
	}
	if err := tw.Close(other); err != nil {
		return nil, err
	}
	if res.Short > 0 {
		o.Warn(fmt.Sprintf("%d calls shorter than --min-dur %v left out (their parents' args.short_calls count them)", res.Short, o.MinDur))
	}
	for _, c := range res.Cut {
		o.Warn(fmt.Sprintf("--max-slices %d reached: the timeline of %s ends there (export a later --time window for the rest)", o.MaxSlices, c))
	}
	if res.Errors > 0 {
		o.Warn(fmt.Sprintf("%d decode errors: each ends the open slices of its thread (decode shows them)", res.Errors))
	}
	return res, nil
}
