package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/ptjit/ptjit/recording"
	"github.com/spf13/cobra"
)

func init() {
	exportCmd := &cobra.Command{
		Use:   "export",
		Short: "Export a recording for other tools",
		Long:  `export converts a ptjit recording into the formats other tools read.`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fmt.Errorf("export: name a format (ptjit export jitdump|perfetto)")
		},
	}
	var dir, out string
	var noPerf bool
	jitCmd := &cobra.Command{
		Use:   "jitdump -o OUTDIR",
		Short: "Write the recorded code versions as jitdump files for perf inject --jit",
		Long: `jitdump writes every code version of DIR/code.db as a JIT_CODE_LOAD of
OUTDIR/jit-PID.dump (TSC timestamps: the moment the version became executable,
so a patched region is a new load at the time of the patch), and
OUTDIR/perf.data: DIR/perf.data with an MMAP2 of each jit-PID.dump (the marker
a cooperating JIT makes) and a TIME_CONV record. Then

    perf inject --jit -i OUTDIR/perf.data -o OUTDIR/perf.jit.data
    perf script -i OUTDIR/perf.jit.data --itrace=i0ns -F ip,sym,dso

shows the JIT code as jitted-PID-N.so. perf inject writes those files next
to the jitdumps, in OUTDIR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("export jitdump: -o OUTDIR is required")
			}
			return exportJitdump(cmd, dir, out, noPerf)
		},
	}
	jitCmd.Flags().StringVarP(&dir, "input", "i", "ptjit.out", "recording directory (code.db, perf.data)")
	jitCmd.Flags().StringVarP(&out, "output", "o", "", "output directory (created if needed)")
	jitCmd.Flags().BoolVar(&noPerf, "no-perf-data", false, "write only the jitdump files (the recording has no perf.data)")
	exportCmd.AddCommand(jitCmd)
	var po recording.PerfettoOptions
	pfCmd := &cobra.Command{Use: "perfetto -o FILE", Short: "Write a timeline (calls, code versions, W^X writes) for ui.perfetto.dev",
		Long: recording.PerfettoUsage, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			po.Warn = func(msg string) { fmt.Fprintf(cmd.ErrOrStderr(), "ptjit: warning: %s\n", msg) }
			res, err := recording.ExportPerfetto(dir, out, cmd.OutOrStdout(), po)
			if err != nil {
				return fmt.Errorf("export perfetto: %v", err)
			}
			if out != "-" {
				fmt.Fprintf(cmd.OutOrStdout(), "%s: %d slices of %d threads, %d code versions, %d W^X writes\n", out, res.Slices, res.Threads, res.Versions, res.Writes)
			}
			return nil
		}}
	f := pfCmd.Flags()
	f.StringVarP(&dir, "input", "i", "ptjit.out", "recording directory")
	f.StringVarP(&out, "output", "o", "", "output file (JSON; - for stdout)")
	f.StringVar(&po.Time, "time", "", "only the window START,END (as decode --time)")
	f.DurationVar(&po.MinDur, "min-dur", 0, "leave out calls shorter than this (e.g. 10us)")
	f.Uint64Var(&po.MaxSlices, "max-slices", 1000000, "at most this many slices per thread (0: no limit)")
	f.BoolVar(&po.Force, "force", false, "replace an existing output file")
	f.IntVarP(&po.Jobs, "jobs", "j", 0, "decode on N goroutines (default: all cores)")
	exportCmd.AddCommand(pfCmd)
	rootCmd.AddCommand(exportCmd)
}

func exportJitdump(cmd *cobra.Command, dir, out string, noPerf bool) error {
	res, err := recording.ExportJitdump(dir, out, noPerf, func(msg string) {
		fmt.Fprintf(cmd.ErrOrStderr(), "ptjit: warning: %s\n", msg)
	})
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	pids := make([]int, 0, len(res.Dumps))
	for pid := range res.Dumps {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		fmt.Fprintf(w, "%s: pid %d\n", res.Dumps[pid], pid)
	}
	fmt.Fprintf(w, "%d code versions exported\n", res.Loads)
	if res.PerfData != "" {
		fmt.Fprintf(w, "%s: perf.data with jitdump markers; next:\n  perf inject --jit -i %s -o %s\n",
			res.PerfData, res.PerfData, filepath.Join(out, "perf.jit.data"))
	}
	return nil
}
