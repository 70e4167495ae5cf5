package ptfmt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/ptpkt"
)

// PtxedFlag describes one option of libipt's ptxed. The table drives both
// `ptjit decode`'s command-line flags and ParsePtxedArgs, so the
// conformance test parses options exactly as the CLI does.
type PtxedFlag struct {
	Name   string // without the leading "--"
	Short  string // one-letter alias, or ""
	HasArg bool
	Usage  string
}

// PtxedFlags lists ptxed's options (names as in ptxed --help).
var PtxedFlags = append([]PtxedFlag{
	{"pt", "", true, "FILE[:FROM[-TO]]: the PT trace (raw mode)"},
	{"raw", "", true, "FILE[:FROM[-TO]]:BASE: load FILE's bytes at BASE (raw mode; repeatable)"},
	{"cpu", "", true, "none|f/m[/s]: decode for this cpu's errata"},
	{"no-inst", "", false, "don't print instructions (only addresses)"},
	{"quiet", "q", false, "don't print anything but errors"},
	{"offset", "", false, "print the trace offset of each instruction"},
	{"time", "", false, "print the time of each instruction"},
	{"raw-insn", "", false, "print the raw bytes of each instruction"},
	{"check", "", false, "check that each instruction decodes"},
	{"att", "", false, "AT&T syntax"},
	{"event:time", "", false, "print the time of events"},
	{"event:ip", "", false, "print the IP of events"},
	{"event:tick", "", false, "report tick events"},
	{"event:iflags", "", false, "print the interrupt flag of events"},
	{"stat", "", false, "print statistics (with --format=ptxed)"},
	{"stat:insn", "", false, "print the number of instructions"},
	{"stat:blocks", "", false, "print the number of blocks"},
	{"resync-on-error", "", false, "resync at the next PSB after an error (the default for ptjit's own formats)"},
	{"mtc-freq", "", true, "the MTC frequency (IA32_RTIT_CTL[17:14])"},
	{"nom-freq", "", true, "the nominal frequency (MSR_PLATFORM_INFO[15:8])"},
	{"cpuid-0x15.eax", "", true, "the value of cpuid[0x15].eax"},
	{"cpuid-0x15.ebx", "", true, "the value of cpuid[0x15].ebx"},
	{"insn-decoder", "", false, "use the instruction flow decoder"},
	{"block-decoder", "", false, "use the block decoder (the default)"},
	{"insn:keep-tcal-on-ovf", "", false, "insn decoder: keep the timing calibration across an overflow"},
	{"block:keep-tcal-on-ovf", "", false, "block decoder: keep the timing calibration across an overflow"},
	{"block:show-blocks", "", false, "show blocks"},
	{"block:end-on-call", "", false, "end a block after a call"},
	{"block:end-on-jump", "", false, "end a block after a jump"},
}, filterFlags()...)

// filterFlags are --filter:addrN_cfg, _a and _b for the four address
// filters.
func filterFlags() []PtxedFlag {
	var fs []PtxedFlag
	for n := 0; n < 4; n++ {
		fs = append(fs,
			PtxedFlag{fmt.Sprintf("filter:addr%d_cfg", n), "", true, fmt.Sprintf("IA32_RTIT_CTL.ADDR%d_CFG", n)},
			PtxedFlag{fmt.Sprintf("filter:addr%d_a", n), "", true, fmt.Sprintf("IA32_RTIT_ADDR%d_A", n)},
			PtxedFlag{fmt.Sprintf("filter:addr%d_b", n), "", true, fmt.Sprintf("IA32_RTIT_ADDR%d_B", n)})
	}
	return fs
}

// NewPtxedOptions returns ptxed's defaults.
func NewPtxedOptions() *PtxedOptions { return &PtxedOptions{BlockDecoder: true} }

// Set applies option name (without "--") with value (ignored for options
// without argument). Numbers are parsed like strtoull(arg, 0). Errors name
// the option and the value, as ptxed does.
func (o *PtxedOptions) Set(name, value string) error {
	opt := "--" + name
	num := func(bits int) (uint64, error) {
		v, err := strconv.ParseUint(value, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: bad argument: %s", opt, value)
		}
		if bits < 64 && v >= 1<<uint(bits) {
			return 0, fmt.Errorf("%s: value too big: %s", opt, value)
		}
		return v, nil
	}
	var v uint64
	var err error
	switch name {
	case "pt":
		if o.PT != "" {
			return fmt.Errorf("duplicate pt sources: %s", value)
		}
		o.PT = value
	case "raw":
		o.Raw = append(o.Raw, value)
	case "cpu":
		o.CPU = value
		o.CPUSet = o.CPU != "none"
		if o.CPUSet {
			if _, perr := ptpkt.ParseCPU(o.CPU); perr != nil && !zeroCPU(o.CPU) {
				return fmt.Errorf("--cpu: cpu must be specified as f/m[/s]: %s", o.CPU)
			}
		}
	case "no-inst":
		o.NoInst = true
	case "quiet", "q":
		o.Quiet = true
	case "offset":
		o.Offset = true
	case "time":
		o.Time = true
	case "raw-insn":
		o.RawInsn = true
	case "check":
		o.Check = true
	case "att":
		o.Att = true
	case "event:time":
		o.EventTime = true
	case "event:ip":
		o.EventIP = true
	case "event:tick":
		o.EventTick = true
	case "event:iflags":
		o.EventIflags = true
	case "stat":
		o.Stat = true
	case "stat:insn":
		o.Stat, o.StatInsn = true, true
	case "stat:blocks":
		o.Stat, o.StatBlocks = true, true
	case "resync-on-error":
		o.Resync = true
	case "mtc-freq":
		v, err = num(8)
		o.MTCFreq = uint8(v)
	case "nom-freq":
		v, err = num(8)
		o.NomFreq = uint8(v)
	case "cpuid-0x15.eax":
		v, err = num(32)
		o.CPUID15EAX = uint32(v)
	case "cpuid-0x15.ebx":
		v, err = num(32)
		o.CPUID15EBX = uint32(v)
	case "insn-decoder":
		o.BlockDecoder = false
	case "block-decoder":
		o.BlockDecoder = true
	case "insn:keep-tcal-on-ovf":
		o.InsnKeepTcal = true
	case "block:keep-tcal-on-ovf":
		o.BlockKeepTcal = true
	case "block:show-blocks":
		o.ShowBlocks = true
	case "block:end-on-call":
		o.EndOnCall = true
	case "block:end-on-jump":
		o.EndOnJump = true
	default:
		var n int
		var field string
		if k, _ := fmt.Sscanf(name, "filter:addr%d_%s", &n, &field); k == 2 && n >= 0 && n < 4 {
			switch field {
			case "cfg":
				v, err = num(4)
				o.Filter.Cfg[n] = uint8(v)
			case "a":
				v, err = num(64)
				o.Filter.A[n] = v
			case "b":
				v, err = num(64)
				o.Filter.B[n] = v
			default:
				return fmt.Errorf("unknown option: %s", opt)
			}
			return err
		}
		return fmt.Errorf("unknown option: %s", opt)
	}
	return err
}

// LookupPtxedFlag returns the option named name (without "--"), or false.
func LookupPtxedFlag(name string) (PtxedFlag, bool) {
	for _, f := range PtxedFlags {
		if f.Name == name || (f.Short != "" && f.Short == name) {
			return f, true
		}
	}
	return PtxedFlag{}, false
}

// ParsePtxedArgs parses ptxed's command line (without the program name):
// "--name value" (ptxed takes no "--name=value"), and -q.
func ParsePtxedArgs(args []string) (*PtxedOptions, error) {
	o := NewPtxedOptions()
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			name, ok = strings.CutPrefix(a, "-")
		}
		f, known := LookupPtxedFlag(name)
		if !ok || !known || (len(name) == 1) != (a[1] != '-') {
			return nil, fmt.Errorf("unknown option: %s", a)
		}
		value := ""
		if f.HasArg {
			if i+1 >= len(args) || args[i+1] == "" || strings.HasPrefix(args[i+1], "--") {
				if f.Name == "pt" && o.PT != "" {
					return nil, fmt.Errorf("duplicate pt sources: %s", args[min(i+1, len(args)-1)])
				}
				return nil, fmt.Errorf("%s: missing argument", a)
			}
			i++
			value = args[i]
		}
		if err := o.Set(f.Name, value); err != nil {
			return nil, err
		}
	}
	if o.PT == "" {
		return nil, fmt.Errorf("no pt file")
	}
	return o, nil
}

// zeroCPU accepts "0/0"-style CPUs: they parse, but have no errata (ptxed
// then reports "config error: unknown cpu" and decodes by the spec).
func zeroCPU(s string) bool {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 0, 16); err != nil {
			return false
		}
	}
	return true
}

// RawImage returns the image the --raw options describe.
func (o *PtxedOptions) RawImage() (*decode.Image, error) {
	img := decode.NewImage()
	for _, r := range o.Raw {
		file, off, size, base, err := ParseRawImage(r)
		if err != nil {
			return nil, err
		}
		if err := img.AddFile(file, off, size, base); err != nil {
			return nil, fmt.Errorf("--raw %s: %v", r, err)
		}
	}
	return img, nil
}

// ParseFileRange splits a FILE[:FROM[-TO]] argument as libipt's ptdump and
// ptxed do (preprocess_filename): a suffix after the last ':' that is not
// a number or a range of numbers in full is part of the file name (a ':'
// in a name). size is TO-FROM, 0 for "to the end of the file". A range
// whose TO is not after FROM is an error; off and size then hold FROM and
// TO-FROM (wrapped) for the message.
func ParseFileRange(arg string) (name string, off, size uint64, err error) {
	i := strings.LastIndexByte(arg, ':')
	if i < 0 {
		return arg, 0, 0, nil
	}
	r := arg[i+1:]
	lo, hi, hasHi := strings.Cut(r, "-")
	from, err := strconv.ParseUint(lo, 0, 64)
	if err != nil {
		return arg, 0, 0, nil
	}
	if !hasHi {
		return arg[:i], from, 0, nil
	}
	to, err := strconv.ParseUint(hi, 0, 64)
	if err != nil {
		return arg, 0, 0, nil
	}
	if to <= from {
		return arg[:i], from, to - from, fmt.Errorf("bad range %q: end before start", r)
	}
	return arg[:i], from, to - from, nil
}
