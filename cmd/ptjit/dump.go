package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/recording"
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
		Use:   "dump [FILE[:FROM[-TO]] | -]",
		Short: "Print the Intel PT packets of a raw trace or of a recording",
		Long: `dump prints the Intel PT packets of FILE, a raw trace (.pt), optionally
restricted to the byte range FROM-TO (or from FROM to the end). Without FILE it
prints the PT data of every AUXTRACE queue of DIR/perf.data.

FILE is recognised by its content: a perf.data (perf record -o FILE, or
pipe mode: perf record -o -) is dumped queue by queue as DIR/perf.data is;
one without Intel PT is an error naming its events. With a byte range, FILE
is always read as raw trace (a perf.data's AUXTRACE bytes at FROM-TO, say).
FILE - reads standard input (perf record -o - ... | ptjit dump -); a pipe is
first copied to an unlinked temporary file.

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
			if len(args) == 1 && *values["time"] == "true" && strings.Contains(args[0], ",") {
				*values["time"], args = args[0], nil // --time START,END
			}
			if w := *values["time"]; w != "" && w != "true" {
				// a window (bare --time is ptdump's)
				tb := recording.TimeBase{Raw: true}
				if len(args) == 0 {
					d, err := openCodeDB(codeDBPath(dir), cmd.ErrOrStderr())
					if err != nil {
						return err
					}
					tb, err = recording.LoadTimeBase(d, false)
					d.Close()
					if err != nil {
						return err
					}
				}
				var err error
				if s.From, s.To, err = tb.ParseRange("--time", w); err != nil {
					return err
				}
			}
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
				} else if f.Name == "time" {
					if *values["time"] != "true" {
						continue
					}
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
			given := func(o string) bool { return changed[o] }
			if len(args) == 1 {
				in, err := ptfmt.OpenTraceInput(args[0], false, ptfmt.ReadTraceFile)
				if err != nil {
					return err
				}
				defer in.Close()
				if in.Trace != nil {
					return ptfmt.DumpPerfTrace(out, format, in.Name, in.Trace, s, given)
				}
				return ptfmt.Dump(out, format, in.Raw, s)
			}
			return ptfmt.DumpPerfData(out, format, filepath.Join(dir, "perf.data"), s, given)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or ptdump (libipt's ptdump, byte for byte)")
	cmd.Flags().StringVarP(&dir, "input", "i", "ptjit.out", "recording directory whose perf.data is dumped when no FILE is given")
	for _, f := range ptfmt.PtdumpFlags {
		if f.Name == "time" {
			// ptdump's --time, or --time START,END: the time window of a
			// recording's or a perf.data's queues (seconds since the start,
			// or tsc:N)
			values["time"] = cmd.Flags().String("time", "", "ptdump: "+f.Usage+"; --time START,END: only that time")
			cmd.Flags().Lookup("time").NoOptDefVal = "true"
			continue
		}
		if f.HasArg {
			values[f.Name] = cmd.Flags().String(f.Name, "", "ptdump: "+f.Usage)
		} else {
			bools[f.Name] = cmd.Flags().Bool(f.Name, false, "ptdump: "+f.Usage)
		}
	}
	rootCmd.AddCommand(cmd)
}
