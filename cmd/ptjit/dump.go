package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/ptpkt"
	"github.com/spf13/cobra"
)

func init() {
	var (
		format string
		dir    string
		bools  = map[string]*bool{}
		values = map[string]*string{}
	)
	cmd := &cobra.Command{
		Use:   "dump [FILE[:FROM[-TO]]]",
		Short: "Print the Intel PT packets of a raw trace or of a recording",
		Long: `dump prints the Intel PT packets of FILE, a raw trace (.pt), optionally
restricted to the byte range FROM-TO (or from FROM to the end). Without FILE it
prints the PT data of every AUXTRACE queue of DIR/perf.data.

--format=ptdump prints exactly what libipt's ptdump prints, and accepts
ptdump's options (--lastip, --time, --cpu f/m[/s], --mtc-freq N, ...);
--format=text (the default) prints one packet per line with its fields and the
reconstructed IP; of the ptdump options it uses only --cpu (errata) and the
timing configuration. For a perf.data the PT configuration recorded in its
AUXTRACE_INFO (MTC frequency, CPUID 0x15 ratio, nominal frequency) is used
unless given as an option, and each queue is preceded by a "# ..." line.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s := &ptfmt.PtdumpSettings{}
			changed := map[string]bool{}
			for _, f := range ptfmt.PtdumpFlags {
				fl := cmd.Flags().Lookup(f.Name)
				if !fl.Changed {
					continue
				}
				changed[f.Name] = true
				v := ""
				if f.HasArg {
					v = *values[f.Name]
				} else if !*bools[f.Name] {
					continue
				}
				if err := s.Set(f.Name, v); err != nil {
					return err
				}
			}
			if format != "text" && format != "ptdump" {
				return fmt.Errorf("--format %q: must be text or ptdump", format)
			}
			out := cmd.OutOrStdout()
			if len(args) == 1 {
				buf, err := readTraceArg(args[0])
				if err != nil {
					return err
				}
				return dumpTrace(out, format, buf, s)
			}
			return dumpPerfData(out, format, filepath.Join(dir, "perf.data"), s, changed)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or ptdump (libipt's ptdump, byte for byte)")
	cmd.Flags().StringVarP(&dir, "input", "i", "ptjit.out", "recording directory whose perf.data is dumped when no FILE is given")
	for _, f := range ptfmt.PtdumpFlags {
		if f.HasArg {
			values[f.Name] = cmd.Flags().String(f.Name, "", "ptdump: "+f.Usage)
		} else {
			bools[f.Name] = cmd.Flags().Bool(f.Name, false, "ptdump: "+f.Usage)
		}
	}
	rootCmd.AddCommand(cmd)
}

// dumpTrace prints one raw PT buffer in the chosen format.
func dumpTrace(w io.Writer, format string, buf []byte, s *ptfmt.PtdumpSettings) error {
	if format == "ptdump" {
		return ptfmt.PtdumpRun(w, buf, s)
	}
	cfg := s.Config
	if cfg.CPU.Vendor != ptpkt.VendorUnknown {
		e, err := cfg.CPU.Errata()
		if err != nil {
			return fmt.Errorf("--cpu: %v", err)
		}
		cfg.Errata = e
	}
	return ptfmt.DumpText(w, buf, &cfg)
}

// readTraceArg reads FILE[:FROM[-TO]] as ptdump does (ptfmt.ParseFileRange).
func readTraceArg(arg string) ([]byte, error) {
	name, from, size, err := ptfmt.ParseFileRange(arg)
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

// dumpPerfData prints the PT data of every AUXTRACE queue of a perf.data,
// decoding with the PT configuration recorded in its AUXTRACE_INFO unless
// the corresponding option was given.
func dumpPerfData(w io.Writer, format, path string, s *ptfmt.PtdumpSettings, changed map[string]bool) error {
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
	if len(tr.Queues) == 0 {
		return fmt.Errorf("%s: no Intel PT data (no AUXTRACE records)", path)
	}
	tr.PTConfig(&s.Config, func(o string) bool { return changed[o] })
	for _, q := range tr.Queues {
		fmt.Fprintf(w, "# %s: queue %d (cpu %d, tid %d): %d bytes in %d AUXTRACE buffers\n",
			path, q.Idx, q.CPU, q.Tid, len(q.Data), len(q.Buffers))
		if err := dumpTrace(w, format, q.Data, s); err != nil {
			return err
		}
	}
	if tr.Truncated {
		fmt.Fprintf(w, "# %s: file ends inside a record; dumped everything before it\n", path)
	}
	return nil
}
