package perf

// Assembling what the flow decoder needs from a perf.data: the Intel PT
// configuration (AUXTRACE_INFO), the time conversion, the PT byte stream of
// each AUXTRACE queue and the sideband records, all in time order.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// Auxtrace types (enum auxtrace_type).
const (
	AuxtraceIntelPT  = 1
	AuxtraceIntelBTS = 2
)

// Indices of the Intel PT private AUXTRACE_INFO fields (perf's
// intel-pt.h enum; the order is the file format).
const (
	ptPrivPMUType = iota
	ptPrivTimeShift
	ptPrivTimeMult
	ptPrivTimeZero
	ptPrivCapUserTimeZero
	ptPrivTSCBit
	ptPrivNoRetCompBit
	ptPrivHaveSchedSwitch
	ptPrivSnapshotMode
	ptPrivPerCPUMmaps
	ptPrivMTCBit
	ptPrivMTCFreqBits
	ptPrivTSCCTCN
	ptPrivTSCCTCD
	ptPrivCYCBit
	ptPrivMaxNonTurboRatio
	ptPrivFilterStrLen
	ptPrivMax
)

// ptPrivMin is the number of fields of the oldest Intel PT AUXTRACE_INFO
// (up to PER_CPU_MMAPS).
const ptPrivMin = ptPrivPerCPUMmaps + 1

// IntelPTInfo is the Intel PT private data of AUXTRACE_INFO. The *Bit
// fields are masks of the PT event's attr.config (e.g. TSCBit 0x400);
// HasXXX tells whether the older file had that field.
type IntelPTInfo struct {
	PMUType          uint32
	TimeShift        uint64
	TimeMult         uint64
	TimeZero         uint64
	CapUserTimeZero  bool
	TSCBit           uint64
	NoRetCompBit     uint64
	HaveSchedSwitch  uint64
	SnapshotMode     bool
	PerCPUMmaps      bool
	HasMTC           bool // the MTC..MAX_NONTURBO fields are present
	MTCBit           uint64
	MTCFreqBits      uint64
	TSCCTCN, TSCCTCD uint32
	CYCBit           uint64
	MaxNonTurboRatio uint32
	Filter           string
}

// PerfAuxtraceInfo is an AUXTRACE_INFO record: the auxtrace type and its
// private u64s, decoded for Intel PT.
type PerfAuxtraceInfo struct {
	Type    uint32
	Priv    []uint64
	IntelPT IntelPTInfo // valid when Type == AuxtraceIntelPT
}

func (ai *PerfAuxtraceInfo) parse(pl []byte, fail func(string, ...any) error) error {
	le := binary.LittleEndian
	ai.Type = le.Uint32(pl)
	n := (len(pl) - 8) / 8
	ai.Priv = make([]uint64, n)
	for i := range ai.Priv {
		ai.Priv[i] = le.Uint64(pl[8+8*i:])
	}
	if ai.Type != AuxtraceIntelPT {
		return nil
	}
	p := ai.Priv
	if len(p) < ptPrivMin {
		return fail("Intel PT AUXTRACE_INFO has %d private fields, need %d", len(p), ptPrivMin)
	}
	pt := &ai.IntelPT
	pt.PMUType = uint32(p[ptPrivPMUType])
	pt.TimeShift = p[ptPrivTimeShift]
	pt.TimeMult = p[ptPrivTimeMult]
	pt.TimeZero = p[ptPrivTimeZero]
	pt.CapUserTimeZero = p[ptPrivCapUserTimeZero] != 0
	pt.TSCBit = p[ptPrivTSCBit]
	pt.NoRetCompBit = p[ptPrivNoRetCompBit]
	pt.HaveSchedSwitch = p[ptPrivHaveSchedSwitch]
	pt.SnapshotMode = p[ptPrivSnapshotMode] != 0
	pt.PerCPUMmaps = p[ptPrivPerCPUMmaps] != 0
	if len(p) >= ptPrivMaxNonTurboRatio+1 {
		pt.HasMTC = true
		pt.MTCBit = p[ptPrivMTCBit]
		pt.MTCFreqBits = p[ptPrivMTCFreqBits]
		pt.TSCCTCN = uint32(p[ptPrivTSCCTCN])
		pt.TSCCTCD = uint32(p[ptPrivTSCCTCD])
		pt.CYCBit = p[ptPrivCYCBit]
		pt.MaxNonTurboRatio = uint32(p[ptPrivMaxNonTurboRatio])
	}
	if len(p) >= ptPrivMax {
		sl := p[ptPrivFilterStrLen]
		rest := pl[8+8*ptPrivMax:]
		if sl > uint64(len(rest)) {
			return fail("Intel PT filter string length %d exceeds AUXTRACE_INFO", sl)
		}
		pt.Filter = cString(rest[:sl])
	}
	return nil
}

// TimeConv returns the TSC conversion the Intel PT info carries.
func (pt *IntelPTInfo) TimeConv() PerfTimeConv {
	return PerfTimeConv{Shift: pt.TimeShift, Mult: pt.TimeMult, Zero: pt.TimeZero, CapUserTimeZero: pt.CapUserTimeZero}
}

// TSCToPerf converts a TSC value to perf time (ns), as the kernel's
// perf_event_mmap_page documents.
func (tc PerfTimeConv) TSCToPerf(tsc uint64) uint64 {
	if tc.Mult == 0 {
		return tsc
	}
	if tc.CapUserTimeShort {
		tsc = tc.Cycles + ((tsc - tc.Cycles) & tc.Mask)
	}
	quot := tsc >> tc.Shift
	rem := tsc & (1<<tc.Shift - 1)
	return tc.Zero + quot*tc.Mult + (rem*tc.Mult)>>tc.Shift
}

// PerfToTSC converts perf time back to a TSC value (the inverse of
// TSCToPerf up to rounding).
func (tc PerfTimeConv) PerfToTSC(ns uint64) uint64 {
	if tc.Mult == 0 {
		return ns
	}
	t := ns - tc.Zero
	quot := t / tc.Mult
	rem := t % tc.Mult
	return quot<<tc.Shift + (rem<<tc.Shift)/tc.Mult
}

// PerfAuxBuffer is one AUXTRACE record of a queue.
type PerfAuxBuffer struct {
	RecordOffset int64  // file offset of the AUXTRACE record
	DataOffset   int64  // file offset of its trace bytes
	Size         uint64 // trace bytes (including padding)
	AuxOffset    uint64 // offset in the AUX area ring
	Reference    uint64
	StreamPos    int  // where the bytes start in the queue's Data
	Gap          bool // AuxOffset does not continue the previous buffer: resync at a PSB
}

// PerfAuxQueue is the trace of one AUXTRACE queue: a thread (per-thread
// recording, CPU -1) or a CPU (per-cpu recording, Tid -1).
type PerfAuxQueue struct {
	Idx     uint32
	Tid     int32
	CPU     int32
	Buffers []PerfAuxBuffer
	// Data is the concatenation of the buffers' bytes in file order.
	// Buffers written by ptjit (and by perf in full-trace mode) are
	// contiguous and end at packet boundaries; after a buffer marked Gap a
	// decoder must resync at the next PSB.
	Data []byte
}

// PerfTrace is what a decoder needs from a perf.data: the PT configuration
// and event, the time conversion, the PT streams per queue and the
// sideband in time order.
type PerfTrace struct {
	Info        *PerfAuxtraceInfo // nil when the file has no AUXTRACE_INFO
	PTAttr      *PerfAttr         // the event whose type is the PT PMU, or nil
	TimeConv    PerfTimeConv      // TIME_CONV record, else from AUXTRACE_INFO
	HasTimeConv bool              // a TIME_CONV record was present
	Queues      []*PerfAuxQueue   // by Idx order
	// Sideband holds the MMAP, MMAP2, COMM, FORK, EXIT, ITRACE_START,
	// SWITCH, SWITCH_CPU_WIDE, AUX and LOST records, stably sorted by their
	// sample time (file order when the events carry no time). Raw and
	// BuildID are copies owned by the PerfTrace.
	Sideband []PerfRecord
	// Truncated is set when a file cut short (see PerfRecordReader.Next)
	// ended inside a record; everything before it was loaded, and the
	// trace bytes of a cut AUXTRACE buffer up to the cut.
	Truncated bool
}

// Queue returns the queue with index idx, or nil.
func (t *PerfTrace) Queue(idx uint32) *PerfAuxQueue {
	for _, q := range t.Queues {
		if q.Idx == idx {
			return q
		}
	}
	return nil
}

// TSCEnabled reports whether the PT packets carry TSC (the PT event's
// config has the TSC bit the AUXTRACE_INFO names).
func (t *PerfTrace) TSCEnabled() bool {
	return t.Info != nil && t.PTAttr != nil && t.Info.IntelPT.TSCBit != 0 && t.PTAttr.Config&t.Info.IntelPT.TSCBit != 0
}

// maxQueues bounds the number of AUXTRACE queues (perf uses one per CPU or
// thread).
const maxQueues = 1 << 16

// LoadPerfTrace reads all records of p and assembles a PerfTrace.
func LoadPerfTrace(p *PerfData) (*PerfTrace, error) { return loadPerfTrace(p, true) }

// LoadPerfTraceLazy is LoadPerfTrace without reading the trace bytes: the
// queues' Data stay nil and their bytes are read on demand through
// PerfAuxQueue.Reader, so a decoder's memory does not grow with the trace.
func LoadPerfTraceLazy(p *PerfData) (*PerfTrace, error) { return loadPerfTrace(p, false) }

func loadPerfTrace(p *PerfData, withData bool) (*PerfTrace, error) {
	t := &PerfTrace{Truncated: p.CutShort}
	rr := p.Records()
	var rec PerfRecord
	byIdx := make(map[uint32]*PerfAuxQueue)
	for {
		err := rr.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, ErrPerfDataTruncated) {
				t.Truncated = true
				break
			}
			return nil, err
		}
		switch rec.Type {
		case RecAuxtraceInfo:
			if t.Info != nil {
				return nil, rr.fail(rec.Offset, nil, "second AUXTRACE_INFO record")
			}
			t.Info = rec.AuxtraceInfo
		case RecTimeConv:
			t.TimeConv = rec.TimeConv
			t.HasTimeConv = true
		case RecAuxtrace:
			a := rec.Auxtrace
			q := byIdx[a.Idx]
			if q == nil {
				if len(byIdx) >= maxQueues {
					return nil, rr.fail(rec.Offset, nil, "more than %d AUXTRACE queues", maxQueues)
				}
				q = &PerfAuxQueue{Idx: a.Idx, Tid: int32(a.Tid), CPU: int32(a.CPU)}
				byIdx[a.Idx] = q
				t.Queues = append(t.Queues, q)
			}
			// The bytes are read once all buffers are known, into a
			// Data of the exact size. a.Size was checked against the
			// data end by Next, so the sum is bounded by the file size.
			b := PerfAuxBuffer{RecordOffset: rec.Offset, DataOffset: a.DataOffset, Size: a.Size,
				AuxOffset: a.Offset, Reference: a.Reference}
			if n := len(q.Buffers); n > 0 {
				prev := q.Buffers[n-1]
				b.StreamPos = prev.StreamPos + int(prev.Size)
				b.Gap = prev.AuxOffset+prev.Size != a.Offset
			}
			q.Buffers = append(q.Buffers, b)
		case RecMmap, RecMmap2, RecComm, RecFork, RecExit, RecItraceStart, RecSwitch,
			RecSwitchCPUWide, RecAux, RecLost:
			c := rec
			c.Raw = append([]byte(nil), rec.Raw...)
			if rec.Mmap.BuildID != nil {
				c.Mmap.BuildID = append([]byte(nil), rec.Mmap.BuildID...)
			}
			t.Sideband = append(t.Sideband, c)
		}
	}
	for _, q := range t.Queues {
		if len(q.Buffers) == 0 || !withData {
			continue
		}
		last := q.Buffers[len(q.Buffers)-1]
		q.Data = make([]byte, last.StreamPos+int(last.Size))
		for _, b := range q.Buffers {
			if _, err := p.r.ReadAt(q.Data[b.StreamPos:b.StreamPos+int(b.Size)], b.DataOffset); err != nil && !(err == io.EOF && b.Size == 0) {
				return nil, rr.fail(b.RecordOffset, err, "reading AUXTRACE data: %v", err)
			}
		}
	}
	if t.Info != nil && t.Info.Type == AuxtraceIntelPT {
		for i := range p.Attrs {
			if p.Attrs[i].Type == t.Info.IntelPT.PMUType {
				t.PTAttr = &p.Attrs[i]
				break
			}
		}
		if !t.HasTimeConv {
			t.TimeConv = t.Info.IntelPT.TimeConv()
		}
	}
	sort.Slice(t.Queues, func(i, j int) bool { return t.Queues[i].Idx < t.Queues[j].Idx })
	sortByTime(t.Sideband)
	return t, nil
}

// sortByTime sorts records stably by their sample time. A per-CPU
// recording has thousands of switch records and a PerfRecord is large:
// records already in order (the usual case) are left as they are, and
// others are sorted through their indices, each moved once.
func sortByTime(recs []PerfRecord) {
	if sort.SliceIsSorted(recs, func(i, j int) bool { return recs[i].ID.Time < recs[j].ID.Time }) {
		return
	}
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return recs[idx[i]].ID.Time < recs[idx[j]].ID.Time })
	sorted := make([]PerfRecord, len(recs))
	for i, k := range idx {
		sorted[i] = recs[k]
	}
	copy(recs, sorted)
}

// Size returns the number of trace bytes in the queue.
func (q *PerfAuxQueue) Size() int64 {
	if len(q.Buffers) == 0 {
		return 0
	}
	last := q.Buffers[len(q.Buffers)-1]
	return int64(last.StreamPos) + int64(last.Size)
}

// Reader returns the queue's trace bytes: from Data when it was loaded,
// else read from p buffer by buffer.
func (q *PerfAuxQueue) Reader(p *PerfData) *QueueReader {
	return &QueueReader{q: q, p: p}
}

// QueueReader reads the trace stream of one AUX queue (an io.ReaderAt with
// its Size, what the decoder's windows read).
type QueueReader struct {
	q *PerfAuxQueue
	p *PerfData
}

// Size returns the length of the queue's stream.
func (r *QueueReader) Size() int64 { return r.q.Size() }

// ReadAt reads stream bytes [off, off+len(b)) from the buffers that hold
// them.
func (r *QueueReader) ReadAt(b []byte, off int64) (int, error) {
	if r.q.Data != nil {
		if off >= int64(len(r.q.Data)) {
			return 0, io.EOF
		}
		n := copy(b, r.q.Data[off:])
		if n < len(b) {
			return n, io.EOF
		}
		return n, nil
	}
	bufs := r.q.Buffers
	i := sort.Search(len(bufs), func(i int) bool { return int64(bufs[i].StreamPos)+int64(bufs[i].Size) > off })
	n := 0
	for ; i < len(bufs) && n < len(b); i++ {
		bf := bufs[i]
		in := off + int64(n) - int64(bf.StreamPos)
		m := int(min(int64(len(b)-n), int64(bf.Size)-in))
		if _, err := r.p.r.ReadAt(b[n:n+m], bf.DataOffset+in); err != nil {
			return n, fmt.Errorf("%s: AUXTRACE data at %#x: %w", r.p.Name, bf.DataOffset+in, err)
		}
		n += m
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// String describes a queue for messages.
func (q *PerfAuxQueue) String() string {
	switch {
	case q.CPU >= 0 && q.Tid == -1:
		return fmt.Sprintf("queue %d (cpu %d)", q.Idx, q.CPU)
	case q.CPU >= 0:
		return fmt.Sprintf("queue %d (cpu %d, tid %d)", q.Idx, q.CPU, q.Tid)
	}
	return fmt.Sprintf("queue %d (tid %d)", q.Idx, q.Tid)
}

// ErrNoPTTrace is matched (errors.Is) by the error of CheckIntelPT: the
// perf.data holds no Intel PT trace.
var ErrNoPTTrace = errors.New("no Intel PT trace")

// NoPTTraceError is a perf.data without an Intel PT trace: no Intel PT
// AUXTRACE_INFO record (a recording of other events), or no AUXTRACE data.
type NoPTTraceError struct {
	File   string
	Events []string // the recorded events, as perf names them (EventName)
	Reason string   // why, when the file has an AUXTRACE_INFO
}

func (e *NoPTTraceError) Error() string {
	s := fmt.Sprintf("no Intel PT trace in %s (events: %s)", e.File, strings.Join(e.Events, ", "))
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

func (e *NoPTTraceError) Is(target error) bool { return target == ErrNoPTTrace }

// CheckIntelPT reports, as a *NoPTTraceError, a trace loaded from p that
// has nothing for a PT decoder: no AUXTRACE_INFO (perf record without
// -e intel_pt//), one of another auxtrace type (Intel BTS, Arm CoreSight,
// ...), or no AUXTRACE record. LoadPerfTrace itself accepts such files,
// whose sideband may still be of use.
func (t *PerfTrace) CheckIntelPT(p *PerfData) error {
	reason := ""
	switch {
	case t.Info == nil:
	case t.Info.Type != AuxtraceIntelPT:
		reason = fmt.Sprintf("its AUXTRACE_INFO is of auxtrace type %d, not Intel PT (%d)", t.Info.Type, AuxtraceIntelPT)
	case len(t.Queues) == 0:
		reason = "no AUXTRACE records"
	default:
		return nil
	}
	ev := make([]string, len(p.Attrs))
	for i := range p.Attrs {
		ev[i] = p.EventName(i)
		if t.Info != nil && t.Info.Type == AuxtraceIntelPT && p.Attrs[i].Type == t.Info.IntelPT.PMUType && !strings.Contains(ev[i], "intel_pt") {
			ev[i] = "intel_pt//" // perf's name for the PT event without an event-desc
		}
	}
	return &NoPTTraceError{File: p.Name, Events: ev, Reason: reason}
}
