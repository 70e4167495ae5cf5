package main

import (
	"bufio"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

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
			var v [2]int
			for i, a := range args[1:] {
				if v[i], err = strconv.Atoi(a); err != nil || v[i] <= 0 {
					return fmt.Errorf("version %q: not a version number", a)
				}
			}
			pairs, err := recording.DiffPairs(r, addr, v[0], v[1])
			if err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			return recording.WriteDiff(out, d, tb, addr, pairs)
		},
	}
	rf.register(cmd)
	cmd.Flags().Int64Var(&region, "region", 0, "region id (default: the latest region containing ADDR)")
	rootCmd.AddCommand(cmd)
}
