package ptfmt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/ptpkt"
)

// PtdumpFlag describes one option of libipt's ptdump. The table drives
// both `ptjit dump`'s command-line flags and ParsePtdumpArgs, so the
// conformance test parses options exactly as the CLI does.
type PtdumpFlag struct {
	Name   string // without the leading "--"
	HasArg bool
	Usage  string
}

// PtdumpFlags lists ptdump's options (names as in ptdump --help).
var PtdumpFlags = []PtdumpFlag{
	{"no-sync", false, "don't sync to the first PSB, assume a sync point at offset 0"},
	{"quiet", false, "don't print anything but errors"},
	{"no-pad", false, "don't show PAD packets"},
	{"no-timing", false, "don't show timing packets"},
	{"no-cyc", false, "don't show CYC packets and ignore them when tracking time"},
	{"no-offset", false, "don't show the offset as the first column"},
	{"raw", false, "show raw packet bytes"},
	{"lastip", false, "show last IP updates on packets with IP payloads"},
	{"exec-mode", false, "show the current execution mode on mode.exec packets"},
	{"time", false, "show the estimated TSC on timing packets"},
	{"tcal", false, "show time calibration information"},
	{"time-delta", false, "show timing information as delta"},
	{"no-tcal", false, "skip timing calibration (CYC packets then give errors)"},
	{"no-wall-clock", false, "suppress the no-time error and print relative time"},
	{"keep-tcal-on-ovf", false, "keep the timing calibration across an overflow"},
	{"cpu", true, "none|auto|f/m[/s]: decode for this cpu's errata (default none: the spec)"},
	{"mtc-freq", true, "the MTC frequency (IA32_RTIT_CTL[17:14])"},
	{"nom-freq", true, "the nominal frequency (MSR_PLATFORM_INFO[15:8])"},
	{"cpuid-0x15.eax", true, "the value of cpuid[0x15].eax"},
	{"cpuid-0x15.ebx", true, "the value of cpuid[0x15].ebx"},
}

// PtdumpSettings are parsed ptdump options: output options and the decoder
// configuration.
type PtdumpSettings struct {
	Options PtdumpOptions
	Config  ptpkt.Config
	// From, To: a perf.data's queues are dumped only in the PSB
	// segments around the TSC range [From, To) (decode.TimeRange); To 0:
	// all of them.
	From, To uint64
}

// ErrTimeAndTcal is ptdump's "specify either --time or --tcal".
var ErrTimeAndTcal = errors.New("specify either --time or --tcal")

// Set applies option name (without "--") with value (ignored for options
// without argument). Numbers are parsed like strtoull(arg, 0): decimal,
// 0x hex or 0 octal. Errors name the option and the value.
func (s *PtdumpSettings) Set(name, value string) error {
	o := &s.Options
	switch name {
	case "no-sync":
		o.NoSync = true
	case "quiet":
		o.Quiet = true
	case "no-pad":
		o.NoPad = true
	case "no-timing":
		o.NoTiming = true
	case "no-cyc":
		o.NoCyc = true
	case "no-offset":
		o.NoOffset = true
	case "raw":
		o.Raw = true
	case "lastip":
		o.LastIP = true
	case "exec-mode":
		o.ExecMode = true
	case "time":
		if o.Tcal {
			return ErrTimeAndTcal
		}
		o.Time = true
	case "tcal":
		if o.Time {
			return ErrTimeAndTcal
		}
		o.Tcal = true
	case "time-delta":
		o.TimeDelta = true
	case "no-tcal":
		o.NoTcal = true
	case "no-wall-clock":
		o.NoWallClock = true
	case "keep-tcal-on-ovf":
		s.Config.KeepTcalOnOVF = true
	case "cpu":
		switch value {
		case "none":
			s.Config.CPU = ptpkt.CPU{}
		case "auto":
			c, err := ptpkt.HostCPU()
			if err != nil {
				return fmt.Errorf("--cpu: error reading cpu: %v", err)
			}
			s.Config.CPU = c
		default:
			c, err := ptpkt.ParseCPU(value)
			if err != nil {
				return fmt.Errorf("--cpu: cpu must be specified as f/m[/s]: %q", value)
			}
			s.Config.CPU = c
		}
	case "mtc-freq", "nom-freq":
		v, err := parseArgUint(name, value, 8)
		if err != nil {
			return err
		}
		if name == "mtc-freq" {
			s.Config.MTCFreq = uint8(v)
		} else {
			s.Config.NomFreq = uint8(v)
		}
	case "cpuid-0x15.eax", "cpuid-0x15.ebx":
		v, err := parseArgUint(name, value, 32)
		if err != nil {
			return err
		}
		if name == "cpuid-0x15.eax" {
			s.Config.CPUID15EAX = uint32(v)
		} else {
			s.Config.CPUID15EBX = uint32(v)
		}
	default:
		return fmt.Errorf("unknown option: --%s", name)
	}
	return nil
}

func parseArgUint(name, value string, bits int) (uint64, error) {
	if value == "" {
		return 0, fmt.Errorf("--%s: missing argument", name)
	}
	v, err := strconv.ParseUint(value, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("--%s: bad argument: %s", name, value)
	}
	if bits < 64 && v>>uint(bits) != 0 {
		return 0, fmt.Errorf("--%s: value too big: %s", name, value)
	}
	return v, nil
}

func lookupPtdumpFlag(name string) (PtdumpFlag, bool) {
	for _, f := range PtdumpFlags {
		if f.Name == name {
			return f, true
		}
	}
	return PtdumpFlag{}, false
}

// ParsePtdumpArgs parses a ptdump command line (without the program name):
// options as "--name value" or "--name=value", and the remaining
// non-option arguments (files) returned in order.
func ParsePtdumpArgs(args []string) (*PtdumpSettings, []string, error) {
	s := &PtdumpSettings{}
	var files []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "--") {
			files = append(files, a)
			continue
		}
		name, value, hasValue := strings.Cut(a[2:], "=")
		f, ok := lookupPtdumpFlag(name)
		if !ok {
			return nil, nil, fmt.Errorf("unknown option: %s", a)
		}
		if f.HasArg && !hasValue {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("--%s: missing argument", name)
			}
			i++
			value = args[i]
		} else if !f.HasArg && hasValue {
			return nil, nil, fmt.Errorf("--%s takes no argument", name)
		}
		if err := s.Set(name, value); err != nil {
			return nil, nil, err
		}
	}
	return s, files, nil
}
