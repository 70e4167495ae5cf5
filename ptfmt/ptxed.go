package ptfmt

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptpkt"
	"github.com/ptjit/ptjit/x86"
	"github.com/ptjit/ptjit/x86/att"
)

// PtxedOptions are libipt ptxed's options; an option means what it means in
// ptxed.
type PtxedOptions struct {
	PT     string // --pt FILE[:FROM[-TO]]
	Raw    []string
	CPU    string // "", "none" or f/m[/s]
	CPUSet bool

	NoInst      bool // --no-inst
	Quiet       bool // --quiet, -q
	Offset      bool // --offset
	Time        bool // --time
	RawInsn     bool // --raw-insn
	Check       bool // --check
	Att         bool // --att
	EventTime   bool // --event:time
	EventIP     bool // --event:ip
	EventTick   bool // --event:tick
	EventIflags bool // --event:iflags
	Stat        bool // --stat
	StatInsn    bool // --stat:insn
	StatBlocks  bool // --stat:blocks
	Resync      bool // --resync-on-error

	Filter     decode.AddrFilter
	MTCFreq    uint8
	NomFreq    uint8
	CPUID15EAX uint32
	CPUID15EBX uint32

	// Jobs > 1 decodes PSB segments in parallel (not a ptxed option).
	Jobs int
	// Window is the most trace bytes held at once (0: decode.DefaultWindow;
	// not a ptxed option).
	Window int
	// Origin, for a thread of a per-CPU recording (not a ptxed option),
	// maps the offsets of its stream to its CPU queues': the offsets
	// printed (--offset, errors) are then offsets in the CPU's queue,
	// and an error line ends with ", cpu N".
	Origin OriginFunc

	BlockDecoder  bool // --block-decoder (the default) vs --insn-decoder
	InsnKeepTcal  bool // --insn:keep-tcal-on-ovf
	BlockKeepTcal bool // --block:keep-tcal-on-ovf
	ShowBlocks    bool // --block:show-blocks
	EndOnCall     bool // --block:end-on-call
	EndOnJump     bool // --block:end-on-jump
}

// ParseRawImage parses a --raw argument FILE[:FROM[-TO]]:BASE.
func ParseRawImage(arg string) (file string, off, size, base uint64, err error) {
	i := strings.LastIndexByte(arg, ':')
	if i < 0 || i == len(arg)-1 {
		return "", 0, 0, 0, fmt.Errorf("--raw %s: missing base address (FILE[:FROM[-TO]]:BASE)", arg)
	}
	base, err = strconv.ParseUint(arg[i+1:], 0, 64)
	if err != nil {
		return "", 0, 0, 0, fmt.Errorf("--raw %s: bad base address %q", arg, arg[i+1:])
	}
	file, off, size, err = ParseFileRange(arg[:i])
	if err != nil {
		return "", 0, 0, 0, fmt.Errorf("--raw %s: %v", arg, err)
	}
	return file, off, size, base, nil
}

// LoadPT reads a --pt argument FILE[:FROM[-TO]].
func LoadPT(arg string) ([]byte, error) {
	name, off, size, err := ParseFileRange(arg)
	if err != nil {
		return nil, fmt.Errorf("--pt %s: %v", arg, err)
	}
	data, err := perf.MapFile(name)
	if err != nil {
		return nil, err
	}
	if off >= uint64(len(data)) && !(off == 0 && len(data) == 0) {
		return nil, fmt.Errorf("%s: bad offset %#x (file size %#x)", name, off, len(data))
	}
	end := uint64(len(data))
	if size != 0 {
		if off+size > end {
			return nil, fmt.Errorf("%s: bad range %#x-%#x (file size %#x)", name, off, off+size, len(data))
		}
		end = off + size
	}
	return data[off:end], nil
}

// Ptxed runs a ptxed-compatible decode and writes ptxed's output to w.
// Configuration problems that ptxed reports on stdout (an unknown --cpu)
// are written to w as well; errors that make ptxed fail are returned.
func Ptxed(o *PtxedOptions, w io.Writer) error {
	img, err := o.RawImage()
	if err != nil {
		return err
	}
	pt, err := LoadPT(o.PT)
	if err != nil {
		return err
	}
	cfg, cerr := o.FlowConfig()
	return PtxedTrace(o, decode.BytesTrace(pt), img, cfg, cerr, w)
}

// PtxedTrace prints, as ptxed does, the flow of one PT stream through img
// with the decoder configuration cfg (cfgErr: the options named an unknown
// cpu, reported as ptxed reports it). ptjit decode uses it for the threads of
// a recording.
//
// The trace is decoded in windows of at most o.Window bytes that end at
// PSBs (ForEachWindow), so memory stays bounded whatever its size.
func PtxedTrace(o *PtxedOptions, r decode.TraceReader, img *decode.Image, cfg *decode.FlowConfig, cfgErr error, w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	defer bw.Flush()
	if cfgErr != nil {
		fmt.Fprintf(bw, "[0, 0: config error: %s]\n", decode.CodeBadCPU)
	}
	p := &ptxedPrinter{o: o, w: bw}
	if o.Stat && !o.StatInsn && !o.StatBlocks {
		o.StatInsn = true
		o.StatBlocks = o.BlockDecoder
	}
	window := o.Window
	if window == 0 {
		window = decode.DefaultWindow
	}
	err := decode.ForEachWindow(r, window, func(pt []byte, stop, base uint64) {
		if o.ShowBlocks || o.StatBlocks {
			// Block boundaries depend on the previous chunk: replay.
			p.base = base
			decode.ParallelFlowWindow(pt, stop, img, cfg, p, o.Resync, o.Jobs)
			return
		}
		// Each chunk renders its own text on its worker.
		decode.ParallelFlowChunksWindow(pt, stop, img, cfg, o.Resync, o.Jobs,
			func() decode.FlowSink {
				var b bytes.Buffer
				return &ptxedPrinter{o: o, w: bufio.NewWriterSize(&b, 1<<16), out: &b, base: base}
			},
			func(s decode.FlowSink) {
				c := s.(*ptxedPrinter)
				c.w.Flush()
				bw.Write(c.out.Bytes())
				p.ninsn += c.ninsn
			})
	})
	if err != nil {
		return err
	}
	if o.Stat {
		if o.StatInsn {
			fmt.Fprintf(bw, "insn: %d.\n", p.ninsn)
		}
		if o.StatBlocks {
			fmt.Fprintf(bw, "blocks:\t%d.\n", p.nblocks)
		}
	}
	return bw.Flush()
}

// FlowConfig returns the decoder configuration the options describe. An
// unknown --cpu gives a configuration without errata and an error (ptxed
// reports it and decodes by the spec).
func (o *PtxedOptions) FlowConfig() (*decode.FlowConfig, error) {
	cfg := &decode.FlowConfig{Filter: o.Filter, TickEvents: o.EventTick}
	cfg.Packet.MTCFreq = o.MTCFreq
	cfg.Packet.NomFreq = o.NomFreq
	cfg.Packet.CPUID15EAX = o.CPUID15EAX
	cfg.Packet.CPUID15EBX = o.CPUID15EBX
	if o.BlockDecoder {
		cfg.Packet.KeepTcalOnOVF = o.BlockKeepTcal
	} else {
		cfg.Packet.KeepTcalOnOVF = o.InsnKeepTcal
	}
	if o.CPUSet {
		cpu, err := ptpkt.ParseCPU(o.CPU)
		if err == nil {
			cfg.Packet.CPU = cpu
			cfg.Packet.Errata, err = cpu.Errata()
		}
		if err != nil {
			return cfg, fmt.Errorf("--cpu %s: %s", o.CPU, decode.CodeBadCPU)
		}
	}
	return cfg, nil
}

// EventText returns ptxed's text for an event (without brackets), with the
// event's IP when withIP is set.
func EventText(ev *decode.Event, withIP bool) string { return formatEventBody(ev, withIP) }

// FlowInsnText disassembles in from its section's bytes, and, where the
// instruction runs past the section's end, from the section img has next
// at the time the decoder read it (img nil: none), as the decoder does:
// an instruction across two pages whose versions differ (W^X records a
// version per page) was printed "(bad)".
func FlowInsnText(in *decode.FlowInsn, img *decode.Image) string {
	var x x86.Insn
	n, ok := in.Section.ReadAt(x.Raw[:], in.IP)
	if !ok || n == 0 {
		return "(bytes unavailable)"
	}
	if n < len(x.Raw) && img != nil {
		m, _ := img.Read(x.Raw[n:], in.IP+uint64(n), max(in.TSC, in.Section.FromTSC))
		n += m
	}
	if x86.DecodeInsn(x.Raw[:n], in.IP, in.Mode, &x) != nil {
		if !decode.FixupInsn(x.Raw[:n], in.IP, in.Mode, &x) {
			return "(bad)"
		}
	}
	return att.Text(&x)
}

type ptxedPrinter struct {
	out     *bytes.Buffer // where w writes, for chunk printers
	o       *PtxedOptions
	w       *bufio.Writer
	ninsn   uint64
	nblocks uint64
	base    uint64 // offset of the decoded window in the whole trace
	origin  originMap
	buf     [64]byte
	// block emulation
	inBlock bool
}

func (p *ptxedPrinter) hex16(v uint64) {
	b := strconv.AppendUint(p.buf[:0], v, 16)
	for i := len(b); i < 16; i++ {
		p.w.WriteByte('0')
	}
	p.w.Write(b)
}

func (p *ptxedPrinter) diagnose(off, ip uint64, kind decode.ErrorKind, code decode.Code) {
	p.inBlock = false
	cpu, off := p.at(off)
	if cpu >= 0 {
		fmt.Fprintf(p.w, "[%x, %x: %s: %s, cpu %d]\n", off, ip, kind, code, cpu)
		return
	}
	fmt.Fprintf(p.w, "[%x, %x: %s: %s]\n", off, ip, kind, code)
}

// at returns what ptxed prints for the stream offset off: off itself, or
// for a thread of a per-CPU recording (o.Origin) its CPU and the offset
// in that CPU's queue (cpu -1: none).
func (p *ptxedPrinter) at(off uint64) (cpu int, qoff uint64) {
	if p.o.Origin == nil {
		return -1, off
	}
	if p.origin.f == nil {
		p.origin.f = p.o.Origin
	}
	return p.origin.at(off)
}

// WithOrigin returns a copy of o whose Origin is origin.
func (o *PtxedOptions) WithOrigin(origin OriginFunc) *PtxedOptions {
	c := *o
	c.Origin = origin
	return &c
}

// startBlock emulates libipt's block decoder: instructions are grouped
// into blocks that end at an event or at a branch that needs trace (or, with
// --block:end-on-call/-jump, at a direct call or jump).
func (p *ptxedPrinter) startBlock() {
	if p.inBlock || !p.o.BlockDecoder {
		return
	}
	p.inBlock = true
	p.nblocks++
	if p.o.ShowBlocks && !p.o.Quiet {
		p.w.WriteString("[block]\n")
	}
}

// endBlock ends the current block after in if the block decoder would.
func (p *ptxedPrinter) endBlock(in *decode.FlowInsn) {
	switch in.Class {
	case x86.ClassOther, x86.ClassPTWrite, x86.ClassMovCR3:
		return
	case x86.ClassCall:
		if !p.o.EndOnCall {
			return
		}
	case x86.ClassJump:
		if !p.o.EndOnJump {
			return
		}
	}
	p.inBlock = false
}

func (p *ptxedPrinter) printInsn(in *decode.FlowInsn, off, tsc uint64) {
	if p.o.Quiet {
		p.startBlock()
		p.endBlock(in)
		return
	}
	p.startBlock()
	if p.o.Offset {
		_, q := p.at(off)
		p.hex16(q)
		p.w.WriteString("  ")
	}
	if p.o.Time {
		p.hex16(tsc)
		p.w.WriteString("  ")
	}
	if in.Speculative {
		p.w.WriteString("? ")
	}
	p.hex16(in.IP)
	if !p.o.NoInst {
		var x x86.Insn
		if n, _ := in.Section.ReadAt(x.Raw[:], in.IP); n > 0 {
			if x86.DecodeInsn(x.Raw[:n], in.IP, in.Mode, &x) == nil {
				if p.o.RawInsn {
					for i := 0; i < x86.MaxInsnLen; i++ {
						if i < int(x.Len) {
							fmt.Fprintf(p.w, " %02x", x.Raw[i])
						} else {
							p.w.WriteString("   ")
						}
					}
				}
				p.w.WriteString("  ")
				p.w.WriteString(att.Text(&x))
			}
		}
	}
	p.w.WriteByte('\n')
	p.endBlock(in)
}

func (p *ptxedPrinter) printEvent(ev *decode.Event, off uint64) {
	if ev.StatusUpdate {
		return
	}
	p.inBlock = false
	if p.o.Quiet {
		return
	}
	if !ptxedShowsEvent(ev, p.o) {
		return
	}
	w := p.w
	w.WriteByte('[')
	if p.o.Offset {
		_, q := p.at(off)
		p.hex16(q)
		w.WriteString("  ")
	}
	if p.o.EventTime && ev.HasTSC {
		p.hex16(ev.TSC)
		w.WriteString("  ")
	}
	w.WriteString(formatEventBody(ev, p.o.EventIP))
	w.WriteString("]\n")
	p.inBlock = false
}

// ptxedShowsEvent reports whether ptxed prints the event.
func ptxedShowsEvent(ev *decode.Event, o *PtxedOptions) bool {
	switch ev.Type {
	case decode.EvIflags:
		return o.EventIflags
	case decode.EvTick:
		return o.EventTick
	}
	return true
}

func execModeText(m x86.ExecMode) string {
	switch m {
	case x86.Mode16, x86.Mode32, x86.Mode64:
		return m.String()
	}
	return "<unknown>"
}

// formatEventBody returns ptxed's text for an event, without brackets,
// offset and time.
func formatEventBody(ev *decode.Event, withIP bool) string {
	var b strings.Builder
	ipOpt := func(ip uint64) {
		if withIP && !ev.IPSuppressed {
			fmt.Fprintf(&b, ", ip: %016x", ip)
		}
	}
	switch ev.Type {
	case decode.EvEnabled:
		if ev.Resumed {
			b.WriteString("resumed")
		} else {
			b.WriteString("enabled")
		}
		if withIP {
			fmt.Fprintf(&b, ", ip: %016x", ev.IP)
		}
	case decode.EvDisabled:
		b.WriteString("disabled")
		ipOpt(ev.IP)
	case decode.EvAsyncDisabled:
		b.WriteString("disabled")
		if withIP {
			fmt.Fprintf(&b, ", at: %016x", ev.From)
			ipOpt(ev.IP)
		}
	case decode.EvAsyncBranch:
		b.WriteString("interrupt")
		if withIP {
			fmt.Fprintf(&b, ", from: %016x", ev.From)
			if !ev.IPSuppressed {
				fmt.Fprintf(&b, ", to: %016x", ev.IP)
			}
		}
	case decode.EvPaging:
		fmt.Fprintf(&b, "paging, cr3: %016x", ev.CR3)
		if ev.NonRoot {
			b.WriteString(", nr")
		}
	case decode.EvAsyncPaging:
		fmt.Fprintf(&b, "paging, cr3: %016x", ev.CR3)
		if ev.NonRoot {
			b.WriteString(", nr")
		}
		if withIP {
			fmt.Fprintf(&b, ", ip: %016x", ev.IP)
		}
	case decode.EvOverflow:
		b.WriteString("overflow")
		ipOpt(ev.IP)
	case decode.EvExecMode:
		b.WriteString("exec mode: " + execModeText(ev.Mode))
		ipOpt(ev.IP)
	case decode.EvTSX:
		switch {
		case ev.Aborted:
			b.WriteString("aborted")
		case ev.Speculative:
			b.WriteString("begin transaction")
		default:
			b.WriteString("committed")
		}
		ipOpt(ev.IP)
	case decode.EvStop:
		b.WriteString("stopped")
	case decode.EvVMCS:
		fmt.Fprintf(&b, "vmcs, base: %016x", ev.Base)
	case decode.EvAsyncVMCS:
		fmt.Fprintf(&b, "vmcs, base: %016x", ev.Base)
		if withIP {
			fmt.Fprintf(&b, ", ip: %016x", ev.IP)
		}
	case decode.EvExStop:
		b.WriteString("exstop")
		ipOpt(ev.IP)
	case decode.EvMWait:
		fmt.Fprintf(&b, "mwait %x %x", ev.Hints, ev.Ext)
		ipOpt(ev.IP)
	case decode.EvPwrE:
		fmt.Fprintf(&b, "pwre c%d.%d", (ev.State+1)&0xf, (ev.SubState+1)&0xf)
		if ev.HW {
			b.WriteString(" hw")
		}
	case decode.EvPwrX:
		b.WriteString("pwrx ")
		if ev.WakeIntr {
			b.WriteString("int: ")
		}
		if ev.WakeStore {
			b.WriteString("st: ")
		}
		if ev.WakeAuto {
			b.WriteString("hw: ")
		}
		fmt.Fprintf(&b, "c%d (c%d)", (ev.Last+1)&0xf, (ev.Deepest+1)&0xf)
	case decode.EvPTWrite:
		fmt.Fprintf(&b, "ptwrite: %x", ev.Payload)
		ipOpt(ev.IP)
	case decode.EvTick:
		b.WriteString("tick")
		ipOpt(ev.IP)
	case decode.EvCBR:
		fmt.Fprintf(&b, "cbr: %x", ev.Ratio)
	case decode.EvMNT:
		fmt.Fprintf(&b, "mnt: %x", ev.Payload)
	case decode.EvIflags:
		if ev.IF {
			b.WriteString("interrupts enabled")
		} else {
			b.WriteString("interrupts disabled")
		}
		ipOpt(ev.IP)
	case decode.EvInterrupt:
		fmt.Fprintf(&b, "interrupt %d", ev.Vector)
		if ev.HasCR2 {
			fmt.Fprintf(&b, ", cr2: %016x", ev.CR2)
		}
		ipOpt(ev.IP)
	case decode.EvIret:
		b.WriteString("iret")
		ipOpt(ev.IP)
	case decode.EvSMI:
		b.WriteString("smi")
		ipOpt(ev.IP)
	case decode.EvRSM:
		b.WriteString("rsm")
		ipOpt(ev.IP)
	case decode.EvSIPI:
		fmt.Fprintf(&b, "sipi: %x", ev.Vector)
		ipOpt(ev.IP)
	case decode.EvInit:
		b.WriteString("init")
		ipOpt(ev.IP)
	case decode.EvVMEntry:
		b.WriteString("vmentry")
		ipOpt(ev.IP)
	case decode.EvVMExit:
		b.WriteString("vmexit")
		if ev.HasVec {
			fmt.Fprintf(&b, ", intr: %d", ev.Vector)
		}
		if ev.HasVMXR {
			fmt.Fprintf(&b, ", vmxr: %016x", ev.VMXR)
		}
		if ev.HasVMXQ {
			fmt.Fprintf(&b, ", vmxq: %016x", ev.VMXQ)
		}
		ipOpt(ev.IP)
	case decode.EvShutdown:
		b.WriteString("shutdown")
		ipOpt(ev.IP)
	case decode.EvUintr:
		fmt.Fprintf(&b, "uintr %d", ev.Vector)
		ipOpt(ev.IP)
	case decode.EvUiret:
		b.WriteString("uiret")
		ipOpt(ev.IP)
	case decode.EvSwIntr:
		fmt.Fprintf(&b, "swintr %d", ev.Vector)
		ipOpt(ev.IP)
	case decode.EvSyscall:
		b.WriteString("syscall")
		ipOpt(ev.IP)
	case decode.EvEndOfTrace:
		b.WriteString("end of trace")
	case decode.EvTrig:
		fmt.Fprintf(&b, "trig %02x", ev.TRBV)
		if ev.Mult {
			b.WriteString(", mult")
		}
		ipOpt(ev.IP)
	default:
		fmt.Fprintf(&b, "event %d", ev.Type)
	}
	return b.String()
}

// Insn, Event and Error make ptxedPrinter a FlowSink.
func (p *ptxedPrinter) Insn(in *decode.FlowInsn, off, tsc uint64) {
	p.printInsn(in, off+p.base, tsc)
	p.ninsn++
}

func (p *ptxedPrinter) Event(ev *decode.Event, off uint64) { p.printEvent(ev, off+p.base) }

func (p *ptxedPrinter) Error(e *decode.FlowError, kind decode.ErrorKind) {
	p.diagnose(e.Offset+p.base, e.IP, kind, e.Code)
}

func newBufWriter(w io.Writer) *bufio.Writer { return bufio.NewWriterSize(w, 1<<16) }
