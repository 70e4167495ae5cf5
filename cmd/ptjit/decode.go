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
	"strconv"
	"strings"
	"sync"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/internal/elfnote"
	"github.com/ptjit/ptjit/perf"
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
		traces, err := loadRecording(a)
		if err != nil {
			return err
		}
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
		traces, err = loadRecording(a)
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
	syms   *symbolizer
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
	return []decodeTrace{{label: o.PT, src: decode.BytesTrace(pt), img: img, cfg: cfg, syms: newSymbolizer(), resync: o.Resync}}, nil
}

// loadRecording reads a ptjit recording: PT streams from perf.data, code
// versions and file mappings from code.db.
func loadRecording(a *decodeArgs) ([]decodeTrace, error) {
	perfPath := filepath.Join(a.dir, "perf.data")
	codePath := filepath.Join(a.dir, "code.db")
	pd, err := perf.OpenPerfData(perfPath)
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	tr, err := perf.LoadPerfTraceLazy(pd)
	if err != nil {
		return nil, fmt.Errorf("decode: %s: %v", perfPath, err)
	}
	if tr.Truncated {
		fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %s is cut short (its writer was killed or met a write error): decoding up to the cut\n", perfPath)
	}
	cdb, err := openCodeDB(codePath, os.Stderr)
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	defer cdb.Close()
	threads, err := cdb.Threads()
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	pidOf := map[int]int{}
	for _, t := range threads {
		pidOf[t.TID] = t.PID
	}
	o, err := ptfmt.ParsePtxedArgs(append(append([]string(nil), a.ptxed...), "--pt", perfPath))
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	baseCfg, err := o.FlowConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %v: decoding without errata\n", err)
	}
	if tr.Info != nil && tr.PTAttr != nil {
		if ipt := tr.Info.IntelPT; tr.Info.Type == perf.AuxtraceIntelPT && ipt.MTCFreqBits != 0 && baseCfg.Packet.MTCFreq == 0 {
			shift := 0
			for ipt.MTCFreqBits>>uint(shift)&1 == 0 {
				shift++
			}
			baseCfg.Packet.MTCFreq = uint8((tr.PTAttr.Config & ipt.MTCFreqBits) >> uint(shift))
		}
		// MTC and CYC times need the TSC:CTC ratio and the nominal ratio
		// the recording was made with.
		if ipt := tr.Info.IntelPT; ipt.HasMTC && baseCfg.Packet.CPUID15EAX == 0 && baseCfg.Packet.CPUID15EBX == 0 {
			baseCfg.Packet.CPUID15EAX, baseCfg.Packet.CPUID15EBX = ipt.TSCCTCD, ipt.TSCCTCN
		}
		if ipt := tr.Info.IntelPT; ipt.HasMTC && baseCfg.Packet.NomFreq == 0 {
			baseCfg.Packet.NomFreq = uint8(ipt.MaxNonTurboRatio)
		}
	}
	images := map[int]*decode.Image{}
	imageFor := func(pid int) (*decode.Image, error) {
		if img, ok := images[pid]; ok {
			return img, nil
		}
		img, err := buildImage(cdb, pid)
		if err != nil {
			return nil, err
		}
		images[pid] = img
		return img, nil
	}
	var out []decodeTrace
	for _, q := range tr.Queues {
		if q.Size() == 0 {
			continue
		}
		tid := int(q.Tid)
		if a.hasTID && tid != a.tid {
			continue
		}
		pid := pidOf[tid]
		img, err := imageFor(pid)
		if err != nil {
			return nil, err
		}
		cfg := *baseCfg
		out = append(out, decodeTrace{
			label: fmt.Sprintf("%s, pid %d", q.String(), pid), tid: tid, pid: pid,
			src: q.Reader(pd), img: img, cfg: &cfg, syms: newSymbolizer(), resync: o.Resync,
		})
	}
	if len(out) == 0 {
		if a.hasTID {
			return nil, fmt.Errorf("decode: %s: no trace for thread %d", perfPath, a.tid)
		}
		return nil, fmt.Errorf("decode: %s: no Intel PT trace in the file", perfPath)
	}
	return out, nil
}

// buildImage loads what pid executed from code.db: its file-backed
// mappings (bytes read from the files, each valid from its mmap to its
// munmap) and its code versions (valid for their TSC ranges). A vfork child
// runs in its parent's address space until it execs: for that time the
// owner's mappings and versions are its own.
func buildImage(cdb *db.DB, pid int) (*decode.Image, error) {
	img := decode.NewImage()
	files := map[string][]byte{}
	procs, err := cdb.Processes()
	if err != nil {
		return nil, fmt.Errorf("decode: %v", err)
	}
	type span struct {
		pid      int
		from, to uint64
	}
	spans := []span{{pid, 0, decode.AlwaysValid}}
	for _, p := range procs {
		if p.PID == pid && p.VMOwner != 0 {
			to := uint64(decode.AlwaysValid)
			if p.HasEnd {
				to = p.End.TSC
			}
			spans = append(spans, span{p.VMOwner, p.Start.TSC, to})
		}
	}
	for _, sp := range spans {
		maps, err := cdb.FileMaps(sp.pid)
		if err != nil {
			return nil, fmt.Errorf("decode: %v", err)
		}
		for _, m := range maps {
			from, to := max(m.Map.TSC, sp.from), uint64(decode.AlwaysValid)
			if m.HasUnmap {
				to = m.Unmap.TSC
			}
			to = min(to, sp.to)
			if to <= from {
				continue
			}
			data, err := mappedFile(files, &m)
			if err == nil {
				err = img.AddFileVersion(m.Path, data, m.Offset, m.Addr, from, to)
			}
			if err != nil {
				// The file vanished, changed or shrank since the
				// recording: its code is reported as unmapped where it
				// runs, never guessed.
				fmt.Fprintf(os.Stderr, "ptjit: decode: warning: %s: %v\n", cdb.Path(), err)
			}
		}
		vs, err := cdb.Versions(db.VersionFilter{PID: sp.pid})
		if err != nil {
			return nil, fmt.Errorf("decode: %v", err)
		}
		for i := range vs {
			v := &vs[i]
			from, to := max(v.Valid.TSC, sp.from), uint64(decode.AlwaysValid)
			if v.HasEnd {
				to = v.End.TSC
			}
			to = min(to, sp.to)
			if to <= from {
				continue // never valid (for this process)
			}
			data, err := cdb.VersionData(v)
			if err != nil {
				return nil, fmt.Errorf("decode: %v", err)
			}
			tag := fmt.Sprintf("region %d v%d", v.Region, v.Vno)
			if err := img.AddVersion(v.Addr, data, from, to, tag); err != nil {
				return nil, fmt.Errorf("decode: %s: %v", cdb.Path(), err)
			}
		}
	}
	return img, nil
}

// mappedFile returns the bytes a file mapping mapped, reading each file
// once, after checking that the file is still the one that was mapped
// (its GNU build-id, when the recording has one).
func mappedFile(cache map[string][]byte, m *db.FileMapInfo) ([]byte, error) {
	data, ok := cache[m.Path]
	if !ok {
		var err error
		if data, err = os.ReadFile(m.Path); err != nil {
			return nil, err
		}
		if len(m.BuildID) > 0 {
			id, err := elfnote.BuildID(m.Path)
			if err == nil && !bytes.Equal(id, m.BuildID) {
				return nil, fmt.Errorf("%s: build-id %x, the recording mapped build-id %x", m.Path, id, m.BuildID)
			}
		}
		cache[m.Path] = data
	}
	if m.Offset >= uint64(len(data)) {
		return nil, fmt.Errorf("%s: mapped at offset %#x, beyond the end of the file (%#x bytes)", m.Path, m.Offset, len(data))
	}
	// A mapping may extend past the end of the file (the rest of the last
	// page): only the file's bytes are code.
	return data[m.Offset:min(uint64(len(data)), m.Offset+m.Size)], nil
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
func (c *chunkOut) Event(ev *decode.Event, off uint64)               { c.sink.Event(ev, off) }
func (c *chunkOut) Error(e *decode.FlowError, kind decode.ErrorKind) { c.sink.Error(e, kind) }

// symbolizer names addresses in file-backed sections from the ELF symbol
// tables, caching one table per file.
type symbolizer struct {
	mu   sync.Mutex // chunks are rendered on several goroutines
	tabs map[string]*recording.ELFSymbols
}

func newSymbolizer() *symbolizer { return &symbolizer{tabs: map[string]*recording.ELFSymbols{}} }

// where describes ip: "symbol+0xoff", "file+0xoff" or the code version.
func (s *symbolizer) where(in *decode.FlowInsn) string {
	sec := in.Section
	if sec == nil {
		return "?"
	}
	if !sec.IsFile() {
		return fmt.Sprintf("[%s +%#x]", sec.Tag, in.IP-sec.Vaddr)
	}
	s.mu.Lock()
	tab, ok := s.tabs[sec.Tag]
	if !ok {
		tab, _ = recording.ReadELFSymbols(sec.Tag)
		s.tabs[sec.Tag] = tab
	}
	s.mu.Unlock()
	if tab != nil {
		if name, off, ok := tab.LookupMapped(in.IP, sec.Vaddr, sec.FileOff); ok {
			return fmt.Sprintf("%s+%#x", name, off)
		}
	}
	return fmt.Sprintf("%s+%#x", filepath.Base(sec.Tag), in.IP-sec.Vaddr+sec.FileOff)
}

func newFormatSink(format string, w *bufio.Writer, syms *symbolizer) decode.FlowSink {
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
	syms  *symbolizer
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
	fmt.Fprintf(s.w, "%16d  %s%016x  %-28s  %s\n", in.TSC, spec, in.IP, s.syms.where(in), ptfmt.FlowInsnText(in))
}

func (s *traceSink) Event(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	fmt.Fprintf(s.w, "[%s]\n", ptfmt.EventText(ev, true))
}

func (s *traceSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
	fmt.Fprintf(s.w, "[%s: pt offset %#x, ip %#x: %s]\n", kind, e.Offset, e.IP, e.Code)
}

// callSink prints the call/return tree: one line per call and return,
// indented by call depth.
type callSink struct {
	w     *bufio.Writer
	syms  *symbolizer
	depth int
	ret   bool // the previous instruction was a return
	call  bool // the previous instruction was a call
}

func (s *callSink) Insn(in *decode.FlowInsn, off, tsc uint64) {
	if s.call {
		fmt.Fprintf(s.w, "%16d  %s-> %s\n", in.TSC, strings.Repeat("  ", s.depth), s.syms.where(in))
		s.depth++
	}
	if s.ret {
		if s.depth > 0 {
			s.depth--
		}
		fmt.Fprintf(s.w, "%16d  %s<- %s\n", in.TSC, strings.Repeat("  ", s.depth), s.syms.where(in))
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

func (s *callSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
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

func (s *jsonSink) Error(e *decode.FlowError, kind decode.ErrorKind) {
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

func (s *statSink) Error(e *decode.FlowError, kind decode.ErrorKind) { s.errors++ }

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
