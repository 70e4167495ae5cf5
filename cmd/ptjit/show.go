package main

import (
	"bufio"
	"fmt"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/recording"
	"github.com/spf13/cobra"
)

// openRegion opens the recording and returns the region that holds the
// address given as ADDR (db.RegionAt), or, with at (--at), the one live
// there then. The caller closes d.
func (f *recordingFlags) openRegion(addrArg string, region int64, at string) (d *db.DB, addr uint64, r *db.Region, v *db.VersionInfo, tb recording.TimeBase, err error) {
	if addr, err = parseAddr("ADDR", addrArg); err != nil {
		return
	}
	if d, err = f.open(); err != nil {
		return
	}
	if tb, err = f.timeBase(d); err == nil {
		if at == "" {
			r, err = d.RegionAt(f.pid, addr, region)
		} else if t, perr := tb.Parse("--at", at); perr != nil {
			err = perr
		} else if r, err = d.RegionLiveAt(f.pid, addr, region, t); err == nil {
			v, err = r.At(t)
		}
	}
	if err != nil {
		d.Close()
	}
	return
}

func init() {
	var (
		rf     recordingFlags
		at     string
		vno    int
		region int64
		raw    bool
		count  int
		length uint64
	)
	cmd := &cobra.Command{
		Use:   "show [-i DIR] ADDR [--at TIME | --version N] [--raw] [--tsc]",
		Short: "Show the code at ADDR as it was at a moment or in a version",
		Long: `show disassembles the recorded code at ADDR as it was at TIME (--at: seconds
since the recording started, or tsc:N; the region live at ADDR then), in
version N of its region (--version), or in the latest version, naming the
region and version and, as <NAME>: lines, the functions its JIT named. --raw
prints the bytes as hex instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case at != "" && cmd.Flags().Changed("version"):
				return fmt.Errorf("--at and --version exclude each other")
			case cmd.Flags().Changed("version") && vno < 1:
				return fmt.Errorf("--version %d: versions are numbered from 1", vno)
			case count < 1:
				return fmt.Errorf("-n %d: want at least 1 instruction", count)
			}
			d, addr, r, v, tb, err := rf.openRegion(args[0], region, at)
			if err != nil {
				return err
			}
			defer d.Close()
			if vno != 0 {
				v, err = r.Version(vno)
			} else if v == nil {
				v = r.Latest()
			}
			if err != nil {
				return err
			}
			data, err := d.VersionData(v)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			fmt.Fprintln(out, tb.Describe(v))
			code := data[addr-v.Addr:]
			if length != 0 && length < uint64(len(code)) {
				code = code[:length]
			}
			if raw {
				ptfmt.HexDump(out, addr, code)
				return nil
			}
			names, err := recording.NamesOf(d, v)
			if err != nil {
				return err
			}
			ptfmt.DisasmNamed(out, addr, code, count, names)
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().StringVar(&at, "at", "", "the version valid at this time (seconds since the start, or tsc:N)")
	cmd.Flags().IntVar(&vno, "version", 0, "version number within the region")
	cmd.Flags().Int64Var(&region, "region", 0, "region id (default: the latest region containing ADDR)")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the bytes as hex instead of disassembling")
	cmd.Flags().IntVarP(&count, "count", "n", 20, "instructions to disassemble")
	cmd.Flags().Uint64Var(&length, "len", 0, "bytes to show (default: to the end of the version for --raw)")
	rootCmd.AddCommand(cmd)
}
