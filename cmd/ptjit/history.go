package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ptjit/ptjit/db"
)

// recordingFlags are the flags every read-only query shares.
type recordingFlags struct {
	dir string
	pid int
	cmd *cobra.Command // for its stderr
}

func (f *recordingFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVarP(&f.dir, "input", "i", "ptjit.out", "recording directory (or a code.db file)")
	cmd.Flags().IntVar(&f.pid, "pid", 0, "only this process")
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

func hexAddr(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

func init() {
	var (
		rf       recordingFlags
		addr     string
		asJSON   bool
		writes   bool
		withFile bool
	)
	cmd := &cobra.Command{
		Use:   "history [-i DIR] [--pid P] [--addr A] [--json] [--writes]",
		Short: "List the recorded code regions and versions in time order",
		Long: `history lists every recorded version of JIT (non-file-backed) executable
memory in time order: when it became valid, which thread and syscall made it
executable, its address range and SHA-256. --writes lists the W^X write log
instead. --json prints JSON Lines, one object per version (or write).`,
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
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			if writes {
				return printWrites(out, d, rf.pid, filter, asJSON)
			}
			return printHistory(out, d, filter, asJSON, withFile)
		},
	}
	rf.register(cmd)
	cmd.Flags().StringVar(&addr, "addr", "", "only versions containing this address")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON Lines output")
	cmd.Flags().BoolVar(&writes, "writes", false, "list the W^X write log instead of versions")
	cmd.Flags().BoolVar(&withFile, "files", false, "also list file-backed executable mappings (text output)")
	rootCmd.AddCommand(cmd)
}

// versionJSON is the JSON Lines form of one version. Addresses are strings
// so that no JSON reader loses precision.
type versionJSON struct {
	PID     int    `json:"pid"`
	TID     int    `json:"tid"`
	Region  int64  `json:"region"`
	Version int    `json:"version"`
	ID      int64  `json:"id"`
	Addr    string `json:"addr"`
	Size    uint64 `json:"size"`
	IP      string `json:"ip"`
	TSC     uint64 `json:"tsc"`
	MonoNS  int64  `json:"mono_ns"`
	EndTSC  uint64 `json:"end_tsc,omitempty"`
	EndNS   int64  `json:"end_mono_ns,omitempty"`
	// EndInexact: the end is the last time ptjit knew the version
	// executable, or the next version's start (see db.VersionInfo).
	EndInexact bool   `json:"end_inexact,omitempty"`
	Cause      string `json:"cause"`
	ByPtjit    bool   `json:"by_ptjit,omitempty"`
	SHA256     string `json:"sha256"`
}

func printHistory(out io.Writer, d *db.DB, f db.VersionFilter, asJSON, withFiles bool) error {
	vs, err := d.Versions(f)
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(out)
		for _, v := range vs {
			j := versionJSON{
				PID: v.PID, TID: v.TID, Region: v.Region, Version: v.Vno, ID: v.ID,
				Addr: hexAddr(v.Addr), Size: v.Size, IP: hexAddr(v.IP),
				TSC: v.Valid.TSC, MonoNS: v.Valid.MonoNS, Cause: v.Cause, ByPtjit: v.ByPtjit,
				SHA256: hex.EncodeToString(v.SHA256),
			}
			if v.HasEnd {
				j.EndTSC, j.EndNS, j.EndInexact = v.End.TSC, v.End.MonoNS, v.EndInexact
			}
			if err := enc.Encode(&j); err != nil {
				return err
			}
		}
		return nil
	}
	meta, err := d.Meta()
	if err != nil {
		return err
	}
	start, _ := strconv.ParseInt(meta["start_ns"], 10, 64)
	rel := func(ns int64) string { return fmt.Sprintf("%12.6f", float64(ns-start)/1e9) }
	if withFiles {
		fms, err := d.FileMaps(f.PID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-12s %-7s %-7s %-33s %-9s %s\n", "TIME(s)", "PID", "TID", "RANGE", "CAUSE", "FILE (offset)")
		for _, m := range fms {
			if f.HasAddr && (f.Addr < m.Addr || f.Addr-m.Addr >= m.Size) {
				continue
			}
			fmt.Fprintf(out, "%s %-7d %-7d %#014x-%#014x %-9s %s (%#x)\n", rel(m.Map.MonoNS), m.PID, m.TID, m.Addr, m.Addr+m.Size, m.Cause, m.Path, m.Offset)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%-12s %-7s %-7s %-9s %-33s %-8s %-14s %-16s %s\n", "TIME(s)", "PID", "TID", "REGION.V", "RANGE", "SIZE", "CAUSE", "IP", "SHA256")
	for _, v := range vs {
		cause := v.Cause
		if v.ByPtjit {
			cause += "*"
		}
		end := ""
		if v.HasEnd {
			end = "  until " + strings.TrimLeft(rel(v.End.MonoNS), " ")
			if v.EndInexact {
				end = "  until ≤" + strings.TrimLeft(rel(v.End.MonoNS), " ")
			}
		}
		fmt.Fprintf(out, "%s %-7d %-7d %-9s %#014x-%#014x %-8d %-14s %#-16x %s%s\n",
			rel(v.Valid.MonoNS), v.PID, v.TID, fmt.Sprintf("%d.%d", v.Region, v.Vno), v.Addr, v.Addr+v.Size, v.Size, cause, v.IP, hex.EncodeToString(v.SHA256[:8]), end)
	}
	if len(vs) == 0 {
		fmt.Fprintln(out, "(no code versions recorded)")
	}
	return nil
}

type writeJSON struct {
	PID     int    `json:"pid"`
	TID     int    `json:"tid"`
	TSC     uint64 `json:"tsc"`
	MonoNS  int64  `json:"mono_ns"`
	IP      string `json:"ip"`
	Insn    string `json:"insn"`
	Addr    string `json:"addr"`
	Old     string `json:"old"`
	New     string `json:"new"`
	Version int64  `json:"version_id,omitempty"`
}

func printWrites(out io.Writer, d *db.DB, pid int, f db.VersionFilter, asJSON bool) error {
	ws, err := d.Writes(pid)
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintf(out, "%-20s %-7s %-7s %-16s %-16s %-24s %-24s %s\n", "TSC", "PID", "TID", "IP", "ADDR", "OLD", "NEW", "INSTRUCTION")
	}
	enc := json.NewEncoder(out)
	n := 0
	for _, w := range ws {
		if f.HasAddr && (f.Addr < w.Addr || f.Addr-w.Addr >= uint64(len(w.New))) {
			continue
		}
		n++
		if asJSON {
			if err := enc.Encode(&writeJSON{PID: w.PID, TID: w.TID, TSC: w.At.TSC, MonoNS: w.At.MonoNS, IP: hexAddr(w.IP), Insn: w.Insn,
				Addr: hexAddr(w.Addr), Old: hex.EncodeToString(w.Old), New: hex.EncodeToString(w.New), Version: w.Version}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(out, "%-20d %-7d %-7d %#-16x %#-16x %-24s %-24s %s\n", w.At.TSC, w.PID, w.TID, w.IP, w.Addr, hex.EncodeToString(w.Old), hex.EncodeToString(w.New), w.Insn)
	}
	if !asJSON && n == 0 {
		fmt.Fprintln(out, "(no writes recorded: the write log is kept with --wx=precise)")
	}
	return nil
}
