package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/recording"
	"github.com/ptjit/ptjit/x86"
	"github.com/spf13/cobra"
)

const decodeUsage = `ptjit decode [-i DIR] [--tid T] [FORMAT] [PTXED OPTIONS]
ptjit decode --pt FILE[:FROM[-TO]] --raw FILE[:FROM[-TO]]:BASE ... [FORMAT] [PTXED OPTIONS]

Decode Intel PT into the instruction flow, reading every instruction from the
code version valid when it ran.

Sources:
  -i DIR            a recording (default ./ptjit.out): PT from DIR/perf.data,
                    code versions from DIR/code.db, file mappings from code.db
  --tid T           only the trace of thread T (recording mode)
  --pt, --raw       raw mode, as libipt's ptxed

Formats (one of):
  (default)         instruction trace: time, address, symbol+offset or code
                    version, disassembly
  --insn            address and disassembly only
  --calls           call/return tree
  --json            one JSON object per instruction, event or error
  --stat            counts only
  --format=ptxed    exactly libipt ptxed's output (use --no-inst as ptxed)
  -j N              decode PSB segments on N goroutines (default: all cores)
  --window BYTES    hold at most this much of a trace in memory (default
                    64 MiB); windows end at PSBs

Decode errors appear in the flow with their trace offset and IP; decoding
resumes at the next PSB. All of ptxed's options are accepted (--cpu,
--event:ip, --filter:addr0_cfg, --resync-on-error, ...).`

var decodeCmd = &cobra.Command{
	Use:                "decode",
	Short:              "Decode Intel PT through the recorded code versions",
	Long:               decodeUsage,
	DisableFlagParsing: true,
	RunE: func(cmd *cobra.Command, args []string) error {
		return runDecode(args, cmd.OutOrStdout())
	},
}

func init() { rootCmd.AddCommand(decodeCmd) }

// decodeArgs are the options of ptjit decode that are not ptxed's.
type decodeArgs struct {
	dir     string
	tid     int
	hasTID  bool
	format  string // "trace", "insn", "calls", "json", "stat", "ptxed"
	jobs    int
	ptxed   []string // ptxed options (including --pt/--raw)
	rawMode bool
}

func parseDecodeArgs(args []string) (*decodeArgs, error) {
	a := &decodeArgs{dir: "ptjit.out", format: "trace", jobs: runtime.NumCPU()}
	ptxedFormat := false
	for _, arg := range args {
		if arg == "--format=ptxed" {
			ptxedFormat = true
		}
	}
	setFormat := func(f string) error {
		if a.format != "trace" && a.format != f {
			return fmt.Errorf("decode: --%s and --%s exclude each other", a.format, f)
		}
		a.format = f
		return nil
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		val := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("decode: %s: missing argument", arg)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case arg == "-h" || arg == "--help":
			return nil, errHelp
		case arg == "-i" || arg == "--input":
			a.dir, err = val()
		case strings.HasPrefix(arg, "--input="):
			a.dir = strings.TrimPrefix(arg, "--input=")
		case arg == "--tid":
			var v string
			if v, err = val(); err == nil {
				a.tid, err = strconv.Atoi(v)
				if err != nil || a.tid <= 0 {
					err = fmt.Errorf("decode: --tid %q: not a thread id", v)
				}
				a.hasTID = true
			}
		case arg == "-j":
			var v string
			if v, err = val(); err == nil {
				a.jobs, err = strconv.Atoi(v)
				if err != nil || a.jobs < 1 {
					err = fmt.Errorf("decode: -j %q: want a positive number", v)
				}
			}
		case arg == "--window":
			var v string
			if v, err = val(); err == nil {
				var n uint64
				n, err = strconv.ParseUint(v, 0, 31)
				if err != nil || n < 4096 {
					err = fmt.Errorf("decode: --window %q: want a byte count of at least 4096", v)
				}
				decode.DefaultWindow = int(n)
			}
		case arg == "--insn", arg == "--calls", arg == "--json", arg == "--stat" && !ptxedFormat:
			err = setFormat(strings.TrimPrefix(arg, "--"))
		case strings.HasPrefix(arg, "--format="):
			f := strings.TrimPrefix(arg, "--format=")
			switch f {
			case "ptxed", "trace", "insn", "calls", "json", "stat":
				a.format = f
			default:
				err = fmt.Errorf("decode: --format=%s: unknown format (ptxed, trace, insn, calls, json, stat)", f)
			}
		case arg == "--format":
			var f string
			if f, err = val(); err == nil {
				switch f {
				case "ptxed", "trace", "insn", "calls", "json", "stat":
					a.format = f
				default:
					err = fmt.Errorf("decode: --format %s: unknown format (ptxed, trace, insn, calls, json, stat)", f)
				}
			}
		default:
			if arg == "--pt" || arg == "--raw" {
				a.rawMode = true
			}
			a.ptxed = append(a.ptxed, arg)
		}
		if err != nil {
			return nil, err
		}
	}
	return a, nil
}

var errHelp = fmt.Errorf("help requested")

func runDecode(args []string, stdout io.Writer) error {
	a, err := parseDecodeArgs(append([]string(nil), args...))
	if err == errHelp {
		fmt.Fprintln(stdout, decodeUsage)
		return nil
	}
	if err != nil {
		return err
	}
	if a.format == "ptxed" && !a.rawMode {
		// A recording: each thread's flow as ptxed prints it, through the
		// recorded code versions.
		rec, traces, err := loadRecording(a)
		if err != nil {
			return err
		}
		defer rec.Close()
		o, err := ptfmt.ParsePtxedArgs(append(append([]string(nil), a.ptxed...), "--pt", filepath.Join(a.dir, "perf.data")))
		if err != nil {
			return fmt.Errorf("decode: %v", err)
		}
		o.Jobs = a.jobs
		for _, t := range traces {
			if len(traces) > 1 {
				fmt.Fprintf(stdout, "== %s\n", t.label)
			}
			if err := ptfmt.PtxedTrace(o, t.src, t.img, t.cfg, nil, stdout); err != nil {
				return err
			}
		}
		return nil
	}
	if a.format == "ptxed" {
		o, err := ptfmt.ParsePtxedArgs(a.ptxed)
		if err != nil {
			return fmt.Errorf("decode: %v", err)
		}
		o.Jobs = a.jobs
		return ptfmt.Ptxed(o, stdout)
	}
	var traces []decodeTrace
	if a.rawMode {
		traces, err = loadRawTrace(a)
	} else {
		var rec *recording.Recording
		if rec, traces, err = loadRecording(a); err == nil {
			defer rec.Close()
		}
	}
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	defer w.Flush()
	total := &statSink{}
	var size, done uint64
	for _, t := range traces {
		size += uint64(t.src.Size())
	}
	prog := startProgress(size)
	defer prog.finish()
	for _, t := range traces {
		if len(traces) > 1 && a.format != "json" && a.format != "stat" {
			fmt.Fprintf(w, "== %s\n", t.label)
		}
		if a.format == "json" {
			json.NewEncoder(w).Encode(map[string]any{"kind": "trace", "tid": t.tid, "pid": t.pid, "label": t.label})
		}
		var calls decode.FlowSink
		if a.format == "calls" {
			calls = newFormatSink(a.format, w, t.syms)
		}
		// The trace is decoded in windows that end at PSBs, so memory
		// stays bounded whatever its size (decode.ForEachWindow).
		err := decode.ForEachWindow(t.src, decode.DefaultWindow, func(pt []byte, stop, base uint64) {
			if calls != nil {
				// The call depth carries from chunk to chunk: decode in
				// parallel, print in order.
				decode.ParallelFlowWindow(pt, stop, t.img, t.cfg, &decode.OffsetSink{Next: calls, Base: base}, t.resync, a.jobs)
				prog.set(done + base + stop)
				return
			}
			// Each chunk renders its own text (or counts) on its worker.
			decode.ParallelFlowChunksWindow(pt, stop, t.img, t.cfg, t.resync, a.jobs,
				func() decode.FlowSink {
					c := &chunkOut{}
					c.w = bufio.NewWriterSize(&c.buf, 1<<16)
					c.inner = newFormatSink(a.format, c.w, t.syms)
					c.sink = &decode.OffsetSink{Next: c.inner, Base: base}
					return c
				},
				func(s decode.FlowSink) {
					c := s.(*chunkOut)
					c.w.Flush()
					w.Write(c.buf.Bytes())
					prog.set(done + base + c.last)
					if ss, ok := c.inner.(*statSink); ok {
						total.add(ss)
					}
				})
		})
		if err != nil {
			return fmt.Errorf("decode: %s: %v", t.label, err)
		}
		done += uint64(t.src.Size())
	}
	if a.format == "stat" {
		total.print(w)
	}
	return w.Flush()
}

// decodeTrace is one PT stream with the image to decode it through.
type decodeTrace struct {
	label  string
	tid    int
	pid    int
	src    decode.TraceReader
	img    *decode.Image
	cfg    *decode.FlowConfig
	syms   *recording.Symbolizer
	resync bool
}

func loadRawTrace(a *decodeArgs) ([]decodeTrace, error) {
	o, err := ptfmt.ParsePtxedArgs(a.ptxed)
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	if len(o.Raw) == 0 {
		return nil, fmt.Errorf("decode: raw mode needs at least one --raw FILE[:FROM[-TO]]:BASE")
	}
	img := decode.NewImage()
	for _, r := range o.Raw {
		file, off, size, base, err := ptfmt.ParseRawImage(r)
		if err != nil {
			return nil, fmt.Errorf("decode: %v", err)
		}
		if err := img.AddFile(file, off, size, base); err != nil {
			return nil, fmt.Errorf("decode: --raw %s: %v", r, err)
		}
	}
	pt, err := ptfmt.LoadPT(o.PT)
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	cfg, err := o.FlowConfig()
	if err != nil {
		// As ptxed: an unknown cpu means decoding by the spec.
		fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %v: decoding without errata\n", err)
	}
	return []decodeTrace{{label: o.PT, src: decode.BytesTrace(pt), img: img, cfg: cfg, syms: recording.NewSymbolizer(), resync: o.Resync}}, nil
}

// loadRecording opens the recording in a.dir: a PT stream per thread, each
// with its process's image and the recorded PT configuration.
// The caller closes the recording when done with the traces.
func loadRecording(a *decodeArgs) (*recording.Recording, []decodeTrace, error) {
	rec, err := recording.Open(a.dir, recording.Options{Warn: func(msg string) {
		fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %s\n", msg)
	}})
	if err != nil {
		return nil, nil, fmt.Errorf("decode: %v", err)
	}
	traces, err := recordingTraces(rec, a)
	if err != nil {
		rec.Close()
		return nil, nil, err
	}
	return rec, traces, nil
}

func recordingTraces(rec *recording.Recording, a *decodeArgs) ([]decodeTrace, error) {
	o, err := ptfmt.ParsePtxedArgs(append(append([]string(nil), a.ptxed...), "--pt", rec.PerfPath))
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	baseCfg, err := o.FlowConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %v: decoding without errata\n", err)
	}
	rec.PTConfig(&baseCfg.Packet, func(opt string) bool { return slices.Contains(a.ptxed, "--"+opt) })
	var out []decodeTrace
	for _, t := range rec.Threads() {
		if a.hasTID && t.TID != a.tid {
			continue
		}
		img, err := rec.Image(t.PID)
		if err != nil {
			return nil, fmt.Errorf("decode: %v", err)
		}
		cfg := *baseCfg
		out = append(out, decodeTrace{
			label: t.String(), tid: t.TID, pid: t.PID,
			src: t.Trace, img: img, cfg: &cfg, syms: rec.Symbolizer(), resync: o.Resync,
		})
	}
	if len(out) == 0 {
		if a.hasTID {
			return nil, fmt.Errorf("decode: %s: no trace for thread %d", rec.PerfPath, a.tid)
		}
		return nil, fmt.Errorf("decode: %s: no Intel PT trace in the file", rec.PerfPath)
	}
	return out, nil
}

// chunkOut is one parallel chunk's sink and the text it produced.
type chunkOut struct {
	buf   bytes.Buffer
	w     *bufio.Writer
	inner decode.FlowSink // the format's sink
	sink  decode.FlowSink // inner, with offsets in the whole trace
	last  uint64          // the last trace offset seen, for the progress display
}

func (c *chunkOut) Insn(in *decode.FlowInsn, off, tsc uint64) {
	c.last = off
	c.sink.Insn(in, off, tsc)
}
func (c *chunkOut) Event(ev *decode.Event, off uint64)     { c.sink.Event(ev, off) }
func (c *chunkOut) Error(e *decode.FlowError, kind string) { c.sink.Error(e, kind) }

func newFormatSink(format string, w *bufio.Writer, syms *recording.Symbolizer) decode.FlowSink {
	switch format {
	case "insn":
		return &traceSink{w: w, syms: syms, short: true}
	case "calls":
		return &callSink{w: w, syms: syms}
	case "json":
		return &jsonSink{enc: json.NewEncoder(w)}
	case "stat":
		return &statSink{}
	}
	return &traceSink{w: w, syms: syms}
}

// traceSink prints the instruction trace.
type traceSink struct {
	w     *bufio.Writer
	syms  *recording.Symbolizer
	short bool
}

func (s *traceSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.short {
		fmt.Fprintf(s.w, "%016x  %s\n", in.IP, ptfmt.FlowInsnText(in))
		return
	}
	spec := ""
	if in.Speculative {
		spec = "? "
	}
	fmt.Fprintf(s.w, "%16d  %s%016x  %-28s  %s\n", in.TSC, spec, in.IP, s.syms.Where(in), ptfmt.FlowInsnText(in))
}

func (s *traceSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "[%s]\n", ptfmt.EventText(ev, true))
}

func (s *traceSink) Error(e *decode.FlowError, kind string) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
}

// callSink prints the call/return tree: one line per call and return,
// indented by call depth.
type callSink struct {
	w     *bufio.Writer
	syms  *recording.Symbolizer
	depth int
	ret   bool // the previous instruction was a return
	call  bool // the previous instruction was a call
}

func (s *callSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.call {
		fmt.Fprintf(s.w, "%16d  %s-> %s\n", in.TSC, strings.Repeat("  ", s.depth), s.syms.Where(in))
		s.depth++
	}
	if s.ret {
		if s.depth > 0 {
			s.depth--
		}
		fmt.Fprintf(s.w, "%16d  %s<- %s\n", in.TSC, strings.Repeat("  ", s.depth), s.syms.Where(in))
	}
	s.call = in.Class.IsCall() || in.Class == x86.ClassFarCall || in.Class == x86.ClassSyscall
	s.ret = in.Class == x86.ClassRet || in.Class == x86.ClassFarRet || in.Class == x86.ClassSysret
}

func (s *callSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "%s[%s]\n", strings.Repeat("  ", s.depth), ptfmt.EventText(ev, true))
	s.call, s.ret = false, false
}

func (s *callSink) Error(e *decode.FlowError, kind string) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
	s.call, s.ret, s.depth = false, false, 0
}

// jsonSink prints one JSON object per line.
type jsonSink struct{ enc *json.Encoder }

type jsonInsn struct {
	Kind   string `json:"kind"`
	TSC    uint64 `json:"tsc"`
	IP     string `json:"ip"`
	Size   uint8  `json:"size"`
	Class  string `json:"class"`
	Spec   bool   `json:"speculative,omitempty"`
	Region string `json:"section,omitempty"`
	Offset uint64 `json:"pt_offset"`
}

func (s *jsonSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	r := jsonInsn{Kind: "insn", TSC: in.TSC, IP: fmt.Sprintf("%#x", in.IP), Size: in.Size, Class: in.Class.String(), Spec: in.Speculative, Offset: off}
	if in.Section != nil {
		r.Region = in.Section.Tag
	}
	s.enc.Encode(&r)
}

func (s *jsonSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	r := map[string]any{"kind": "event", "event": ptfmt.EventText(ev, true), "pt_offset": off}
	if ev.HasTSC {
		r["tsc"] = ev.TSC
	}
	s.enc.Encode(r)
}

func (s *jsonSink) Error(e *decode.FlowError, kind string) {
	s.enc.Encode(map[string]any{"kind": kind, "error": e.Code.String(), "pt_offset": e.Offset, "ip": fmt.Sprintf("%#x", e.IP)})
}

// statSink counts.
type statSink struct {
	insns, events, errors uint64
	classes               map[string]uint64
}

func (s *statSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	s.insns++
	if in.Class != x86.ClassOther {
		if s.classes == nil {
			s.classes = map[string]uint64{}
		}
		s.classes[in.Class.String()]++
	}
}

func (s *statSink) Event(ev *decode.Event, off uint64) {
	if !ev.StatusUpdate {
		s.events++
	}
}

func (s *statSink) Error(e *decode.FlowError, kind string) { s.errors++ }

func (s *statSink) add(o *statSink) {
	s.insns += o.insns
	s.events += o.events
	s.errors += o.errors
	for k, v := range o.classes {
		if s.classes == nil {
			s.classes = map[string]uint64{}
		}
		s.classes[k] += v
	}
}

func (s *statSink) print(w io.Writer) {
	fmt.Fprintf(w, "instructions: %d\nevents: %d\nerrors: %d\n", s.insns, s.events, s.errors)
	for _, k := range []string{"cond-jump", "jump", "ind-jump", "call", "ind-call", "ret", "far-call", "far-ret", "far-jump", "syscall", "sysret"} {
		if n := s.classes[k]; n != 0 {
			fmt.Fprintf(w, "%s: %d\n", k, n)
		}
	}
}
