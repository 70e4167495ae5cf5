package perf

// perf.data writing. PerfDataWriter streams an Intel PT recording in the
// layout perf 6.1 reads (see docs/perf-intel-pt.md):
//
//	0x000 header (104 bytes), data size 0 until Close
//	0x068 one attr (128 bytes) + its ids section (16 bytes)
//	0x0f8 the ids (one u64)
//	0x100 records: AUXTRACE_INFO, TIME_CONV, then whatever the caller
//	      appends (COMM, MMAP2, ITRACE_START, AUXTRACE + data, EXIT, ...)
//	...   at Close: FINISHED_ROUND, the feature sections, and the header
//	      rewritten with the final data size and feature bits.
//
// Records are buffered. Flush pushes them to the file and rewrites the
// header's data size to cover them, so a writer that dies later leaves a
// file both perf and PerfData read up to the last Flush. A writer that dies
// before its first Flush leaves a data size of 0, which perf 6.1 refuses
// ("data size field is 0") and PerfData reads as "records up to the end of
// the file", stopping cleanly at a record cut short (ErrPerfDataTruncated).

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"

	"golang.org/x/sys/unix"
)

// Intel PT attr.config bits (the intel_pt PMU's format directory).
const (
	PTConfigPT        = 1 << 0
	PTConfigCYC       = 1 << 1
	PTConfigMTC       = 1 << 9
	PTConfigTSC       = 1 << 10
	PTConfigNoRetComp = 1 << 11
	PTConfigBranch    = 1 << 13
	PTConfigMTCShift  = 14 // mtc_period, 4 bits
	PTConfigMTCMask   = 0xf << PTConfigMTCShift
)

// DefaultPTPMUType is the PMU type ptjit writes when the config names none:
// any number no real PMU uses (perf matches the attr type against the
// AUXTRACE_INFO PMU type).
const DefaultPTPMUType = 10

// perfDataStart is where the records of a per-thread recording begin (one
// attr, one id).
const perfDataStart = perfHeaderSize + perfAttrSize + 16 + 8

// Software event attrs of the dummy events perf adds to an intel_pt
// recording (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_DUMMY), and the attr flag
// bits they use (struct perf_event_attr's bit field, from bit 0).
const (
	perfTypeSoftware = 1
	perfCountSWDummy = 9

	attrFlagInherit       = 1 << 1
	attrFlagExcludeKernel = 1 << 5
	attrFlagExcludeHV     = 1 << 6
	attrFlagMmap          = 1 << 8
	attrFlagComm          = 1 << 9
	attrFlagEnableOnExec  = 1 << 12
	attrFlagTask          = 1 << 13
	attrFlagCommExec      = 1 << 24
)

// The events of a per-cpu recording, in attr order: what perf record -e
// intel_pt//u -- PROGRAM opens (see perf-percpu-layout.md in the notes).
const (
	evPT     = iota // intel_pt//u: the AUX area; ITRACE_START and AUX records
	evSwitch        // dummy:u with context_switch=1: SWITCH_CPU_WIDE records
	evTrack         // dummy:u with mmap/mmap2/comm/comm_exec/task: MMAP2, COMM, FORK, EXIT
	nEvents
)

// PerfDataConfig describes the Intel PT recording a PerfDataWriter writes.
type PerfDataConfig struct {
	// PerCPU selects a per-cpu recording, as perf record -e intel_pt//u
	// -- PROGRAM writes it: one AUXTRACE queue per CPU (AuxTrace's tid is
	// written as given: perf writes the workload's pid), three events
	// (intel_pt, a dummy with context_switch=1 whose SWITCH_CPU_WIDE
	// records say which thread runs, a dummy with the mmap, comm and task
	// records), each with one id per CPU (NrCPUs of them), and
	// AUXTRACE_INFO's have_sched_switch 3 and per_cpu_mmaps 1. Otherwise
	// the recording is per-thread: one event, one queue per thread, cpu -1.
	PerCPU bool
	// PMUType is the attr type and AUXTRACE_INFO PMU type
	// (DefaultPTPMUType when 0).
	PMUType uint32
	// EventID is the event id in the ids section and in every sample_id
	// (1 when 0). A per-cpu recording numbers its ids from it: event e on
	// CPU c has id EventID + e*NrCPUs + c.
	EventID uint64
	// Time converts TSC to perf time. A zero Mult means the identity
	// (shift 0, mult 1, zero 0): perf time equals TSC.
	Time PerfTimeConv
	// Packet generation, as recorded in the attr config and AUXTRACE_INFO.
	MTC       bool
	MTCPeriod uint8 // 0..15
	CYC       bool
	NoRetComp bool
	// TSCCTCN/TSCCTCD is the TSC to core crystal clock ratio (CPUID 0x15).
	TSCCTCN, TSCCTCD uint32
	MaxNonTurboRatio uint32
	// Filter is the address filter string (may be empty).
	Filter string
	// Cmdline, when set, is written as the cmdline feature.
	Cmdline []string
	// NrCPUs is written as the nrcpus feature (runtime.NumCPU() when 0,
	// raised above the highest CPU the records name). perf sizes its
	// per-cpu tables with it and crashes on a CPU beyond it.
	NrCPUs int
}

// PerfDataWriter writes an Intel PT perf.data. Its methods must be called
// from one goroutine. The first error sticks: later calls do nothing and
// Close returns it.
type PerfDataWriter struct {
	path string
	f    *os.File
	bw   *bufio.Writer
	off  int64 // file offset of the next byte written to bw
	err  error

	cfg       PerfDataConfig
	dataStart int64  // file offset of the first record
	nrCPUs    uint32 // per-cpu: ids per event
	sampleTy  uint64
	cpu       uint32 // CPU for sample_id trailers (SetCPU)
	maxCPU    uint32
	queues    map[int32]*perfWQueue
	nqueue    uint32
	buffers   uint64
	lastTSC   uint64 // latest TSC passed to any method
	auxIndex  []PerfAuxIndexEntry
	closed    bool
	onErr     func(error) // SetOnError
}

// SetOnError makes the writer call fn once, at its first error, so that a
// failed write (disk full, I/O error) is reported when it happens rather
// than at Close.
func (w *PerfDataWriter) SetOnError(fn func(error)) { w.onErr = fn }

// pathErr names the file in err, once.
func (w *PerfDataWriter) pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%s: %w", w.path, err)
}

// fail records the writer's first error.
func (w *PerfDataWriter) fail(err error) {
	if w.err != nil {
		return
	}
	w.err = err
	if w.onErr != nil {
		w.onErr(err)
	}
}

type perfWQueue struct {
	idx    uint32
	auxOff uint64
}

// perfSampleType is what the writer's event samples: IP|TID|TIME|CPU|
// IDENTIFIER (perf's Intel PT decoder needs TIME and sample_id_all).
const perfSampleType = SampleIP | SampleTID | SampleTime | SampleCPU | SampleIdentifier

// CreatePerfData creates (truncating) path and writes the header, the attr
// and the AUXTRACE_INFO and TIME_CONV records.
func CreatePerfData(path string, cfg PerfDataConfig) (*PerfDataWriter, error) {
	if cfg.PMUType == 0 {
		cfg.PMUType = DefaultPTPMUType
	}
	if cfg.EventID == 0 {
		cfg.EventID = 1
	}
	if cfg.Time.Mult == 0 {
		cfg.Time = PerfTimeConv{Shift: 0, Mult: 1, Zero: 0}
	}
	cfg.Time.CapUserTimeZero = true
	if cfg.MTCPeriod > 15 {
		return nil, fmt.Errorf("perf.data writer: MTC period %d out of range 0..15", cfg.MTCPeriod)
	}
	if cfg.Time.Shift > 63 {
		return nil, fmt.Errorf("perf.data writer: time shift %d out of range", cfg.Time.Shift)
	}
	if cfg.NrCPUs <= 0 {
		cfg.NrCPUs = runtime.NumCPU()
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	w := &PerfDataWriter{path: path, f: f, bw: bufio.NewWriterSize(f, 256<<10), cfg: cfg,
		sampleTy: perfSampleType, queues: make(map[int32]*perfWQueue), dataStart: perfDataStart}
	if cfg.PerCPU {
		w.nrCPUs = uint32(cfg.NrCPUs)
		w.dataStart = perfHeaderSize + nEvents*(perfAttrSize+16) + 8*nEvents*int64(w.nrCPUs)
	}
	w.writeHeader(0, [4]uint64{}, perfHeaderSize)
	if cfg.PerCPU {
		w.writeAttrsPerCPU()
	} else {
		w.writeAttr()
	}
	w.auxtraceInfo()
	w.timeConv()
	if w.err != nil {
		f.Close()
		os.Remove(path)
		return nil, w.err
	}
	return w, nil
}

func (w *PerfDataWriter) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.fail(w.pathErr(err))
		return
	}
	w.off += int64(len(b))
}

// writeHeader writes the file header at the current position (offset 0).
func (w *PerfDataWriter) writeHeader(dataSize uint64, feats [4]uint64, attrsOff uint64) {
	n := uint64(1)
	if w.cfg.PerCPU {
		n = nEvents
	}
	w.write(encodePerfHeader(perfAttrSize+16, PerfSection{attrsOff, n * (perfAttrSize + 16)},
		PerfSection{uint64(w.dataStart), dataSize}, feats))
}

// encodePerfHeader encodes struct perf_file_header.
func encodePerfHeader(attrSize uint64, attrs, data PerfSection, feats [4]uint64) []byte {
	h := make([]byte, perfHeaderSize)
	le := binary.LittleEndian
	le.PutUint64(h[0:], perfMagic)
	le.PutUint64(h[8:], perfHeaderSize)
	le.PutUint64(h[16:], attrSize)
	le.PutUint64(h[24:], attrs.Offset)
	le.PutUint64(h[32:], attrs.Size)
	le.PutUint64(h[40:], data.Offset)
	le.PutUint64(h[48:], data.Size)
	for i, x := range feats {
		le.PutUint64(h[72+8*i:], x)
	}
	return h
}

// PTConfig is the attr.config the writer records.
func (cfg *PerfDataConfig) PTConfig() uint64 {
	c := uint64(PTConfigPT | PTConfigBranch | PTConfigTSC)
	if cfg.NoRetComp {
		c |= PTConfigNoRetComp
	}
	if cfg.MTC {
		c |= PTConfigMTC | uint64(cfg.MTCPeriod)<<PTConfigMTCShift
	}
	if cfg.CYC {
		c |= PTConfigCYC
	}
	return c
}

func (w *PerfDataWriter) writeAttr() {
	var a [perfAttrSize + 16 + 8]byte
	le := binary.LittleEndian
	le.PutUint32(a[0:], w.cfg.PMUType)
	le.PutUint32(a[4:], perfAttrSize)
	le.PutUint64(a[8:], w.cfg.PTConfig())
	le.PutUint64(a[16:], 1) // sample_period
	le.PutUint64(a[24:], w.sampleTy)
	le.PutUint64(a[40:], AttrFlagDisabled|AttrFlagSampleIDAll|AttrFlagMmap2|1<<5 /* exclude_kernel */ |1<<6 /* exclude_hv */)
	// ids section
	le.PutUint64(a[perfAttrSize:], perfHeaderSize+perfAttrSize+16)
	le.PutUint64(a[perfAttrSize+8:], 8)
	le.PutUint64(a[perfAttrSize+16:], w.cfg.EventID)
	w.write(a[:])
}

// writeAttrsPerCPU writes the three events of a per-cpu recording (see
// PerCPU), their ids sections, then the ids: NrCPUs per event.
func (w *PerfDataWriter) writeAttrsPerCPU() {
	le := binary.LittleEndian
	idsOff := uint64(perfHeaderSize + nEvents*(perfAttrSize+16))
	for e := range nEvents {
		var a [perfAttrSize + 16]byte
		typ, config := uint32(perfTypeSoftware), uint64(perfCountSWDummy)
		flags := uint64(AttrFlagSampleIDAll | attrFlagExcludeKernel | attrFlagExcludeHV)
		switch e {
		case evPT:
			typ, config = w.cfg.PMUType, w.cfg.PTConfig()
			flags |= AttrFlagDisabled | attrFlagInherit | attrFlagEnableOnExec
		case evSwitch:
			flags |= AttrFlagContextSw
		case evTrack:
			flags |= AttrFlagDisabled | attrFlagInherit | attrFlagEnableOnExec |
				attrFlagMmap | attrFlagComm | attrFlagTask | AttrFlagMmap2 | attrFlagCommExec
		}
		le.PutUint32(a[0:], typ)
		le.PutUint32(a[4:], perfAttrSize)
		le.PutUint64(a[8:], config)
		le.PutUint64(a[16:], 1) // sample_period
		le.PutUint64(a[24:], w.sampleTy)
		le.PutUint64(a[40:], flags)
		le.PutUint64(a[perfAttrSize:], idsOff+uint64(8*e)*uint64(w.nrCPUs))
		le.PutUint64(a[perfAttrSize+8:], 8*uint64(w.nrCPUs))
		w.write(a[:])
	}
	for e := range nEvents {
		for c := range w.nrCPUs {
			w.write(le.AppendUint64(nil, w.eventID(e, c)))
		}
	}
}

// eventID is the id of event e on cpu in a per-cpu recording.
func (w *PerfDataWriter) eventID(e int, cpu uint32) uint64 {
	return w.cfg.EventID + uint64(e)*uint64(w.nrCPUs) + uint64(cpu)
}

func (w *PerfDataWriter) auxtraceInfo() {
	cfg := &w.cfg
	priv := make([]uint64, ptPrivMax)
	priv[ptPrivPMUType] = uint64(cfg.PMUType)
	priv[ptPrivTimeShift] = cfg.Time.Shift
	priv[ptPrivTimeMult] = cfg.Time.Mult
	priv[ptPrivTimeZero] = cfg.Time.Zero
	priv[ptPrivCapUserTimeZero] = 1
	priv[ptPrivTSCBit] = PTConfigTSC
	priv[ptPrivNoRetCompBit] = PTConfigNoRetComp
	priv[ptPrivSnapshotMode] = 0
	if cfg.PerCPU {
		// 3: context-switch records from a CPU-wide dummy event (what
		// perf record chooses when it can record CPU-wide).
		priv[ptPrivHaveSchedSwitch] = 3
		priv[ptPrivPerCPUMmaps] = 1
	}
	priv[ptPrivMTCBit] = PTConfigMTC
	priv[ptPrivMTCFreqBits] = PTConfigMTCMask
	priv[ptPrivTSCCTCN] = uint64(cfg.TSCCTCN)
	priv[ptPrivTSCCTCD] = uint64(cfg.TSCCTCD)
	priv[ptPrivCYCBit] = PTConfigCYC
	priv[ptPrivMaxNonTurboRatio] = uint64(cfg.MaxNonTurboRatio)
	filter := []byte(cfg.Filter)
	if len(filter) > 0 {
		filter = append(filter, 0)
		priv[ptPrivFilterStrLen] = uint64(len(filter))
		for len(filter)%8 != 0 {
			filter = append(filter, 0)
		}
	}
	pl := make([]byte, 8+8*len(priv)+len(filter))
	le := binary.LittleEndian
	le.PutUint32(pl, AuxtraceIntelPT)
	for i, v := range priv {
		le.PutUint64(pl[8+8*i:], v)
	}
	copy(pl[8+8*len(priv):], filter)
	w.record(RecAuxtraceInfo, 0, pl, nil)
}

func (w *PerfDataWriter) timeConv() {
	tc := w.cfg.Time
	var pl [48]byte
	le := binary.LittleEndian
	le.PutUint64(pl[0:], tc.Shift)
	le.PutUint64(pl[8:], tc.Mult)
	le.PutUint64(pl[16:], tc.Zero)
	le.PutUint64(pl[24:], tc.Cycles)
	le.PutUint64(pl[32:], tc.Mask)
	pl[40] = 1 // cap_user_time_zero
	if tc.CapUserTimeShort {
		pl[41] = 1
	}
	w.record(RecTimeConv, 0, pl[:], nil)
}

// record writes one record: header, payload and, when sid is non-nil, the
// sample_id trailer.
func (w *PerfDataWriter) record(typ PerfRecordType, misc uint16, pl []byte, sid *PerfSampleID) {
	n := 8 + len(pl)
	if sid != nil {
		n += trailerSize(w.sampleTy)
	}
	if n > perfMaxRecordSize {
		w.fail(fmt.Errorf("%s: %v record of %d bytes exceeds the 64 KiB record limit", w.path, typ, n))
		return
	}
	var h [8]byte
	le := binary.LittleEndian
	le.PutUint32(h[0:], uint32(typ))
	le.PutUint16(h[4:], misc)
	le.PutUint16(h[6:], uint16(n))
	w.write(h[:])
	w.write(pl)
	if sid != nil {
		w.write(encodeSampleID(w.sampleTy, sid))
	}
}

// encodeSampleID encodes the sample_id trailer for sample type st.
func encodeSampleID(st uint64, sid *PerfSampleID) []byte {
	b := make([]byte, 0, 48)
	le := binary.LittleEndian
	if st&SampleTID != 0 {
		b = le.AppendUint32(b, sid.Pid)
		b = le.AppendUint32(b, sid.Tid)
	}
	if st&SampleTime != 0 {
		b = le.AppendUint64(b, sid.Time)
	}
	if st&SampleID != 0 {
		b = le.AppendUint64(b, sid.ID)
	}
	if st&SampleStreamID != 0 {
		b = le.AppendUint64(b, sid.StreamID)
	}
	if st&SampleCPU != 0 {
		b = le.AppendUint32(b, sid.CPU)
		b = le.AppendUint32(b, 0)
	}
	if st&SampleIdentifier != 0 {
		b = le.AppendUint64(b, sid.ID)
	}
	return b
}

// sid is the sample_id of a record that event ev (evPT, evSwitch,
// evTrack: a per-thread recording has the one event) writes on the
// current CPU.
func (w *PerfDataWriter) sid(ev, pid, tid int, tsc uint64) *PerfSampleID {
	w.lastTSC = max(w.lastTSC, tsc)
	id := w.cfg.EventID
	if w.cfg.PerCPU {
		id = w.eventID(ev, min(w.cpu, w.nrCPUs-1))
	}
	return &PerfSampleID{Pid: uint32(pid), Tid: uint32(tid), Time: w.cfg.Time.TSCToPerf(tsc), CPU: w.cpu, ID: id}
}

// nulPad appends s, a NUL and zero padding to a multiple of 8 bytes.
func nulPad(b []byte, s string) []byte {
	b = append(b, s...)
	b = append(b, 0)
	for len(b)%8 != 0 {
		b = append(b, 0)
	}
	return b
}

// SetCPU sets the CPU recorded in the sample_id of the sideband records
// that follow (0 by default). A per-cpu recording sets it before each
// record; ITRACE_START and SWITCH tell perf which thread runs on that CPU.
func (w *PerfDataWriter) SetCPU(cpu int) {
	w.cpu = uint32(cpu)
	w.maxCPU = max(w.maxCPU, w.cpu)
}

// Comm writes a COMM record: thread tid of process pid is named name (exec:
// the name changed because of an execve). tsc is converted to perf time.
func (w *PerfDataWriter) Comm(pid, tid int, name string, exec bool, tsc uint64) {
	le := binary.LittleEndian
	pl := le.AppendUint32(nil, uint32(pid))
	pl = le.AppendUint32(pl, uint32(tid))
	pl = nulPad(pl, name)
	var misc uint16
	if exec {
		misc = MiscCommExec
	}
	w.record(RecComm, misc|MiscCPUModeUser, pl, w.sid(evTrack, pid, tid, tsc))
}

// PerfMmapFile fills the device and inode fields of m from the file it
// names (perf reads the code from that file when it decodes, and checks
// nothing else).
func PerfMmapFile(m *PerfMmap) error {
	var st unix.Stat_t
	if err := unix.Stat(m.Filename, &st); err != nil {
		return fmt.Errorf("stat %s: %w", m.Filename, err)
	}
	m.Maj, m.Min = unix.Major(st.Dev), unix.Minor(st.Dev)
	m.Ino = st.Ino
	return nil
}

// Mmap2 writes an MMAP2 record (dev/inode form; a non-empty m.BuildID
// selects the build-id form).
func (w *PerfDataWriter) Mmap2(m *PerfMmap, tsc uint64) {
	w.record(RecMmap2, mmap2Misc(m), encodeMmap2(m), w.sid(evTrack, int(m.Pid), int(m.Tid), tsc))
}

func mmap2Misc(m *PerfMmap) uint16 {
	misc := uint16(MiscCPUModeUser)
	if len(m.BuildID) > 0 {
		misc |= MiscMmapBuildID
	}
	return misc
}

func encodeMmap2(m *PerfMmap) []byte {
	le := binary.LittleEndian
	pl := le.AppendUint32(nil, m.Pid)
	pl = le.AppendUint32(pl, m.Tid)
	pl = le.AppendUint64(pl, m.Addr)
	pl = le.AppendUint64(pl, m.Len)
	pl = le.AppendUint64(pl, m.Pgoff)
	if len(m.BuildID) > 0 {
		var u [24]byte
		n := copy(u[4:], m.BuildID)
		u[0] = byte(n)
		pl = append(pl, u[:]...)
	} else {
		pl = le.AppendUint32(pl, m.Maj)
		pl = le.AppendUint32(pl, m.Min)
		pl = le.AppendUint64(pl, m.Ino)
		pl = le.AppendUint64(pl, m.InoGen)
	}
	pl = le.AppendUint32(pl, m.Prot)
	pl = le.AppendUint32(pl, m.Flags)
	return nulPad(pl, m.Filename)
}

// ItraceStart writes an ITRACE_START record: tracing of thread tid began
// (on the CPU set with SetCPU).
func (w *PerfDataWriter) ItraceStart(pid, tid int, tsc uint64) {
	le := binary.LittleEndian
	pl := le.AppendUint32(nil, uint32(pid))
	pl = le.AppendUint32(pl, uint32(tid))
	w.record(RecItraceStart, 0, pl, w.sid(evPT, pid, tid, tsc))
}

// Lost writes a LOST record on the CPU set with SetCPU: lost records of
// the event id were dropped (the kernel's ring buffer was full). pid/tid
// go in its sample_id, as the kernel writes the reading task's.
func (w *PerfDataWriter) Lost(pid, tid int, lost, tsc uint64) {
	sid := w.sid(evSwitch, pid, tid, tsc)
	le := binary.LittleEndian
	pl := le.AppendUint64(nil, sid.ID)
	pl = le.AppendUint64(pl, lost)
	w.record(RecLost, 0, pl, sid)
}

// Aux writes an AUX record of the PT event on the CPU set with SetCPU:
// the bytes [offset, offset+size) of the AUX area landed, with flags
// (AuxFlagTruncated: the area was full and the trace after them was
// lost).
func (w *PerfDataWriter) Aux(pid, tid int, offset, size, flags, tsc uint64) {
	le := binary.LittleEndian
	pl := le.AppendUint64(nil, offset)
	pl = le.AppendUint64(pl, size)
	pl = le.AppendUint64(pl, flags)
	w.record(RecAux, 0, pl, w.sid(evPT, pid, tid, tsc))
}

// Fork writes a FORK record: thread tid of process pid was created by ptid
// of ppid.
func (w *PerfDataWriter) Fork(pid, ppid, tid, ptid int, tsc uint64) {
	w.task(RecFork, pid, ppid, tid, ptid, tsc)
}

// Exit writes an EXIT record for thread tid of process pid.
func (w *PerfDataWriter) Exit(pid, ppid, tid, ptid int, tsc uint64) {
	w.task(RecExit, pid, ppid, tid, ptid, tsc)
}

func (w *PerfDataWriter) task(typ PerfRecordType, pid, ppid, tid, ptid int, tsc uint64) {
	le := binary.LittleEndian
	pl := le.AppendUint32(nil, uint32(pid))
	pl = le.AppendUint32(pl, uint32(ppid))
	pl = le.AppendUint32(pl, uint32(tid))
	pl = le.AppendUint32(pl, uint32(ptid))
	pl = le.AppendUint64(pl, w.cfg.Time.TSCToPerf(tsc))
	w.record(typ, 0, pl, w.sid(evTrack, pid, tid, tsc))
}

// Switch writes a context switch of thread tid (of pid) in or out of the
// CPU set with SetCPU. In a per-cpu recording it is a SWITCH_CPU_WIDE
// record whose other thread (the next one on switch out, the previous one
// on switch in) is otherPid/otherTid; in a per-thread recording a SWITCH.
func (w *PerfDataWriter) Switch(out, preempt bool, pid, tid, otherPid, otherTid int, tsc uint64) {
	var misc uint16
	if out {
		misc |= MiscSwitchOut
		if preempt {
			misc |= MiscSwitchPreempt
		}
	}
	if !w.cfg.PerCPU {
		w.record(RecSwitch, misc, nil, w.sid(evSwitch, pid, tid, tsc))
		return
	}
	le := binary.LittleEndian
	pl := le.AppendUint32(nil, uint32(otherPid))
	pl = le.AppendUint32(pl, uint32(otherTid))
	w.record(RecSwitchCPUWide, misc, pl, w.sid(evSwitch, pid, tid, tsc))
}

// AuxTrace appends PT bytes to the queue of thread tid (per-thread) or of
// cpu (per-cpu: the record's tid is written as given, and perf writes the
// workload's pid there for every CPU) as one AUXTRACE record, padded with zero bytes (PAD
// packets) to a multiple of 8. tsc is a TSC value from when the buffer was
// taken (perf records rdtsc at read time); it becomes the record's
// reference, from which perf's decoder extends the 56-bit TSC packets. It
// must not be 0: perf 6.1 then never finds a timestamp and crashes while
// setting up the queue. 0 is replaced by the latest TSC the writer saw (or
// 1).
//
// Precondition: data ends at a packet boundary, and the first call for a
// queue starts at a PSB. perf does not rejoin a packet cut across two
// AUXTRACE records.
func (w *PerfDataWriter) AuxTrace(tid, cpu int, tsc uint64, data []byte) {
	if w.err != nil || len(data) == 0 {
		return
	}
	if tsc == 0 {
		tsc = max(w.lastTSC, 1)
	}
	w.lastTSC = max(w.lastTSC, tsc)
	key := int32(tid)
	if w.cfg.PerCPU {
		key = int32(cpu)
		w.maxCPU = max(w.maxCPU, uint32(cpu))
	}
	q := w.queues[key]
	if q == nil {
		q = &perfWQueue{idx: w.nqueue}
		w.nqueue++
		w.queues[key] = q
	}
	padded := uint64(len(data)+7) &^ 7
	le := binary.LittleEndian
	var pl [40]byte
	le.PutUint64(pl[0:], padded)
	le.PutUint64(pl[8:], q.auxOff)
	le.PutUint64(pl[16:], tsc)
	le.PutUint32(pl[24:], q.idx)
	if w.cfg.PerCPU {
		le.PutUint32(pl[28:], uint32(tid))
		le.PutUint32(pl[32:], uint32(cpu))
	} else {
		le.PutUint32(pl[28:], uint32(tid))
		le.PutUint32(pl[32:], ^uint32(0))
	}
	// perf indexes the record header only (auxtrace_index__auxtrace_event).
	w.auxIndex = append(w.auxIndex, PerfAuxIndexEntry{Offset: uint64(w.off), Size: 48})
	w.record(RecAuxtrace, 0, pl[:], nil)
	w.write(data)
	var zero [8]byte
	w.write(zero[:padded-uint64(len(data))])
	q.auxOff += padded
	w.buffers++
}

// FinishedRound writes a FINISHED_ROUND record: perf may process, in time
// order, every record before it.
func (w *PerfDataWriter) FinishedRound() { w.record(RecFinishedRound, 0, nil, nil) }

// Flush writes buffered records to the file and updates the header's data
// size to cover them, so that a writer that dies later leaves a file that
// perf reads up to this point (perf refuses a data size of 0).
func (w *PerfDataWriter) Flush() error {
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.fail(w.pathErr(err))
		}
	}
	if w.err == nil && !w.closed {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], uint64(w.off-w.dataStart))
		if _, err := w.f.WriteAt(b[:], 48); err != nil {
			w.fail(w.pathErr(err))
		}
	}
	return w.err
}

// Err returns the first error the writer met.
func (w *PerfDataWriter) Err() error { return w.err }

// Close writes FINISHED_ROUND and the feature sections, fixes the header
// up and closes the file.
func (w *PerfDataWriter) Close() error {
	if w.closed {
		return w.err
	}
	w.FinishedRound()
	w.closed = true
	dataSize := uint64(w.off - w.dataStart)
	if w.err != nil {
		w.salvage(dataSize)
		w.f.Close()
		return w.err
	}
	feats := map[PerfFeature][]byte{}
	var uts unix.Utsname
	if unix.Uname(&uts) == nil {
		feats[FeatHostname] = encodePerfString(nil, cString(uts.Nodename[:]))
		feats[FeatOSRelease] = encodePerfString(nil, cString(uts.Release[:]))
	}
	feats[FeatVersion] = encodePerfString(nil, "ptjit")
	feats[FeatArch] = encodePerfString(nil, "x86_64")
	nr := uint32(w.cfg.NrCPUs)
	if nr == 0 {
		nr = uint32(runtime.NumCPU())
	}
	nr = max(nr, w.maxCPU+1)
	feats[FeatNrCPUs] = binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, nr), nr)
	if len(w.cfg.Cmdline) > 0 {
		feats[FeatCmdline] = encodeCmdline(w.cfg.Cmdline)
	}
	if len(w.auxIndex) > 0 {
		feats[FeatAuxtrace] = encodeAuxIndex(w.auxIndex)
	}
	bitmap := w.writeFeatures(feats)
	w.Flush()
	if w.err == nil {
		// Rewrite the header in place with the final sizes.
		w.off = 0
		w.bw.Reset(&offsetWriter{f: w.f})
		w.writeHeader(dataSize, bitmap, perfHeaderSize)
		w.Flush()
	}
	if w.err != nil {
		w.salvage(dataSize)
	}
	if err := w.f.Close(); err != nil {
		w.fail(w.pathErr(err))
	}
	return w.err
}

// salvage makes a file whose writing failed readable up to the failure:
// the header's data size is set to cover what reached the file (the
// header lies in blocks already written, so this needs no new space on a
// full disk), at most dataSize (the feature sections after the data may
// be cut short too). The last record may be cut short; readers stop
// before it.
func (w *PerfDataWriter) salvage(dataSize uint64) {
	pos, err := w.f.Seek(0, io.SeekCurrent)
	if err != nil || pos <= w.dataStart {
		return
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], min(uint64(pos-w.dataStart), dataSize))
	w.f.WriteAt(b[:], 48)
}

// writeFeatures writes the feature table and sections at the current
// offset (the end of the data) and returns the feature bitmap.
func (w *PerfDataWriter) writeFeatures(feats map[PerfFeature][]byte) [4]uint64 {
	b, bitmap := encodeFeatures(uint64(w.off), feats)
	w.write(b)
	return bitmap
}

// encodeFeatures encodes the feature section table followed by the
// sections, in feature order, for a file position off.
func encodeFeatures(off uint64, feats map[PerfFeature][]byte) ([]byte, [4]uint64) {
	var bitmap [4]uint64
	keys := make([]PerfFeature, 0, len(feats))
	for k := range feats {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	secOff := off + uint64(16*len(keys))
	le := binary.LittleEndian
	var b []byte
	for _, k := range keys {
		bitmap[k/64] |= 1 << (uint(k) % 64)
		b = le.AppendUint64(b, secOff)
		b = le.AppendUint64(b, uint64(len(feats[k])))
		secOff += uint64(len(feats[k]))
	}
	for _, k := range keys {
		b = append(b, feats[k]...)
	}
	return b, bitmap
}

func encodePerfString(b []byte, s string) []byte {
	n := (len(s) + 1 + 7) &^ 7
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = append(b, s...)
	return append(b, make([]byte, n-len(s))...)
}

func encodeCmdline(args []string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(args)))
	for _, a := range args {
		b = encodePerfString(b, a)
	}
	return b
}

func encodeAuxIndex(idx []PerfAuxIndexEntry) []byte {
	le := binary.LittleEndian
	b := le.AppendUint64(nil, uint64(len(idx)))
	for _, e := range idx {
		b = le.AppendUint64(b, e.Offset)
		b = le.AppendUint64(b, e.Size)
	}
	return b
}

// offsetWriter writes at offset 0 of f onwards, for the header fix-up.
type offsetWriter struct {
	f   *os.File
	off int64
}

func (o *offsetWriter) Write(b []byte) (int, error) {
	n, err := o.f.WriteAt(b, o.off)
	o.off += int64(n)
	if err == nil && n < len(b) {
		err = errors.New("short write")
	}
	return n, err
}
