package main

import (
	"bufio"
	"fmt"
	"strconv"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/recording"
	"github.com/spf13/cobra"
)

// openRegion opens the recording and returns the region that holds the
// address given as ADDR (db.RegionAt). The caller closes d.
func (f *recordingFlags) openRegion(addrArg string, region int64) (d *db.DB, addr uint64, r *db.Region, err error) {
	if addr, err = parseAddr("ADDR", addrArg); err != nil {
		return nil, 0, nil, err
	}
	if d, err = f.open(); err != nil {
		return nil, 0, nil, err
	}
	if r, err = d.RegionAt(f.pid, addr, region); err != nil {
		d.Close()
		return nil, 0, nil, err
	}
	return d, addr, r, nil
}

// pickVersion selects the version --at or --version names, else the latest.
func pickVersion(r *db.Region, at string, vno int) (*db.VersionInfo, error) {
	switch {
	case at != "" && vno != 0:
		return nil, fmt.Errorf("--at and --version exclude each other")
	case at != "":
		t, err := strconv.ParseUint(at, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("--at %q: not a TSC value", at)
		}
		return r.At(t)
	case vno != 0:
		return r.Version(vno)
	}
	return r.Latest(), nil
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
		Use:   "show [-i DIR] ADDR [--at TSC | --version N] [--raw]",
		Short: "Show the code at ADDR as it was at a moment or in a version",
		Long: `show disassembles the recorded code at ADDR as it was at TSC (--at), in
version N of its region (--version), or in the latest version, naming the
region and version. --raw prints the bytes as hex instead.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, addr, r, err := rf.openRegion(args[0], region)
			if err != nil {
				return err
			}
			defer d.Close()
			v, err := pickVersion(r, at, vno)
			if err != nil {
				return err
			}
			data, err := d.VersionData(v)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			fmt.Fprintln(out, v)
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
	cmd.Flags().StringVar(&at, "at", "", "the version valid at this TSC")
	cmd.Flags().IntVar(&vno, "version", 0, "version number within the region")
	cmd.Flags().Int64Var(&region, "region", 0, "region id (default: the latest region containing ADDR)")
	cmd.Flags().BoolVar(&raw, "raw", false, "print the bytes as hex instead of disassembling")
	cmd.Flags().IntVarP(&count, "count", "n", 20, "instructions to disassemble")
	cmd.Flags().Uint64Var(&length, "len", 0, "bytes to show (default: to the end of the version for --raw)")
	rootCmd.AddCommand(cmd)
}
