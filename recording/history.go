package recording

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/db"
)

// What ptjit history prints: the code versions, the W^X write log and the
// published names of a recording, as text with a header over every
// column or as JSON Lines.

// HistoryOptions configure WriteHistory, WriteWrites and WriteNames.
type HistoryOptions struct {
	JSON  bool
	Files bool     // also the file-backed executable mappings (text)
	Time  TimeBase // how times are printed
	Names *Names   // the published names (LoadNames), for the NAMES column
	PID   int      // the --pid asked for (0: all), for the "no match" line
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
	EndInexact bool     `json:"end_inexact,omitempty"`
	Cause      string   `json:"cause"`
	ByPtjit    bool     `json:"by_ptjit,omitempty"`
	SHA256     string   `json:"sha256"`
	Names      []string `json:"names,omitempty"`
}

// fileMapJSON is the JSON Lines form of a file-backed executable mapping
// (history --files --json): kind "file", beside the versions' lines.
type fileMapJSON struct {
	Kind     string `json:"kind"`
	PID      int    `json:"pid"`
	TID      int    `json:"tid"`
	Addr     string `json:"addr"`
	Size     uint64 `json:"size"`
	Path     string `json:"path"`
	Offset   uint64 `json:"offset"`
	BuildID  string `json:"build_id,omitempty"`
	Cause    string `json:"cause"`
	TSC      uint64 `json:"tsc"`
	MonoNS   int64  `json:"mono_ns"`
	UnmapTSC uint64 `json:"unmap_tsc,omitempty"`
	UnmapNS  int64  `json:"unmap_mono_ns,omitempty"`
}

func writeFileMapsJSON(enc *json.Encoder, d *db.DB, f db.VersionFilter) error {
	fms, err := d.FileMaps(f.PID)
	if err != nil {
		return err
	}
	for _, m := range fms {
		if f.HasAddr && (f.Addr < m.Addr || f.Addr-m.Addr >= m.Size) {
			continue
		}
		j := fileMapJSON{Kind: "file", PID: m.PID, TID: m.TID, Addr: hexAddr(m.Addr), Size: m.Size, Path: m.Path, Offset: m.Offset,
			BuildID: hex.EncodeToString(m.BuildID), Cause: m.Cause, TSC: m.Map.TSC, MonoNS: m.Map.MonoNS}
		if m.HasUnmap {
			j.UnmapTSC, j.UnmapNS = m.Unmap.TSC, m.Unmap.MonoNS
		}
		if err := enc.Encode(&j); err != nil {
			return err
		}
	}
	return nil
}

func hexAddr(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// noMatch is the line for an empty listing.
func noMatch(what string, o HistoryOptions) string {
	if o.PID != 0 {
		return fmt.Sprintf("(no %s recorded for pid %d)", what, o.PID)
	}
	return fmt.Sprintf("(no %s recorded)", what)
}

// versionNames lists the names in a version, in address order.
func versionNames(n *Names, v *db.VersionInfo) []string {
	var out []string
	for _, sp := range n.In(v.Region, v.Vno) {
		out = append(out, sp.Name)
	}
	return out
}

// WriteHistory writes the versions matching f in time order.
func WriteHistory(out io.Writer, d *db.DB, f db.VersionFilter, o HistoryOptions) error {
	vs, err := d.Versions(f)
	if err != nil {
		return err
	}
	if o.JSON {
		enc := json.NewEncoder(out)
		if o.Files {
			if err := writeFileMapsJSON(enc, d, f); err != nil {
				return err
			}
		}
		for _, v := range vs {
			j := versionJSON{
				PID: v.PID, TID: v.TID, Region: v.Region, Version: v.Vno, ID: v.ID,
				Addr: hexAddr(v.Addr), Size: v.Size, IP: hexAddr(v.IP),
				TSC: v.Valid.TSC, MonoNS: v.Valid.MonoNS, Cause: v.Cause, ByPtjit: v.ByPtjit,
				SHA256: hex.EncodeToString(v.SHA256), Names: versionNames(o.Names, &v),
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
	timeHdr := "TIME(s)"
	if o.Time.Raw {
		timeHdr = "TSC"
	}
	if o.Files {
		fms, err := d.FileMaps(f.PID)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%-16s %-7s %-7s %-33s %-9s %s\n", timeHdr, "PID", "TID", "RANGE", "CAUSE", "FILE (offset)")
		for _, m := range fms {
			if f.HasAddr && (f.Addr < m.Addr || f.Addr-m.Addr >= m.Size) {
				continue
			}
			fmt.Fprintf(out, "%16s %-7d %-7d %#014x-%#014x %-9s %s (%#x)\n", o.Time.Format(m.Map.TSC), m.PID, m.TID, m.Addr, m.Addr+m.Size, m.Cause, m.Path, m.Offset)
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "%-16s %-7s %-7s %-9s %-33s %-8s %-14s %-16s %-16s %-16s %s\n", timeHdr, "PID", "TID", "REGION.V", "RANGE", "SIZE", "CAUSE", "IP", "SHA256", "UNTIL", "NAMES")
	for _, v := range vs {
		cause := v.Cause
		if v.ByPtjit {
			cause += "*"
		}
		end := "-"
		if v.HasEnd {
			end = o.Time.Format(v.End.TSC)
			if v.EndInexact {
				end = "≤" + strings.TrimLeft(end, " ")
			}
		}
		names := versionNames(o.Names, &v)
		if len(names) > 2 {
			names = append(names[:2], fmt.Sprintf("+%d more", len(names)-2))
		}
		fmt.Fprintf(out, "%16s %-7d %-7d %-9s %#014x-%#014x %-8d %-14s %#-16x %-16s %16s %s\n",
			o.Time.Format(v.Valid.TSC), v.PID, v.TID, fmt.Sprintf("%d.%d", v.Region, v.Vno), v.Addr, v.Addr+v.Size, v.Size, cause, v.IP,
			hex.EncodeToString(v.SHA256[:8]), end, strings.Join(names, ", "))
	}
	if len(vs) == 0 {
		fmt.Fprintln(out, noMatch("code versions", o))
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

// maxHexBytes is how many bytes of a write the text listing shows; the
// rest is counted ("…+N bytes"), and --json has them all.
const maxHexBytes = 16

// shortHex is b in hex, cut after maxHexBytes with a marker.
func shortHex(b []byte) string {
	if len(b) <= maxHexBytes {
		return hex.EncodeToString(b)
	}
	return hex.EncodeToString(b[:maxHexBytes]) + fmt.Sprintf("…+%dB", len(b)-maxHexBytes)
}

// WriteWrites writes the W^X write log of pid (all when 0), only the
// writes covering f.Addr when f.HasAddr.
func WriteWrites(out io.Writer, d *db.DB, pid int, f db.VersionFilter, o HistoryOptions) error {
	ws, err := d.Writes(pid)
	if err != nil {
		return err
	}
	timeHdr := "TIME(s)"
	if o.Time.Raw {
		timeHdr = "TSC"
	}
	if !o.JSON {
		fmt.Fprintf(out, "%-16s %-7s %-7s %-16s %-16s %-40s %-40s %s\n", timeHdr, "PID", "TID", "IP", "ADDR", "OLD", "NEW", "INSTRUCTION")
	}
	enc := json.NewEncoder(out)
	n := 0
	for _, w := range ws {
		if f.HasAddr && (f.Addr < w.Addr || f.Addr-w.Addr >= uint64(len(w.New))) {
			continue
		}
		n++
		if o.JSON {
			if err := enc.Encode(&writeJSON{PID: w.PID, TID: w.TID, TSC: w.At.TSC, MonoNS: w.At.MonoNS, IP: hexAddr(w.IP), Insn: w.Insn,
				Addr: hexAddr(w.Addr), Old: hex.EncodeToString(w.Old), New: hex.EncodeToString(w.New), Version: w.Version}); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintf(out, "%16s %-7d %-7d %#-16x %#-16x %-40s %-40s %s\n", o.Time.Format(w.At.TSC), w.PID, w.TID, w.IP, w.Addr, shortHex(w.Old), shortHex(w.New), w.Insn)
	}
	if !o.JSON && n == 0 {
		if o.PID != 0 {
			fmt.Fprintln(out, noMatch("writes", o))
		} else {
			fmt.Fprintln(out, "(no writes recorded: the write log is kept with --wx=precise)")
		}
	}
	return nil
}

// nameJSON is the JSON Lines form of a published name.
type nameJSON struct {
	PID      int      `json:"pid"`
	Addr     string   `json:"addr"`
	Size     uint64   `json:"size"`
	Name     string   `json:"name"`
	Source   string   `json:"source"`
	TSC      uint64   `json:"tsc"`
	Versions []string `json:"versions"`
}

// WriteNames writes the names the program published, in the order ptjit
// read them, each with the versions it was given to (Names).
func WriteNames(out io.Writer, n *Names, o HistoryOptions) error {
	rows := n.Rows()
	enc := json.NewEncoder(out)
	if !o.JSON {
		hdr := "READ(s)"
		if o.Time.Raw {
			hdr = "READ(tsc)"
		}
		fmt.Fprintf(out, "%-16s %-7s %-33s %-8s %-24s %s\n", hdr, "PID", "RANGE", "SIZE", "VERSIONS", "NAME")
	}
	for _, r := range rows {
		if o.JSON {
			if err := enc.Encode(&nameJSON{PID: r.PID, Addr: hexAddr(r.Addr), Size: r.Size, Name: r.Name, Source: r.Source, TSC: r.At.TSC, Versions: r.Versions}); err != nil {
				return err
			}
			continue
		}
		vs := "-"
		switch {
		case len(r.Versions) == 1:
			vs = r.Versions[0]
		case len(r.Versions) > 1:
			vs = fmt.Sprintf("%s..%s (%d)", r.Versions[0], r.Versions[len(r.Versions)-1], len(r.Versions))
		}
		fmt.Fprintf(out, "%16s %-7d %#014x-%#014x %-8d %-24s %s\n", o.Time.Format(r.At.TSC), r.PID, r.Addr, r.Addr+r.Size, r.Size, vs, r.Name)
	}
	if !o.JSON && len(rows) == 0 {
		fmt.Fprintln(out, noMatch("published names (perf maps)", o))
	}
	return nil
}
