package main

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/recording"
)

func init() {
	var (
		rf     recordingFlags
		region int64
	)
	cmd := &cobra.Command{
		Use:   "diff [-i DIR] ADDR [V1 V2]",
		Short: "Show which instructions changed between versions of the code at ADDR",
		Long: `diff compares versions V1 and V2 (version numbers within the region that
contains ADDR), or every consecutive pair of versions when none are given.
Instructions are decoded from ADDR onwards in both versions; a replaced
instruction is shown as "OLD → NEW" (e.g. a static key: nop5 → jmp 0x...),
longer changes as -/+ lines.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 3 {
				return fmt.Errorf("diff takes ADDR or ADDR V1 V2, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			d, addr, r, _, tb, err := rf.openRegion(args[0], region, "")
			if err != nil {
				return err
			}
			defer d.Close()
			var pairs [][2]*db.VersionInfo
			if len(args) == 3 {
				var pick [2]*db.VersionInfo
				for i, a := range args[1:] {
					n, err := strconv.Atoi(a)
					if err != nil || n <= 0 {
						return fmt.Errorf("version %q: not a version number", a)
					}
					if pick[i], err = r.Version(n); err != nil {
						return err
					}
				}
				pairs = append(pairs, pick)
			} else {
				vs := r.Versions
				if len(vs) < 2 {
					return fmt.Errorf("region %d has only one version containing %#x: nothing to compare", r.ID, addr)
				}
				for i := 1; i < len(vs); i++ {
					pairs = append(pairs, [2]*db.VersionInfo{&vs[i-1], &vs[i]})
				}
			}
			names, err := recording.LoadNames(d, pairs[0][0].PID, nil)
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			for _, p := range pairs {
				if err := diffVersions(out, d, names, tb, addr, p[0], p[1]); err != nil {
					return err
				}
			}
			return nil
		},
	}
	rf.register(cmd)
	cmd.Flags().Int64Var(&region, "region", 0, "region id (default: the latest region containing ADDR)")
	rootCmd.AddCommand(cmd)
}

// diffVersions prints the instruction-level changes between a and b from
// addr to the end of their common range.
func diffVersions(out io.Writer, d *db.DB, names *recording.Names, tb recording.TimeBase, addr uint64, a, b *db.VersionInfo) error {
	da, err := d.VersionData(a)
	if err != nil {
		return err
	}
	db2, err := d.VersionData(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "region %d: version %d → %d (%s by tid %d at ip %#x, %s)\n", a.Region, a.Vno, b.Vno, b.Cause, b.TID, b.IP, tb.At(b.Valid.TSC))
	if sa, sb := names.At(a, addr), names.At(b, addr); sa != "" || sb != "" {
		fmt.Fprintf(out, "  %#x: %s → %s\n", addr, cmp.Or(sa, "(no name)"), cmp.Or(sb, "(no name)"))
	}
	ptfmt.DiffCode(out, addr, a.Addr, da, b.Addr, db2)
	return nil
}
