package perf

// Exporting a recording's code versions for perf: one jitdump per process
// and a copy of the recording's perf.data with what `perf inject --jit`
// needs to find and time them:
//
//   - an MMAP2 of each OUTDIR/jit-PID.dump for that pid (r-x, MAP_PRIVATE),
//     the marker a cooperating JIT would make, stamped with the earliest
//     time in the file so perf inject reads the dump first;
//   - a TIME_CONV record (copied, or made from the Intel PT AUXTRACE_INFO),
//     without which perf cannot convert the dump's TSC timestamps.
//
// Every version becomes a JIT_CODE_LOAD timestamped with the TSC at which
// it became executable (the tracee was stopped then, so the load precedes
// the first TSC at which the code runs); a patched region is a new load at
// the time of the patch, and perf replaces the older mapping from then on.

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// JitCodeVersion is one version of run-time generated code to export.
type JitCodeVersion struct {
	Pid, Tid int
	Addr     uint64
	Code     []byte
	TSC      uint64 // when the bytes became executable
	Name     string // symbol name; "ptjit_<addr>_v<Index>" when empty
}

// JitExport describes what ExportJit wrote.
type JitExport struct {
	Dumps    map[int]string // pid -> jit-PID.dump path
	PerfData string         // the perf.data with markers, "" when none was given
	Loads    int
}

// jitMarkerAddr is where the marker mmaps of the jitdumps are placed: the
// lowest address Linux lets a process map (vm.mmap_min_addr), where no
// program's code lives.
const jitMarkerAddr = 0x10000

// ExportJit writes OUTDIR/jit-PID.dump for every process with versions and,
// when perfIn is not empty, OUTDIR/perf.data: perfIn with the marker mmaps
// and a TIME_CONV record added.
func ExportJit(perfIn, outDir string, versions []JitCodeVersion) (*JitExport, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	absOut, err := filepath.Abs(outDir)
	if err != nil {
		return nil, err
	}
	var p *PerfData
	if perfIn != "" {
		if p, err = OpenPerfData(perfIn); err != nil {
			return nil, err
		}
		defer p.Close()
		if SameFile(perfIn, filepath.Join(absOut, "perf.data")) {
			return nil, fmt.Errorf("%s: export output directory must differ from the recording directory", outDir)
		}
	}
	res := &JitExport{Dumps: map[int]string{}}
	byPid := map[int][]JitCodeVersion{}
	var pids []int
	for _, v := range versions {
		if _, ok := byPid[v.Pid]; !ok {
			pids = append(pids, v.Pid)
		}
		byPid[v.Pid] = append(byPid[v.Pid], v)
	}
	sort.Ints(pids)
	index := uint64(0)
	for _, pid := range pids {
		vs := byPid[pid]
		sort.SliceStable(vs, func(i, j int) bool { return vs[i].TSC < vs[j].TSC })
		path := filepath.Join(absOut, fmt.Sprintf("jit-%d.dump", pid))
		w, err := CreateJitDump(path, pid, vs[0].TSC)
		if err != nil {
			return nil, err
		}
		last := uint64(0)
		for _, v := range vs {
			index++
			name := v.Name
			if name == "" {
				name = fmt.Sprintf("ptjit_%x_v%d", v.Addr, index)
			}
			w.Load(&JitLoad{Pid: uint32(v.Pid), Tid: uint32(v.Tid), VMA: v.Addr, CodeAddr: v.Addr,
				Index: index, Name: name, Code: v.Code, Timestamp: v.TSC})
			last = max(last, v.TSC)
			res.Loads++
		}
		if err := w.Close(last); err != nil {
			return nil, err
		}
		res.Dumps[pid] = path
	}
	if p == nil {
		return res, nil
	}
	res.PerfData = filepath.Join(absOut, "perf.data")
	if err := writeMarkedPerfData(p, res.PerfData, res.Dumps); err != nil {
		os.Remove(res.PerfData)
		return nil, err
	}
	return res, nil
}

// SameFile reports whether a and b name one existing file (an output
// about to replace an input).
func SameFile(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	return err == nil && os.SameFile(sa, sb)
}

// perfScan is what a first pass over a perf.data learns.
type perfScan struct {
	timeConv   *PerfTimeConv
	minTime    uint64
	hasTime    bool
	pidMinTime map[uint32]uint64
}

func scanPerfData(p *PerfData) (*perfScan, error) {
	s := &perfScan{pidMinTime: map[uint32]uint64{}}
	rr := p.Records()
	var r PerfRecord
	var ptConv *PerfTimeConv
	for {
		err := rr.Next(&r)
		if err == io.EOF || errors.Is(err, ErrPerfDataTruncated) {
			break
		}
		if err != nil {
			return nil, err
		}
		switch r.Type {
		case RecTimeConv:
			tc := r.TimeConv
			s.timeConv = &tc
		case RecAuxtraceInfo:
			if r.AuxtraceInfo != nil && r.AuxtraceInfo.Type == AuxtraceIntelPT {
				tc := r.AuxtraceInfo.IntelPT.TimeConv()
				ptConv = &tc
			}
		}
		if r.ID.Valid&SampleTime != 0 && r.ID.Time != 0 {
			if !s.hasTime || r.ID.Time < s.minTime {
				s.minTime = r.ID.Time
			}
			s.hasTime = true
			if r.ID.Valid&SampleTID != 0 {
				if t, ok := s.pidMinTime[r.ID.Pid]; !ok || r.ID.Time < t {
					s.pidMinTime[r.ID.Pid] = r.ID.Time
				}
			}
		}
	}
	if s.timeConv == nil && ptConv != nil {
		s.timeConv = ptConv
		s.timeConv.CapUserTimeZero = true
	}
	return s, nil
}

// writeMarkedPerfData copies p to out, adding after the data start a
// TIME_CONV (when p has none) and a marker MMAP2 for every jitdump.
func writeMarkedPerfData(p *PerfData, out string, dumps map[int]string) error {
	scan, err := scanPerfData(p)
	if err != nil {
		return err
	}
	if scan.timeConv == nil || scan.timeConv.Mult == 0 {
		return fmt.Errorf("%s: no time conversion (neither TIME_CONV nor an Intel PT AUXTRACE_INFO): perf could not place the jitdump's TSC timestamps", p.Name)
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 256<<10)
	var off uint64
	var werr error
	write := func(b []byte) {
		if werr != nil {
			return
		}
		_, werr = bw.Write(b)
		off += uint64(len(b))
	}
	le := binary.LittleEndian

	// Header placeholder, attrs, ids.
	write(make([]byte, perfHeaderSize))
	attrSize := p.Header.AttrSize
	attrsOff := off
	idsOff := attrsOff + uint64(len(p.Attrs))*attrSize
	for _, a := range p.Attrs {
		write(a.Raw)
		write(le.AppendUint64(le.AppendUint64(nil, idsOff), uint64(8*len(a.IDs))))
		idsOff += uint64(8 * len(a.IDs))
	}
	for _, a := range p.Attrs {
		for _, id := range a.IDs {
			write(le.AppendUint64(nil, id))
		}
	}
	dataOff := off

	// TIME_CONV first (a user record: perf handles it on sight), then the
	// markers.
	if scan.timeConv != nil {
		tc := scan.timeConv
		pl := make([]byte, 0, 48)
		pl = le.AppendUint64(pl, tc.Shift)
		pl = le.AppendUint64(pl, tc.Mult)
		pl = le.AppendUint64(pl, tc.Zero)
		pl = le.AppendUint64(pl, tc.Cycles)
		pl = le.AppendUint64(pl, tc.Mask)
		pl = append(pl, 1, 0, 0, 0, 0, 0, 0, 0)
		if tc.CapUserTimeShort {
			pl[41] = 1
		}
		write(encodeRecordHeader(RecTimeConv, 0, len(pl)))
		write(pl)
	}
	a := &p.Attrs[0]
	var pids []int
	for pid := range dumps {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	for _, pid := range pids {
		m := PerfMmap{Pid: uint32(pid), Tid: uint32(pid), Addr: jitMarkerAddr, Prot: 5, Flags: 2, Filename: dumps[pid]}
		if err := PerfMmapFile(&m); err != nil {
			return err
		}
		st, err := os.Stat(dumps[pid])
		if err != nil {
			return err
		}
		m.Len = (uint64(st.Size()) + 4095) &^ 4095
		t, ok := scan.pidMinTime[uint32(pid)]
		if !ok {
			t = scan.minTime
		}
		pl := encodeMmap2(&m)
		if a.SampleIDAll() {
			id := uint64(0)
			if len(a.IDs) > 0 {
				id = a.IDs[0]
			}
			pl = append(pl, encodeSampleID(a.SampleType, &PerfSampleID{Pid: uint32(pid), Tid: uint32(pid), Time: t, ID: id})...)
		}
		write(encodeRecordHeader(RecMmap2, mmap2Misc(&m), len(pl)))
		write(pl)
	}

	// The records of p, AUXTRACE data included.
	rr := p.Records()
	var r PerfRecord
	for {
		err := rr.Next(&r)
		if err == io.EOF || errors.Is(err, ErrPerfDataTruncated) {
			break
		}
		if err != nil {
			return err
		}
		if r.Type == RecTimeConv {
			continue // written above
		}
		write(encodeRecordHeader(r.Type, r.Misc, len(r.Raw)))
		write(r.Raw)
		if r.Type == RecAuxtrace && werr == nil {
			n, err := io.Copy(bw, io.NewSectionReader(p.r, r.Auxtrace.DataOffset, int64(r.Auxtrace.Size)))
			off += uint64(n)
			if err != nil {
				werr = err
			}
		}
	}
	dataSize := off - dataOff

	// Features: copied, except the auxtrace index, whose offsets moved.
	feats := map[PerfFeature][]byte{}
	for feat, s := range p.Features.Sections {
		if feat == FeatAuxtrace || s.Size > 64<<20 {
			continue
		}
		b, err := p.readAt(featureName(feat), int64(s.Offset), s.Size)
		if err != nil {
			return err
		}
		feats[feat] = b
	}
	fb, bitmap := encodeFeatures(off, feats)
	write(fb)
	if werr == nil {
		werr = bw.Flush()
	}
	if werr == nil {
		_, werr = f.WriteAt(encodePerfHeader(attrSize, PerfSection{attrsOff, uint64(len(p.Attrs)) * attrSize},
			PerfSection{dataOff, dataSize}, bitmap), 0)
	}
	if werr != nil {
		return fmt.Errorf("%s: %w", out, werr)
	}
	return f.Close()
}

// encodeRecordHeader encodes struct perf_event_header for a payload of n
// bytes.
func encodeRecordHeader(t PerfRecordType, misc uint16, n int) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, uint32(t))
	b = le.AppendUint16(b, misc)
	return le.AppendUint16(b, uint16(8+n))
}
