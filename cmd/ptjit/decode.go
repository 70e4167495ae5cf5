package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/recording"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

const decodeUsage = `ptjit decode [-i DIR] [--tid T] [FORMAT] [PTXED OPTIONS]
ptjit decode --pt FILE[:FROM[-TO]] --raw FILE[:FROM[-TO]]:BASE ... [FORMAT] [PTXED OPTIONS]

Decode Intel PT into the instruction flow, reading every instruction from the
code version valid when it ran.

Sources:
  -i DIR            a recording (default ./ptjit.out): PT from DIR/perf.data,
                    code versions from DIR/code.db, file mappings from code.db
  --tid T           only the trace of thread T (a recording, or the queue of
                    tid T of a --pt perf.data)
  --pt, --raw       raw mode, as libipt's ptxed; --pt FILE may also be a
                    perf.data (file or pipe mode, recognised by content):
                    each AUX queue is decoded through the --raw image with
                    the recorded PT configuration; --pt - reads stdin;
                    with a byte range FILE is always raw trace

Formats (one of):
  (default)         instruction trace: time, address, symbol+offset or code
                    version, disassembly
  --insn            address and disassembly only
  --calls           call/return tree
  --json            one JSON object per instruction, event or error
  --stat            counts only
  --folded          folded stacks for flame graphs: "tid T;f;g;h N", N
                    instructions run with that stack (stacks from calls and
                    returns, frames named as --calls names functions; a
                    trace starting mid-stack roots at the function it is in
                    and a return past it prepends the caller; after a decode
                    error the stack restarts, counted on stderr; stacks
                    deeper than 512 end in "[depth > 512]")
  --summary         per thread: instructions, calls and time (TSC between
                    timing updates shared by instructions) per function,
                    and instructions per code version
  --format=ptxed    exactly libipt ptxed's output (use --no-inst as ptxed)
  -j N              decode PSB segments on N goroutines (default: all cores)
  --window BYTES    hold at most this much of a trace in memory (default
                    64 MiB); windows end at PSBs

Decode errors appear in the flow with their trace offset and IP; decoding
resumes at the next PSB. All of ptxed's options are accepted (--cpu,
--event:ip, --filter:addr0_cfg, --resync-on-error, ...).`

// decodeArgs are the options of ptjit decode.
type decodeArgs struct {
	dir     string
	tid     int      // 0: every thread
	format  string   // "trace", "insn", "calls", "json", "stat", "folded", "summary", "ptxed"
	formats []string // --insn, --calls, --json, --stat and "format=F" in command-line order
	jobs    int
	window  int
	ptxed   *ptfmt.PtxedOptions // ptxed's options (--stat only with --format=ptxed)
	given   map[string]bool     // the ptxed options given
	rawMode bool                // --pt or --raw given
	rawTSC  bool                // --tsc: print raw TSC
	times   string              // --time START,END
	// timeBare: --time without =: ptxed's, or the window when a
	// START,END argument follows
	timeBare bool
}

func newDecodeArgs() decodeArgs {
	return decodeArgs{dir: "ptjit.out", format: "trace", jobs: runtime.NumCPU(), window: decode.DefaultWindow,
		ptxed: ptfmt.NewPtxedOptions(), given: map[string]bool{}}
}

// decodeFlag is a flag of ptjit decode; set applies its value to args,
// the options being parsed, in command-line order.
type decodeFlag struct {
	set  func(v string) error
	typ  string // "bool" for flags without a value
	args *decodeArgs
}

func (f *decodeFlag) String() string     { return "" }
func (f *decodeFlag) Set(v string) error { return f.set(v) }
func (f *decodeFlag) Type() string       { return f.typ }

// Reset restores every option's default (resetFlags, before a command line
// is parsed).
func (f *decodeFlag) Reset() { *f.args = newDecodeArgs() }

func init() {
	a := new(decodeArgs)
	*a = newDecodeArgs()
	decodeCmd := &cobra.Command{
		Use:   "decode",
		Short: "Decode Intel PT through the recorded code versions",
		Long:  decodeUsage,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && a.timeBare && strings.Contains(args[0], ",") {
				a.times, a.timeBare = args[0], false // --time START,END
				a.ptxed.Time = false
				return nil
			}
			if len(args) > 0 && a.timeBare {
				return fmt.Errorf("decode: --time %s: a time window is --time START,END (seconds since the start, with ms/us/ns, or tsc:N); bare --time is ptxed's timestamps", args[0])
			}
			if len(args) > 0 {
				return fmt.Errorf("decode: unknown option: %s", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := *a
			*a = newDecodeArgs()
			return runDecode(&opts, cmd.OutOrStdout())
		},
	}
	fs := decodeCmd.Flags()
	add := func(name, short string, hasArg bool, usage string, set func(v string) error) {
		f := fs.VarPF(&decodeFlag{set: set, typ: "string", args: a}, name, short, usage)
		if !hasArg {
			f.Value.(*decodeFlag).typ, f.NoOptDefVal = "bool", "true"
		}
	}
	add("input", "i", true, "recording directory", func(v string) error { a.dir = v; return nil })
	add("tid", "", true, "only the trace of this thread", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("--tid %q: not a thread id", v)
		}
		a.tid = n
		return nil
	})
	add("jobs", "j", true, "decode PSB segments on N goroutines", func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("-j %q: want a positive number", v)
		}
		a.jobs = n
		return nil
	})
	add("window", "", true, "hold at most this many bytes of a trace in memory", func(v string) error {
		n, err := strconv.ParseUint(v, 0, 31)
		if err != nil || n < 4096 {
			return fmt.Errorf("--window %q: want a byte count of at least 4096", v)
		}
		a.window = int(n)
		return nil
	})
	add("tsc", "", false, "print raw TSC instead of seconds since the start", func(string) error { a.rawTSC = true; return nil })
	for _, f := range []string{"insn", "calls", "json", "stat", "folded", "summary"} {
		add(f, "", false, "format", func(string) error { a.formats = append(a.formats, f); return nil })
	}
	add("format", "", true, "ptxed, trace, insn, calls, json, stat, folded or summary", func(v string) error {
		switch v {
		case "ptxed", "trace", "insn", "calls", "json", "stat", "folded", "summary":
			a.formats = append(a.formats, "format="+v)
			return nil
		}
		return fmt.Errorf("--format=%s: unknown format (ptxed, trace, insn, calls, json, stat, folded, summary)", v)
	})
	for _, f := range ptfmt.PtxedFlags {
		if f.Name == "stat" {
			continue // the format flag, ptxed's with --format=ptxed
		}
		add(f.Name, f.Short, f.HasArg, "ptxed: "+f.Usage, func(v string) error {
			if f.Name == "time" && v != "true" {
				a.times = v // --time=START,END: the window; bare --time is ptxed's
				return nil
			}
			if f.HasArg && (v == "" || strings.HasPrefix(v, "--")) {
				return fmt.Errorf("--%s: missing argument", f.Name)
			} else if !f.HasArg && v != "true" {
				return fmt.Errorf("unknown option: --%s=%s", f.Name, v)
			}
			a.timeBare = a.timeBare || f.Name == "time"
			a.rawMode = a.rawMode || f.Name == "pt" || f.Name == "raw"
			a.given[f.Name] = true
			return a.ptxed.Set(f.Name, v)
		})
	}
	// Errors read as the options' own ("decode: --tid "x": not a thread id").
	decodeCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		var inv *pflag.InvalidValueError
		var req *pflag.ValueRequiredError
		var nx *pflag.NotExistError
		switch {
		case errors.As(err, &inv):
			err = inv.Unwrap()
		case errors.As(err, &req) && req.GetSpecifiedShortnames() != "":
			err = fmt.Errorf("-%s: missing argument", req.GetSpecifiedName())
		case errors.As(err, &req):
			err = fmt.Errorf("--%s: missing argument", req.GetSpecifiedName())
		case errors.As(err, &nx) && nx.GetSpecifiedShortnames() != "":
			err = fmt.Errorf("unknown option: -%s", nx.GetSpecifiedName()[:1])
		case errors.As(err, &nx):
			err = fmt.Errorf("unknown option: --%s", nx.GetSpecifiedName())
		}
		return fmt.Errorf("decode: %v", err)
	})
	decodeCmd.SetHelpFunc(func(c *cobra.Command, _ []string) { fmt.Fprintln(c.OutOrStdout(), decodeUsage) })
	rootCmd.AddCommand(decodeCmd)
}

// resolveFormat sets a.format from the format flags, in order: --format
// sets it, --insn, --calls, --json and --stat exclude each other, and
// with --format=ptxed --stat is ptxed's.
func (a *decodeArgs) resolveFormat() error {
	ptxedFormat := slices.Contains(a.formats, "format=ptxed")
	for _, f := range a.formats {
		if v, ok := strings.CutPrefix(f, "format="); ok {
			a.format = v
			continue
		}
		if f == "stat" && ptxedFormat {
			a.ptxed.Set("stat", "")
			continue
		}
		if a.format != "trace" && a.format != f {
			return fmt.Errorf("decode: --%s and --%s exclude each other", a.format, f)
		}
		a.format = f
	}
	return nil
}

func runDecode(a *decodeArgs, stdout io.Writer) error {
	if err := a.resolveFormat(); err != nil {
		return err
	}
	o := a.ptxed
	o.Jobs, o.Window = a.jobs, a.window
	if a.rawMode && o.PT == "" {
		return fmt.Errorf("decode: no pt file")
	}
	if a.format == "ptxed" && a.rawMode && !recording.IsPerfInput(o.PT) {
		return ptfmt.Ptxed(o, stdout)
	}
	given := func(opt string) bool { return a.given[opt] }
	var traces []recording.Source
	var closer io.Closer
	var err error
	tb := recording.TimeBase{Raw: true} // a raw trace: no start, no frequency
	if a.rawMode {
		closer, traces, err = recording.OpenRaw(o, flowConfig(o), a.tid, given)
	} else {
		var rec *recording.Recording
		rec, err = recording.Open(a.dir, recording.Options{
			Warn:       func(msg string) { fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %s\n", msg) },
			Incomplete: func(msg string) { fmt.Fprintf(os.Stderr, "ptjit: warning: %s\n", msg) },
		})
		if err == nil {
			closer = rec
			if traces, err = rec.Sources(a.tid, flowConfig(o), given); err == nil {
				tb, err = recording.LoadTimeBase(rec.DB, a.rawTSC)
			}
		}
	}
	if closer != nil {
		defer closer.Close()
	}
	if err != nil {
		return fmt.Errorf("decode: %v", err)
	}
	var from, to uint64
	if a.times != "" {
		if from, to, err = tb.ParseRange("--time", a.times); err != nil {
			return fmt.Errorf("decode: %v", err)
		}
	}
	if a.format == "ptxed" && to != 0 {
		return fmt.Errorf("decode: --time %s: a time window does not apply to --format=ptxed (its flow is libipt's, whole); use another --format", a.times)
	}
	if a.format == "ptxed" {
		// A recording: each thread's flow as ptxed prints it, through the
		// recorded code versions.
		for _, t := range traces {
			if len(traces) > 1 {
				fmt.Fprintf(stdout, "== %s\n", t.Label)
			}
			bw := bufio.NewWriter(stdout)
			t.WriteProblems(bw, "trace", nil)
			bw.Flush()
			if err := ptfmt.PtxedTrace(o, t.Trace, t.Image, t.Config, nil, stdout); err != nil {
				return err
			}
		}
		return nil
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	var size uint64
	for _, t := range traces {
		size += uint64(t.Trace.Size())
	}
	prog := startProgress(size)
	defer prog.finish()
	counts, err := recording.WriteFlows(w, traces, recording.FlowRun{Format: a.format, Window: a.window, Jobs: a.jobs,
		Resync: o.Resync, Time: tb, From: from, To: to, Progress: prog.set,
		Warn: func(msg string) { fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %s\n", msg) }})
	if err != nil {
		return fmt.Errorf("decode: %v", err)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if counts.Insns == 0 && counts.Errors > 0 {
		// Only errors: say so in the exit status too (the errors are in
		// the output).
		return fmt.Errorf("decode: no instruction decoded, %d decode errors (see the output)", counts.Errors)
	}
	return nil
}

// flowConfig is the decoder configuration of the options; as ptxed, an
// unknown cpu means decoding by the spec.
func flowConfig(o *ptfmt.PtxedOptions) *decode.FlowConfig {
	cfg, err := o.FlowConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %v: decoding without errata\n", err)
	}
	return cfg
}
