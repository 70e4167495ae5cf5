package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/recording"
)

// recordingFlags are the flags every read-only query shares.
type recordingFlags struct {
	dir string
	pid int
	tsc bool
	cmd *cobra.Command // for its stderr
}

func (f *recordingFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVarP(&f.dir, "input", "i", "ptjit.out", "recording directory (or a code.db file)")
	cmd.Flags().IntVar(&f.pid, "pid", 0, "only this process")
	cmd.Flags().BoolVar(&f.tsc, "tsc", false, "times as raw TSC instead of seconds since the recording started")
}

func (f *recordingFlags) timeBase(d *db.DB) (recording.TimeBase, error) {
	return recording.LoadTimeBase(d, f.tsc)
}

// codeDBPath maps -i to the code.db inside a recording directory; a path
// naming a file is taken as the code.db itself.
func codeDBPath(dir string) string {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return dir
	}
	return filepath.Join(dir, "code.db")
}

func (f *recordingFlags) open() (*db.DB, error) {
	return openCodeDB(codeDBPath(f.dir), f.cmd.ErrOrStderr())
}

// openCodeDB opens a code.db for a query and prints one warning line on w
// when the recording is incomplete (db.OpenChecked).
func openCodeDB(path string, w io.Writer) (*db.DB, error) {
	return db.OpenChecked(path, func(msg string) { fmt.Fprintf(w, "ptjit: warning: %s\n", msg) })
}

// parseAddr reads an address in hex (0x...) or decimal.
func parseAddr(what, s string) (uint64, error) {
	v, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: not an address (use 0x... or decimal)", what, s)
	}
	return v, nil
}

func init() {
	var (
		rf       recordingFlags
		addr     string
		asJSON   bool
		writes   bool
		withFile bool
		names    bool
	)
	cmd := &cobra.Command{
		Use:   "history [-i DIR] [--pid P] [--addr A] [--json] [--writes | --names] [--tsc]",
		Short: "List the recorded code regions and versions in time order",
		Long: `history lists every recorded version of JIT (non-file-backed) executable
memory in time order: when it became valid, which thread and syscall made it
executable, its address range and SHA-256, and the names its JIT published for
the code in it (perf maps). --writes lists the W^X write log instead, --names
the published names with the versions each belongs to. --json prints JSON
Lines, one object per version (write, name). Times are seconds since the
recording started (--tsc: raw TSC).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := rf.open()
			if err != nil {
				return err
			}
			defer d.Close()
			var filter db.VersionFilter
			filter.PID = rf.pid
			if addr != "" {
				a, err := parseAddr("--addr", addr)
				if err != nil {
					return err
				}
				filter.Addr, filter.HasAddr = a, true
			}
			o := recording.HistoryOptions{JSON: asJSON, Files: withFile, PID: rf.pid}
			if o.Time, err = rf.timeBase(d); err != nil {
				return err
			}
			if o.Names, err = recording.LoadNames(d, rf.pid, nil); err != nil {
				return err
			}
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			switch {
			case writes && names:
				return fmt.Errorf("--writes and --names exclude each other")
			case writes:
				return recording.WriteWrites(out, d, rf.pid, filter, o)
			case names:
				return recording.WriteNames(out, o.Names, o)
			}
			return recording.WriteHistory(out, d, filter, o)
		},
	}
	rf.register(cmd)
	cmd.Flags().StringVar(&addr, "addr", "", "only versions containing this address")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines output")
	cmd.Flags().BoolVar(&writes, "writes", false, "list the W^X write log instead of versions")
	cmd.Flags().BoolVar(&withFile, "files", false, "also list file-backed executable mappings (text output)")
	cmd.Flags().BoolVar(&names, "names", false, "list the names the program published (perf maps)")
	rootCmd.AddCommand(cmd)
}
