package perf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
)

// PerfRecordType is perf_event_header.type.
type PerfRecordType uint32

// Record types (enum perf_event_type and perf's enum perf_user_event_type).
const (
	RecMmap          PerfRecordType = 1
	RecLost          PerfRecordType = 2
	RecComm          PerfRecordType = 3
	RecExit          PerfRecordType = 4
	RecThrottle      PerfRecordType = 5
	RecUnthrottle    PerfRecordType = 6
	RecFork          PerfRecordType = 7
	RecRead          PerfRecordType = 8
	RecSample        PerfRecordType = 9
	RecMmap2         PerfRecordType = 10
	RecAux           PerfRecordType = 11
	RecItraceStart   PerfRecordType = 12
	RecLostSamples   PerfRecordType = 13
	RecSwitch        PerfRecordType = 14
	RecSwitchCPUWide PerfRecordType = 15
	RecNamespaces    PerfRecordType = 16
	RecKsymbol       PerfRecordType = 17
	RecBPFEvent      PerfRecordType = 18
	RecCgroup        PerfRecordType = 19
	RecTextPoke      PerfRecordType = 20
	RecAuxOutputHwID PerfRecordType = 21

	RecHeaderAttr        PerfRecordType = 64
	RecHeaderEventType   PerfRecordType = 65
	RecHeaderTracingData PerfRecordType = 66
	RecHeaderBuildID     PerfRecordType = 67
	RecFinishedRound     PerfRecordType = 68
	RecIDIndex           PerfRecordType = 69
	RecAuxtraceInfo      PerfRecordType = 70
	RecAuxtrace          PerfRecordType = 71
	RecAuxtraceError     PerfRecordType = 72
	RecThreadMap         PerfRecordType = 73
	RecCPUMap            PerfRecordType = 74
	RecStatConfig        PerfRecordType = 75
	RecStat              PerfRecordType = 76
	RecStatRound         PerfRecordType = 77
	RecEventUpdate       PerfRecordType = 78
	RecTimeConv          PerfRecordType = 79
	RecHeaderFeature     PerfRecordType = 80
	RecCompressed        PerfRecordType = 81
	RecFinishedInit      PerfRecordType = 82
	perfRecordUserBase   PerfRecordType = 64
)

var perfRecordNames = map[PerfRecordType]string{
	RecMmap: "MMAP", RecLost: "LOST", RecComm: "COMM", RecExit: "EXIT", RecThrottle: "THROTTLE",
	RecUnthrottle: "UNTHROTTLE", RecFork: "FORK", RecRead: "READ", RecSample: "SAMPLE",
	RecMmap2: "MMAP2", RecAux: "AUX", RecItraceStart: "ITRACE_START", RecLostSamples: "LOST_SAMPLES",
	RecSwitch: "SWITCH", RecSwitchCPUWide: "SWITCH_CPU_WIDE", RecNamespaces: "NAMESPACES",
	RecKsymbol: "KSYMBOL", RecBPFEvent: "BPF_EVENT", RecCgroup: "CGROUP", RecTextPoke: "TEXT_POKE",
	RecAuxOutputHwID: "AUX_OUTPUT_HW_ID", RecHeaderAttr: "HEADER_ATTR", RecHeaderEventType: "HEADER_EVENT_TYPE",
	RecHeaderTracingData: "HEADER_TRACING_DATA", RecHeaderBuildID: "HEADER_BUILD_ID",
	RecFinishedRound: "FINISHED_ROUND", RecIDIndex: "ID_INDEX", RecAuxtraceInfo: "AUXTRACE_INFO",
	RecAuxtrace: "AUXTRACE", RecAuxtraceError: "AUXTRACE_ERROR", RecThreadMap: "THREAD_MAP",
	RecCPUMap: "CPU_MAP", RecStatConfig: "STAT_CONFIG", RecStat: "STAT", RecStatRound: "STAT_ROUND",
	RecEventUpdate: "EVENT_UPDATE", RecTimeConv: "TIME_CONV", RecHeaderFeature: "HEADER_FEATURE",
	RecCompressed: "COMPRESSED", RecFinishedInit: "FINISHED_INIT",
}

func (t PerfRecordType) String() string {
	if s, ok := perfRecordNames[t]; ok {
		return s
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// perf_event_header.misc bits.
const (
	MiscCommExec       = 1 << 13 // COMM: caused by exec
	MiscSwitchOut      = 1 << 13 // SWITCH: switch out, not in
	MiscSwitchPreempt  = 1 << 14 // SWITCH out: preempted
	MiscMmapBuildID    = 1 << 14 // MMAP2: carries a build id, not dev/inode
	MiscCPUModeMask    = 7
	MiscCPUModeUser    = 2
	MiscCPUModeKernel  = 1
	perfMiscExactIP    = 1 << 14
	perfMmapBuildIDMax = 20
)

// AUX record flags (PERF_AUX_FLAG_*).
const (
	AuxFlagTruncated = 1 << 0
	AuxFlagOverwrite = 1 << 1
	AuxFlagPartial   = 1 << 2
	AuxFlagCollision = 1 << 3
)

// PerfSampleID is the sample_id trailer of a non-sample record (or the same
// fields of a sample). Valid tells which fields were present (sample_type
// bits).
type PerfSampleID struct {
	Valid    uint64
	Pid, Tid uint32
	Time     uint64
	ID       uint64
	StreamID uint64
	CPU      uint32
}

// PerfMmap is an MMAP or MMAP2 record (struct perf_record_mmap/mmap2).
type PerfMmap struct {
	Pid, Tid         uint32
	Addr, Len, Pgoff uint64
	Maj, Min         uint32 // MMAP2 without build id
	Ino, InoGen      uint64
	BuildID          []byte // MMAP2 with MiscMmapBuildID; aliases the record buffer
	Prot, Flags      uint32
	Filename         string
}

// PerfTask is a FORK or EXIT record (struct perf_record_fork).
type PerfTask struct {
	Pid, PPid, Tid, PTid uint32
	Time                 uint64
}

// PerfAux is an AUX record: new data landed in the AUX area.
type PerfAux struct {
	Offset, Size, Flags uint64
}

// PerfAuxtrace is an AUXTRACE record (struct perf_record_auxtrace). The
// trace bytes follow the record in the file at DataOffset; header.size does
// not count them.
type PerfAuxtrace struct {
	Size, Offset, Reference uint64
	Idx, Tid, CPU           uint32
	DataOffset              int64
}

// PerfSample is the leading fields of a SAMPLE record, as far as ptjit
// parses them (identifier, ip, tid, time, addr, id, stream id, cpu,
// period).
type PerfSample struct {
	IP, Addr, Period uint64
}

// PerfTimeConv is a TIME_CONV record (struct perf_record_time_conv): the
// conversion between TSC and perf time.
type PerfTimeConv struct {
	Shift, Mult, Zero uint64
	Cycles, Mask      uint64 // extended record only
	CapUserTimeZero   bool
	CapUserTimeShort  bool
}

// PerfRecord is one record. Next fills the fields of the record's type and
// leaves the others as they were; Raw and BuildID alias a buffer reused by
// the next call.
type PerfRecord struct {
	Offset int64 // file offset of the record header
	Type   PerfRecordType
	Misc   uint16
	Size   uint16 // header.size (AUXTRACE data not included)
	Attr   *PerfAttr
	ID     PerfSampleID

	Mmap         PerfMmap          // MMAP, MMAP2
	Comm         string            // COMM
	CommPid      uint32            // COMM
	CommTid      uint32            // COMM
	Task         PerfTask          // FORK, EXIT
	Aux          PerfAux           // AUX
	ItracePid    uint32            // ITRACE_START
	ItraceTid    uint32            // ITRACE_START
	SwitchPid    uint32            // SWITCH_CPU_WIDE: next (switch out) or previous pid
	SwitchTid    uint32            // SWITCH_CPU_WIDE
	LostID       uint64            // LOST
	Lost         uint64            // LOST, LOST_SAMPLES
	Sample       PerfSample        // SAMPLE
	TimeConv     PerfTimeConv      // TIME_CONV
	AuxtraceInfo *PerfAuxtraceInfo // AUXTRACE_INFO (newly allocated)
	Auxtrace     PerfAuxtrace      // AUXTRACE

	// Raw is the record's bytes after the 8-byte header.
	Raw []byte
}

// SwitchOut reports whether a SWITCH/SWITCH_CPU_WIDE record is a switch out.
func (r *PerfRecord) SwitchOut() bool { return r.Misc&MiscSwitchOut != 0 }

// PerfRecordReader iterates over the records of a PerfData in file order.
type PerfRecordReader struct {
	p   *PerfData
	off int64
	end int64

	mem    memReader // p's reader, where its bytes are in memory
	win    []byte    // cached file bytes starting at winOff
	winOff int64
	buf    []byte // the current record (copy, stable until the next call)
	err    error
	after  error // returned by the Next after the current record (a cut AUXTRACE)

	// headersOnly: walk records without parsing them (a pipe-mode file's
	// first pass, which looks for its attrs before any record can be
	// parsed).
	headersOnly bool
}

// perfReadWindow is how much the reader fetches from the file at once.
const perfReadWindow = 256 << 10

// memReader is an io.ReaderAt whose bytes are in memory (a mapped file):
// Bytes returns them all, or nil once they are gone (the file closed).
// The record reader takes a record's bytes from them where they are
// instead of copying the file, AUXTRACE data and all, into its window: a
// soft-PT recording's load copied 8 MB and faulted its pages in for 2% of
// its decode.
type memReader interface {
	io.ReaderAt
	Bytes() []byte
}

// Records returns a reader positioned at the first record.
func (p *PerfData) Records() *PerfRecordReader {
	rr := &PerfRecordReader{p: p, off: p.DataStart, end: p.DataEnd}
	rr.mem, _ = p.r.(memReader)
	return rr
}

// Offset is the file offset of the next record.
func (rr *PerfRecordReader) Offset() int64 { return rr.off }

// fetch returns n bytes at off, which the caller checked lie before end.
func (rr *PerfRecordReader) fetch(off int64, n int) ([]byte, error) {
	if off >= rr.winOff && off+int64(n) <= rr.winOff+int64(len(rr.win)) {
		s := off - rr.winOff
		return rr.win[s : s+int64(n)], nil
	}
	if rr.mem != nil {
		if b := rr.mem.Bytes(); b != nil && off >= 0 && off+int64(n) <= int64(len(b)) {
			return b[off : off+int64(n) : off+int64(n)], nil
		}
	}
	want := int64(max(n, perfReadWindow))
	if want > rr.end-off {
		want = rr.end - off
	}
	if cap(rr.win) < int(want) {
		rr.win = make([]byte, want)
	}
	rr.win = rr.win[:want]
	m, err := rr.p.r.ReadAt(rr.win, off)
	if m < n {
		rr.win = rr.win[:0]
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, &PerfDataError{File: rr.p.Name, Where: "record", Offset: off, Msg: err.Error(), Err: err}
	}
	rr.win = rr.win[:m]
	rr.winOff = off
	return rr.win[:n], nil
}

// Next reads the next record into rec. It returns io.EOF after the last
// record, a *PerfDataError for a malformed record (wrapping
// ErrPerfDataTruncated for a record cut short at the end of a file whose
// data runs to its end: an unterminated file, or one fixed up after a
// write error). An AUXTRACE record cut short is returned with the trace
// bytes up to the cut first. After an error, Next keeps returning it.
func (rr *PerfRecordReader) Next(rec *PerfRecord) error {
	if rr.err != nil {
		return rr.err
	}
	if rr.after != nil {
		rr.err = rr.after
		return rr.err
	}
	rr.err = rr.next(rec)
	if rr.err == nil {
		return nil
	}
	if p := rr.p; p.CutShort && rr.err != io.EOF && !errors.Is(rr.err, ErrPerfDataTruncated) {
		// Not a file cut short after all, or not only: say what the
		// header claimed too.
		// The error stays a *PerfDataError at the record's offset.
		if pe, ok := rr.err.(*PerfDataError); ok {
			e := *pe
			e.Msg += fmt.Sprintf(" (read up to the end of the file because %s)", strings.TrimPrefix(p.cutErr.Error(), p.Name+": "))
			rr.err = &e
		}
	}
	return rr.err
}

func (rr *PerfRecordReader) fail(off int64, cause error, format string, args ...any) error {
	return &PerfDataError{File: rr.p.Name, Where: "record", Offset: off, Msg: fmt.Sprintf(format, args...), Err: cause}
}

func (rr *PerfRecordReader) next(rec *PerfRecord) error {
	off := rr.off
	if off >= rr.end {
		return io.EOF
	}
	// The file may be cut short where its data runs to the end of the
	// file: a header never fixed up (data size 0), or one a writer that
	// met a write error fixed up to what reached the file (nothing, not
	// even the feature sections, follows the data). A pipe-mode stream
	// always runs to the end of the file.
	var trunc error
	if rr.p.Unterminated || rr.end == rr.p.size {
		trunc = ErrPerfDataTruncated
	}
	if rr.end-off < 8 {
		if rr.p.Unterminated && allZero(rr, off) {
			// A writer may have extended the file without writing yet.
			return io.EOF
		}
		return rr.fail(off, trunc, "record header exceeds data end %#x", rr.end)
	}
	h, err := rr.fetch(off, 8)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	typ := PerfRecordType(le.Uint32(h))
	misc := le.Uint16(h[4:])
	size := le.Uint16(h[6:])
	if size < 8 {
		if rr.p.Unterminated && typ == 0 && size == 0 && allZero(rr, off) {
			return io.EOF
		}
		return rr.fail(off, nil, "%v size %d is smaller than a record header", typ, size)
	}
	if int64(size) > rr.end-off {
		return rr.fail(off, trunc, "%v size %#x exceeds data end %#x", typ, size, rr.end)
	}
	b, err := rr.fetch(off, int(size))
	if err != nil {
		return err
	}
	rr.buf = append(rr.buf[:0], b...)
	next := off + int64(size)

	*rec = PerfRecord{Offset: off, Type: typ, Misc: misc, Size: size, Raw: rr.buf[8:]}
	if typ == RecAuxtrace {
		if len(rec.Raw) < 40 {
			return rr.fail(off, nil, "AUXTRACE size %d is smaller than 48", size)
		}
		a := &rec.Auxtrace
		a.Size = le.Uint64(rec.Raw)
		a.Offset = le.Uint64(rec.Raw[8:])
		a.Reference = le.Uint64(rec.Raw[16:])
		a.Idx = le.Uint32(rec.Raw[24:])
		a.Tid = le.Uint32(rec.Raw[28:])
		a.CPU = le.Uint32(rec.Raw[32:])
		a.DataOffset = next
		if a.Size > uint64(rr.end-next) {
			err := rr.fail(off, trunc, "AUXTRACE size %#x exceeds data end %#x", a.Size, rr.end)
			if trunc == nil {
				return err
			}
			// Cut short: the trace bytes up to the cut are returned
			// (a decoder reads them up to there), the cut next.
			a.Size = uint64(rr.end - next)
			rr.after = err
		}
		next += int64(a.Size)
	} else if typ == RecHeaderTracingData {
		// struct perf_record_header_tracing_data: u32 size, u32 pad; the
		// tracing data follows, padded to 8 bytes, not counted in
		// header.size (perf's perf_event__process_tracing_data).
		if len(rec.Raw) < 8 {
			return rr.fail(off, nil, "HEADER_TRACING_DATA size %d is smaller than 16", size)
		}
		n := (uint64(le.Uint32(rec.Raw)) + 7) &^ 7
		if n > uint64(rr.end-next) {
			return rr.fail(off, trunc, "HEADER_TRACING_DATA size %#x exceeds data end %#x", n, rr.end)
		}
		next += int64(n)
	} else if typ == RecCompressed {
		return rr.fail(off, nil, "compressed perf.data (perf record -z) is not supported")
	} else if typ == RecHeaderAttr && !rr.p.Pipe {
		return rr.fail(off, nil, "HEADER_ATTR record in a file-mode perf.data is not supported")
	} else if rr.headersOnly {
		// Parsed by the caller.
	} else if err := rr.parse(rec); err != nil {
		return err
	}
	rr.off = next
	return nil
}

// allZero reports whether the rest of the data is zero bytes (a file
// extended but not yet written).
func allZero(rr *PerfRecordReader, off int64) bool {
	n := rr.end - off
	if n > perfReadWindow {
		return false
	}
	b, err := rr.fetch(off, int(n))
	if err != nil {
		return false
	}
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// trailerSize is the size of the sample_id trailer for sample_type st.
func trailerSize(st uint64) int {
	n := 0
	for _, bit := range []uint64{SampleTID, SampleTime, SampleID, SampleStreamID, SampleCPU, SampleIdentifier} {
		if st&bit != 0 {
			n += 8
		}
	}
	return n
}

// attrFor finds the attr of a record: the common one, or the one named by
// the identifier (first u64 of a sample, last u64 of a trailer).
func (rr *PerfRecordReader) attrFor(rec *PerfRecord) (*PerfAttr, error) {
	p := rr.p
	if p.common != nil {
		return p.common, nil
	}
	if len(rec.Raw) < 8 {
		return nil, rr.fail(rec.Offset, nil, "%v record too small for an identifier", rec.Type)
	}
	var id uint64
	if rec.Type == RecSample {
		id = binary.LittleEndian.Uint64(rec.Raw)
	} else {
		id = binary.LittleEndian.Uint64(rec.Raw[len(rec.Raw)-8:])
	}
	if id == 0 {
		// perf's synthesized records (the kernel map, threads present at
		// start) carry id 0; perf reads them with the first event.
		return &p.Attrs[0], nil
	}
	a := p.idAttr[id]
	if a == nil {
		return nil, rr.fail(rec.Offset, nil, "%v record names unknown event id %d", rec.Type, id)
	}
	return a, nil
}

// parseTrailer parses the sample_id trailer at the end of rec.Raw and
// returns the payload before it.
func (rr *PerfRecordReader) parseTrailer(rec *PerfRecord, a *PerfAttr) ([]byte, error) {
	if !a.SampleIDAll() {
		return rec.Raw, nil
	}
	st := a.SampleType
	n := trailerSize(st)
	if len(rec.Raw) < n {
		return nil, rr.fail(rec.Offset, nil, "%v size %d too small for its sample_id trailer (%d bytes)", rec.Type, rec.Size, n)
	}
	t := rec.Raw[len(rec.Raw)-n:]
	le := binary.LittleEndian
	id := &rec.ID
	id.Valid = st & (SampleTID | SampleTime | SampleID | SampleStreamID | SampleCPU | SampleIdentifier)
	o := 0
	if st&SampleTID != 0 {
		id.Pid, id.Tid = le.Uint32(t[o:]), le.Uint32(t[o+4:])
		o += 8
	}
	if st&SampleTime != 0 {
		id.Time = le.Uint64(t[o:])
		o += 8
	}
	if st&SampleID != 0 {
		id.ID = le.Uint64(t[o:])
		o += 8
	}
	if st&SampleStreamID != 0 {
		id.StreamID = le.Uint64(t[o:])
		o += 8
	}
	if st&SampleCPU != 0 {
		id.CPU = le.Uint32(t[o:])
		o += 8
	}
	if st&SampleIdentifier != 0 {
		id.ID = le.Uint64(t[o:])
	}
	return rec.Raw[:len(rec.Raw)-n], nil
}

// perfMinPayload is the fixed payload size of each kernel record type
// (before strings and the trailer).
var perfMinPayload = map[PerfRecordType]int{
	RecMmap: 32, RecMmap2: 64, RecComm: 8, RecExit: 24, RecFork: 24, RecLost: 16,
	RecAux: 24, RecItraceStart: 8, RecSwitch: 0, RecSwitchCPUWide: 8, RecLostSamples: 8,
	RecThrottle: 24, RecUnthrottle: 24,
}

func (rr *PerfRecordReader) parse(rec *PerfRecord) error {
	le := binary.LittleEndian
	if rec.Type == RecSample {
		return rr.parseSample(rec)
	}
	if rec.Type >= perfRecordUserBase {
		return rr.parseUser(rec)
	}
	a, err := rr.attrFor(rec)
	if err != nil {
		return err
	}
	rec.Attr = a
	pl, err := rr.parseTrailer(rec, a)
	if err != nil {
		return err
	}
	minSize, known := perfMinPayload[rec.Type]
	if !known {
		return nil // other kernel records: header, trailer and Raw only
	}
	if len(pl) < minSize {
		return rr.fail(rec.Offset, nil, "%v payload %d bytes, need %d", rec.Type, len(pl), minSize)
	}
	switch rec.Type {
	case RecMmap, RecMmap2:
		m := &rec.Mmap
		m.Pid, m.Tid = le.Uint32(pl), le.Uint32(pl[4:])
		m.Addr, m.Len, m.Pgoff = le.Uint64(pl[8:]), le.Uint64(pl[16:]), le.Uint64(pl[24:])
		name := pl[32:]
		if rec.Type == RecMmap2 {
			if rec.Misc&MiscMmapBuildID != 0 {
				n := int(pl[32])
				if n > perfMmapBuildIDMax {
					return rr.fail(rec.Offset, nil, "MMAP2 build id size %d exceeds %d", n, perfMmapBuildIDMax)
				}
				m.BuildID = pl[36 : 36+n]
			} else {
				m.Maj, m.Min = le.Uint32(pl[32:]), le.Uint32(pl[36:])
				m.Ino, m.InoGen = le.Uint64(pl[40:]), le.Uint64(pl[48:])
			}
			m.Prot, m.Flags = le.Uint32(pl[56:]), le.Uint32(pl[60:])
			name = pl[64:]
		}
		m.Filename = cString(name)
	case RecComm:
		rec.CommPid, rec.CommTid = le.Uint32(pl), le.Uint32(pl[4:])
		rec.Comm = cString(pl[8:])
	case RecExit, RecFork:
		t := &rec.Task
		t.Pid, t.PPid, t.Tid, t.PTid = le.Uint32(pl), le.Uint32(pl[4:]), le.Uint32(pl[8:]), le.Uint32(pl[12:])
		t.Time = le.Uint64(pl[16:])
	case RecLost:
		rec.LostID, rec.Lost = le.Uint64(pl), le.Uint64(pl[8:])
	case RecLostSamples:
		rec.Lost = le.Uint64(pl)
	case RecAux:
		rec.Aux = PerfAux{le.Uint64(pl), le.Uint64(pl[8:]), le.Uint64(pl[16:])}
	case RecItraceStart:
		rec.ItracePid, rec.ItraceTid = le.Uint32(pl), le.Uint32(pl[4:])
	case RecSwitchCPUWide:
		rec.SwitchPid, rec.SwitchTid = le.Uint32(pl), le.Uint32(pl[4:])
	}
	return nil
}

func (rr *PerfRecordReader) parseSample(rec *PerfRecord) error {
	a, err := rr.attrFor(rec)
	if err != nil {
		return err
	}
	rec.Attr = a
	st := a.SampleType
	b := rec.Raw
	le := binary.LittleEndian
	o := 0
	u64 := func() (uint64, bool) {
		if len(b)-o < 8 {
			return 0, false
		}
		v := le.Uint64(b[o:])
		o += 8
		return v, true
	}
	ok := true
	var v uint64
	id := &rec.ID
	for _, f := range []uint64{SampleIdentifier, SampleIP, SampleTID, SampleTime, SampleAddr, SampleID, SampleStreamID, SampleCPU, SamplePeriod} {
		if st&f == 0 || !ok {
			continue
		}
		if v, ok = u64(); !ok {
			break
		}
		switch f {
		case SampleIdentifier, SampleID:
			id.ID = v
		case SampleIP:
			rec.Sample.IP = v
		case SampleTID:
			id.Pid, id.Tid = uint32(v), uint32(v>>32)
		case SampleTime:
			id.Time = v
		case SampleAddr:
			rec.Sample.Addr = v
		case SampleStreamID:
			id.StreamID = v
		case SampleCPU:
			id.CPU = uint32(v)
		case SamplePeriod:
			rec.Sample.Period = v
		}
		id.Valid |= f
	}
	if !ok {
		return rr.fail(rec.Offset, nil, "SAMPLE size %d too small for its sample_type %#x", rec.Size, st)
	}
	return nil
}

func (rr *PerfRecordReader) parseUser(rec *PerfRecord) error {
	le := binary.LittleEndian
	pl := rec.Raw
	switch rec.Type {
	case RecTimeConv:
		if len(pl) < 24 {
			return rr.fail(rec.Offset, nil, "TIME_CONV payload %d bytes, need 24", len(pl))
		}
		tc := &rec.TimeConv
		tc.Shift, tc.Mult, tc.Zero = le.Uint64(pl), le.Uint64(pl[8:]), le.Uint64(pl[16:])
		if len(pl) >= 48 {
			tc.Cycles, tc.Mask = le.Uint64(pl[24:]), le.Uint64(pl[32:])
			tc.CapUserTimeZero = pl[40] != 0
			tc.CapUserTimeShort = pl[41] != 0
		} else {
			tc.CapUserTimeZero = true
		}
	case RecAuxtraceInfo:
		if len(pl) < 8 || len(pl)%8 != 0 {
			return rr.fail(rec.Offset, nil, "AUXTRACE_INFO payload %d bytes is not 8 + n*8", len(pl))
		}
		rec.AuxtraceInfo = &PerfAuxtraceInfo{}
		return rec.AuxtraceInfo.parse(pl, func(format string, args ...any) error {
			return rr.fail(rec.Offset, nil, format, args...)
		})
	}
	return nil
}
