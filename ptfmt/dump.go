package ptfmt

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptpkt"
)

// Dump prints one raw PT buffer in ptjit dump's format: "ptdump"
// (PtdumpRun) or "text" (DumpText, with s's configuration and errata).
func Dump(w io.Writer, format string, buf []byte, s *PtdumpSettings) error {
	if format == "ptdump" {
		return PtdumpRun(w, buf, s)
	}
	cfg := s.Config
	if cfg.CPU.Vendor != ptpkt.VendorUnknown {
		e, err := cfg.CPU.Errata()
		if err != nil {
			return fmt.Errorf("--cpu: %v", err)
		}
		cfg.Errata = e
	}
	return DumpText(w, buf, &cfg)
}

// ReadTraceFile reads ptjit dump's FILE[:FROM[-TO]] argument as ptdump
// does (ParseFileRange): the file mapped, restricted to the range; an
// empty file or range is an error.
func ReadTraceFile(arg string) ([]byte, error) {
	name, from, size, err := ParseFileRange(arg)
	if err != nil {
		return nil, fmt.Errorf("%s: bad range: end %#x not after start %#x", arg, from+size, from)
	}
	ranged, to := name != arg, uint64(0) // to == 0: to the end
	if size != 0 {
		to = from + size
	}
	buf, err := perf.MapFile(name)
	if err != nil {
		return nil, err
	}
	if len(buf) == 0 {
		return nil, fmt.Errorf("%s: empty file", name)
	}
	if !ranged {
		return buf, nil
	}
	if from >= uint64(len(buf)) {
		return nil, fmt.Errorf("%s: bad offset %#x: file has %#x bytes", name, from, len(buf))
	}
	if to == 0 {
		return buf[from:], nil
	}
	if to > uint64(len(buf)) {
		return nil, fmt.Errorf("%s: bad range end %#x: file has %#x bytes", name, to, len(buf))
	}
	return buf[from:to], nil
}

// DumpPerfData prints the PT data of every AUXTRACE queue of the
// perf.data at path, each after a "# ..." line, as Dump does, with the PT
// configuration recorded in its AUXTRACE_INFO
// (perf.PerfTrace.PTConfig) except the options given reports as given.
func DumpPerfData(w io.Writer, format, path string, s *PtdumpSettings, given func(option string) bool) error {
	pd, err := perf.OpenPerfData(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no such file (give a raw .pt FILE or -i DIR of a recording)", path)
		}
		return err
	}
	defer pd.Close()
	tr, err := perf.LoadPerfTrace(pd)
	if err != nil {
		return err
	}
	if err := tr.CheckIntelPT(pd); err != nil {
		return err
	}
	return DumpPerfTrace(w, format, path, tr, s, given)
}

// DumpPerfTrace is DumpPerfData of a loaded trace (with its bytes: see
// perf.LoadPerfTrace); name labels the "# ..." lines.
func DumpPerfTrace(w io.Writer, format, name string, tr *perf.PerfTrace, s *PtdumpSettings, given func(option string) bool) error {
	tr.PTConfig(&s.Config, given)
	for _, q := range tr.Queues {
		fmt.Fprintf(w, "# %s: queue %d (cpu %d, tid %d): %d bytes in %d AUXTRACE buffers\n",
			name, q.Idx, q.CPU, q.Tid, len(q.Data), len(q.Buffers))
		data := q.Data
		if s.To != 0 {
			// only the PSB segments around the time window
			lo, hi, err := decode.TimeRange(decode.BytesTrace(data), &s.Config, s.From, s.To)
			if err != nil {
				return err
			}
			data = data[lo:hi]
			fmt.Fprintf(w, "# %s: queue %d: the time window is in bytes [%#x, %#x); offsets below count from %#x\n", name, q.Idx, lo, hi, lo)
		}
		if err := Dump(w, format, data, s); err != nil {
			return err
		}
	}
	if tr.Truncated {
		fmt.Fprintf(w, "# %s: file ends inside a record; dumped everything before it\n", name)
	}
	return nil
}
