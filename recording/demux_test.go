package recording

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/ptpkt"
)

// ptBuf builds a CPU's PT stream packet by packet.
type ptBuf struct {
	t *testing.T
	b []byte
}

func (p *ptBuf) pkt(k ptpkt.Packet) *ptBuf {
	var err error
	if p.b, err = ptpkt.AppendPacket(p.b, &k); err != nil {
		p.t.Fatal(err)
	}
	return p
}

// psb writes PSB+ (tracing off: no FUP) at time tsc.
func (p *ptBuf) psb(tsc uint64) *ptBuf {
	return p.pkt(ptpkt.Packet{Type: ptpkt.PktPSB}).pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: tsc}).pkt(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
}

// run enables tracing at ip (IP compression ipc: the payload is ip's low
// bits) and stops it, asynchronously, at stop (a full FUP, then TIP.PGD):
// the decoder runs the straight-line code [ip, stop).
func (p *ptBuf) run(ipc ptpkt.IPCompression, ip, stop uint64) *ptBuf {
	payload := ip
	switch ipc {
	case ptpkt.IPUpdate16:
		payload &= 0xffff
	case ptpkt.IPSext48:
		payload &= 1<<48 - 1
	}
	return p.pkt(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true}).
		pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGE, IPC: ipc, IP: payload}).
		pkt(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: stop}).
		pkt(ptpkt.Packet{Type: ptpkt.PktTIPPGD, IPC: ptpkt.IPSuppressed})
}

// demuxRecording writes, in a new directory, a per-CPU recording made by
// hand: process 1 (threads 1 and 11) runs one-byte NOPs at 0x20000 and
// 0x30000, process 2 (thread 2) two-byte NOPs at 0x20000, on two CPUs:
//
//	tsc 10 cpu 0: tid 1 runs 0x20000-0x20003
//	tsc 20 cpu 0: tid 2 (another process, same queue) runs 0x20000-0x20006
//	tsc 30 cpu 0: tid 11 runs 0x20000-0x20001
//	tsc 33 cpu 1: tid 1 (migrated) runs 0x30100-0x30103
//	tsc 40 cpu 0: tid 1 comes back: no PSB (the switch is inside the PSB
//	              segment of tsc 30), its TIP.PGE compressed against the
//	              CPU's last IP (tid 11's), not tid 1's own (0x30104)
//	tsc 45 cpu 0: LOST record (when lost is set)
//	tsc 50 cpu 0: 0x20020-0x20023 runs, but after the LOST no switch
//	              record says whose it is
//	tsc 60 cpu 0: tid 2 runs 0x20010-0x20012
//
// Without switches, only the ITRACE_START records are written.
func demuxRecording(t *testing.T, lost, switches bool) string {
	dir, _ := demuxRecordingGap(t, lost, switches, "")
	return dir
}

// demuxRecordingGap is demuxRecording with, when gap is not "", CPU 0's
// trace written as two AUXTRACE buffers and the bytes of tid 2's FUP and
// TIP.PGD at tsc 20 lost between them: the second buffer's AUX offset
// leaves room for them (gap "buffer"), or an AUX record says the AUX data
// was truncated after the first (gap "truncated"). It returns the queue
// offset where the second buffer starts.
func demuxRecordingGap(t *testing.T, lost, switches bool, gap string) (string, uint64) {
	dir := t.TempDir()
	r, err := db.Create(filepath.Join(dir, "code.db"), db.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(1, 0, at(1))
	r.ThreadStart(1, 1, at(1))
	r.ThreadStart(11, 1, at(2))
	r.ProcessStart(2, 1, at(3))
	r.ThreadStart(2, 2, at(3))
	for _, v := range []struct {
		pid  int
		addr uint64
		code []byte
	}{{1, 0x20000, []byte{0x90}}, {1, 0x30000, []byte{0x90}}, {2, 0x20000, []byte{0x66, 0x90}}} {
		reg := r.NewRegion(v.pid, v.addr, db.PageSize, at(4))
		r.AddVersion(db.Version{Region: reg, PID: v.pid, TID: v.pid, Addr: v.addr, Size: db.PageSize,
			Data: bytes.Repeat(v.code, db.PageSize/len(v.code)), At: at(4), Cause: "mprotect"})
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}

	w, err := perf.CreatePerfData(filepath.Join(dir, "perf.data"), perf.PerfDataConfig{PerCPU: true, NrCPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	cpu0, cpu1 := &ptBuf{t: t}, &ptBuf{t: t}
	sw := func(cpu, pid, tid, npid, ntid int, tsc uint64) {
		w.SetCPU(cpu)
		if !switches {
			return
		}
		w.Switch(true, true, pid, tid, npid, ntid, tsc)
		w.Switch(false, false, npid, ntid, pid, tid, tsc)
	}
	w.SetCPU(0)
	w.ItraceStart(1, 1, 10)
	sw(0, 0, 0, 1, 1, 10)
	cpu0.psb(10).run(ptpkt.IPSext48, 0x20000, 0x20004)
	sw(0, 1, 1, 2, 2, 20)
	cpu0.psb(20).run(ptpkt.IPSext48, 0x20000, 0x20008)
	lostFrom, lostTo := len(cpu0.b)-8, len(cpu0.b) // FUP (7 bytes), TIP.PGD
	sw(0, 2, 2, 1, 11, 30)
	cpu0.psb(30).run(ptpkt.IPSext48, 0x20000, 0x20002)
	w.SetCPU(1)
	w.ItraceStart(1, 1, 33)
	sw(1, 0, 0, 1, 1, 33)
	cpu1.psb(33).run(ptpkt.IPSext48, 0x30100, 0x30104)
	sw(1, 1, 1, 0, 0, 36)
	sw(0, 1, 11, 1, 1, 40)
	cpu0.pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 40}).run(ptpkt.IPUpdate16, 0x20010, 0x20012)
	if lost {
		w.SetCPU(0)
		w.Lost(1, 1, 3, 45)
	}
	cpu0.pkt(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 50}).run(ptpkt.IPSext48, 0x20020, 0x20024)
	sw(0, 1, 1, 2, 2, 60)
	cpu0.psb(60).run(ptpkt.IPSext48, 0x20010, 0x20014)
	var at uint64
	if gap != "" {
		w.AuxTrace(1, 0, 70, cpu0.b[:lostFrom])
		w.AuxTrace(1, 0, 70, cpu0.b[lostTo:])
		at = uint64(lostFrom+7) &^ 7 // the first buffer, padded
		if gap == "truncated" {
			w.SetCPU(0)
			w.Aux(2, 2, 0, at, perf.AuxFlagTruncated, 21)
		}
	} else {
		w.AuxTrace(1, 0, 70, cpu0.b)
	}
	w.AuxTrace(1, 1, 70, cpu1.b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if gap == "buffer" {
		// The second buffer's AUX offset: after the lost bytes.
		path := filepath.Join(dir, "perf.data")
		pd, err := perf.OpenPerfData(path)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := perf.LoadPerfTraceLazy(pd)
		pd.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range tr.Queues {
			if q.CPU == 0 {
				b := q.Buffers[1]
				var le [8]byte
				binary.LittleEndian.PutUint64(le[:], b.AuxOffset+uint64(lostTo-lostFrom))
				f, err := os.OpenFile(path, os.O_RDWR, 0)
				if err != nil {
					t.Fatal(err)
				}
				// struct perf_record_auxtrace: header, size, offset, ...
				if _, err := f.WriteAt(le[:], b.RecordOffset+8+8); err != nil {
					t.Fatal(err)
				}
				f.Close()
			}
		}
	}
	return dir, at
}

// demuxFlows decodes every Source of the recording in dir as ptjit decode
// --format=insn does and returns each thread's instruction addresses and
// the error lines, by thread (-1: unattributed).
func demuxFlows(t *testing.T, dir string) (map[int][]uint64, map[int][]string) {
	rec, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	srcs, err := rec.Sources(0, &decode.FlowConfig{}, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	ips, errs := map[int][]uint64{}, map[int][]string{}
	for _, s := range srcs {
		var out bytes.Buffer
		w := bufio.NewWriter(&out)
		s.WriteProblems(w, "insn", nil)
		fo := ptfmt.FlowOptions{Format: "insn", Jobs: 1, Origin: s.Origin, Where: s.Symbols.Where}
		if err := ptfmt.WriteFlow(w, s.Trace, s.Image, s.Config, &fo); err != nil {
			t.Fatal(err)
		}
		w.Flush()
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) > 0 && len(f[0]) == 16 {
				ip, _ := strconv.ParseUint(f[0], 16, 64)
				ips[s.TID] = append(ips[s.TID], ip)
			} else if strings.Contains(l, "error") {
				errs[s.TID] = append(errs[s.TID], l)
			}
		}
	}
	return ips, errs
}

func seq(from uint64, n int, step uint64) []uint64 {
	var out []uint64
	for i := 0; i < n; i++ {
		out = append(out, from+uint64(i)*step)
	}
	return out
}

// TestDemuxPerCPU: two processes on one CPU queue, a thread migrating to
// the other CPU and back, a switch inside a PSB segment with an IP
// compressed against another thread's, a LOST record: each thread's flow
// is exactly its own, through its own process's code; what follows the
// LOST record is reported with its CPU, queue offset and time, not
// attributed.
func TestDemuxPerCPU(t *testing.T) {
	ips, errs := demuxFlows(t, demuxRecording(t, true, true))
	want := map[int][]uint64{
		1:  append(append(seq(0x20000, 4, 1), seq(0x30100, 4, 1)...), seq(0x20010, 2, 1)...),
		2:  append(seq(0x20000, 4, 2), seq(0x20010, 2, 2)...),
		11: seq(0x20000, 2, 1),
	}
	for tid, w := range want {
		if fmt.Sprintf("%x", ips[tid]) != fmt.Sprintf("%x", w) {
			t.Errorf("tid %d: decoded %x, want %x", tid, ips[tid], w)
		}
		if len(errs[tid]) > 0 {
			t.Errorf("tid %d: errors %q", tid, errs[tid])
		}
	}
	if len(ips) != len(want) {
		t.Errorf("flows for threads %v, want 1, 2, 11", ips)
	}
	u := strings.Join(errs[-1], "\n")
	if len(errs[-1]) != 2 || !strings.Contains(u, "3 records lost") || !strings.Contains(u, "cpu 0 pt offset 0x") || !strings.Contains(u, "tsc 0x32") {
		t.Errorf("unattributed: %q; want the LOST record and the stretch at tsc 0x32 on cpu 0", errs[-1])
	}
}

// TestDemuxNoSwitch: a per-CPU recording without context-switch records
// cannot be split by thread: nothing is attributed, every stretch is
// reported.
func TestDemuxNoSwitch(t *testing.T) {
	ips, errs := demuxFlows(t, demuxRecording(t, false, false))
	if len(ips) != 0 {
		t.Errorf("decoded %v without switch records", ips)
	}
	if len(errs[-1]) == 0 || !strings.Contains(errs[-1][0], "no context-switch records") {
		t.Errorf("unattributed: %q", errs[-1])
	}
}

// TestCPURuns is the table test of the state machine that says which
// thread runs on a CPU when: a switch-out names the next thread, a
// switch-in its own, the idle task is no thread, a LOST record makes the
// CPU's thread unknown, a CPU without records is unknown.
func TestCPURuns(t *testing.T) {
	sb := func(typ perf.PerfRecordType, misc uint16, cpu, pid, tid, opid, otid int, tsc uint64) perf.PerfRecord {
		return perf.PerfRecord{Type: typ, Misc: misc, ID: perf.PerfSampleID{Valid: perf.SampleCPU | perf.SampleTID | perf.SampleTime,
			Pid: uint32(pid), Tid: uint32(tid), CPU: uint32(cpu), Time: tsc}, SwitchPid: uint32(opid), SwitchTid: uint32(otid),
			ItracePid: uint32(pid), ItraceTid: uint32(tid), Lost: 1}
	}
	c := newCPURuns(perf.PerfTimeConv{})
	for _, r := range []perf.PerfRecord{
		sb(perf.RecItraceStart, 0, 0, 5, 5, 0, 0, 10),
		sb(perf.RecSwitchCPUWide, perf.MiscSwitchOut, 0, 5, 5, 5, 6, 20), // out: next is 6
		sb(perf.RecSwitchCPUWide, 0, 1, 5, 7, 0, 0, 25),                  // in on cpu 1
		sb(perf.RecSwitchCPUWide, perf.MiscSwitchOut, 0, 5, 6, 0, 0, 30), // to idle
		sb(perf.RecLost, 0, 1, 0, 0, 0, 0, 40),
		sb(perf.RecSwitch, 0, 3, 5, 8, 0, 0, 10),                  // per-task switches
		sb(perf.RecSwitch, perf.MiscSwitchOut, 3, 5, 8, 0, 0, 20), // out: none traced
	} {
		c.add(&r)
	}
	for _, tt := range []struct {
		cpu     int
		tsc     uint64
		tid     int
		unknown string
	}{
		{0, 9, 0, "no sideband record"},
		{0, 10, 5, ""},
		{0, 19, 5, ""},
		{0, 20, 6, ""},
		{0, 35, 0, ""},
		{1, 24, 0, "no sideband record"},
		{1, 39, 7, ""},
		{1, 40, 0, "records lost"},
		{2, 50, 0, "no sideband record"},
		{3, 15, 8, ""},
		{3, 20, 0, ""},
	} {
		e := c.at(tt.cpu, tt.tsc)
		if e.TID != tt.tid || (tt.unknown == "") != (e.Unknown == "") || !strings.Contains(e.Unknown, tt.unknown) {
			t.Errorf("cpu %d tsc %d: tid %d unknown %q; want tid %d unknown %q", tt.cpu, tt.tsc, e.TID, e.Unknown, tt.tid, tt.unknown)
		}
	}
}

// queuePacket returns the offset, in the queue of CPU cpu of the
// perf.data at path, of the first packet of type typ with IP ip, and the
// offset of that byte in the file.
func queuePacket(t *testing.T, path string, cpu int, typ ptpkt.PacketType, ip uint64) (qoff uint64, fileOff int64) {
	t.Helper()
	pd, err := perf.OpenPerfData(path)
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	tr, err := perf.LoadPerfTrace(pd)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range tr.Queues {
		if int(q.CPU) != cpu {
			continue
		}
		d := ptpkt.NewPacketDecoder(q.Data, nil)
		if err := d.SyncForward(); err != nil {
			t.Fatal(err)
		}
		var p ptpkt.Packet
		for {
			off := d.Offset()
			if d.Next(&p) != nil {
				break
			}
			if p.Type == typ && p.IP == ip {
				for _, b := range q.Buffers {
					if off >= uint64(b.StreamPos) && off < uint64(b.StreamPos)+b.Size {
						return off, b.DataOffset + int64(off) - int64(b.StreamPos)
					}
				}
			}
		}
	}
	t.Fatalf("no %v packet with IP %#x in the queue of cpu %d", typ, ip, cpu)
	return 0, 0
}

// corrupt writes b at offset off of the file at path.
func corrupt(t *testing.T, path string, off int64, b byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{b}, off); err != nil {
		t.Fatal(err)
	}
}

// TestDemuxErrorOffset: one byte of CPU 0's AUX data corrupted in the
// perf.data (an unknown opcode, 0x39, where tid 2's FUP at 0x20008 was):
// the error names CPU 0, the offset of that byte in CPU 0's queue and the
// time there (tsc 20), in ptjit's text format and in ptxed's, not an
// offset in tid 2's joined stream.
func TestDemuxErrorOffset(t *testing.T) {
	dir := demuxRecording(t, false, true)
	path := filepath.Join(dir, "perf.data")
	qoff, fileOff := queuePacket(t, path, 0, ptpkt.PktFUP, 0x20008)
	corrupt(t, path, fileOff, 0x39)
	if d := ptpkt.NewPacketDecoder([]byte{0x39, 0, 0, 0, 0, 0, 0, 0, 0}, nil); d.SyncSet(0) != nil || d.Next(new(ptpkt.Packet)) == nil {
		t.Fatal("0x39 decodes as a packet")
	}

	_, errs := demuxFlows(t, dir)
	want := fmt.Sprintf("[error: cpu 0 pt offset %#x, tsc 0x14, ip ", qoff)
	if len(errs[2]) != 1 || !strings.HasPrefix(errs[2][0], want) || !strings.HasSuffix(errs[2][0], ": unknown opcode]") {
		t.Errorf("tid 2: errors %q, want one %q...: unknown opcode]", errs[2], want)
	}

	rec, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	srcs, err := rec.Sources(2, &decode.FlowConfig{}, func(string) bool { return false })
	if err != nil || len(srcs) != 1 {
		t.Fatalf("sources of tid 2: %v, %v", srcs, err)
	}
	var out bytes.Buffer
	o := ptfmt.NewPtxedOptions()
	o.Jobs = 1
	if err := ptfmt.PtxedTrace(o.WithOrigin(srcs[0].Origin), srcs[0].Trace, srcs[0].Image, srcs[0].Config, nil, &out); err != nil {
		t.Fatal(err)
	}
	wantPtxed := fmt.Sprintf("[%x, ", qoff)
	found := false
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "[") && strings.Contains(l, "unknown opcode") {
			found = strings.HasPrefix(l, wantPtxed) && strings.HasSuffix(l, ": error: unknown opcode, cpu 0]")
			if !found {
				t.Errorf("ptxed error line %q, want %s...: error: unknown opcode, cpu 0]", l, wantPtxed)
			}
		}
	}
	if !found {
		t.Errorf("ptxed printed no error:\n%s", out.String())
	}
}

// TestDemuxAuxGap: CPU 0's AUX data has a gap (an AUXTRACE buffer whose
// AUX offset does not continue the previous one, or an AUX record flagged
// truncated) where tid 2's FUP and TIP.PGD were lost. Tid 2's flow is not
// joined across it: it has an overflow at the time of the gap (tsc 20)
// and goes on at its next PSB; the gap is reported as an error line with
// the CPU, queue offsets, time and the record that tells it; the other
// threads' flows are those of the same recording without the gap.
func TestDemuxAuxGap(t *testing.T) {
	for _, gap := range []string{"buffer", "truncated"} {
		t.Run(gap, func(t *testing.T) { testDemuxAuxGap(t, gap) })
	}
}

func testDemuxAuxGap(t *testing.T, gap string) {
	dir, at := demuxRecordingGap(t, false, true, gap)
	why := map[string]string{"buffer": "AUX data lost: the AUXTRACE buffer at 0x", "truncated": "AUX data lost: the AUX record at 0x"}[gap]
	ips, errs := demuxFlows(t, dir)
	wantIPs, _ := demuxFlows(t, demuxRecording(t, false, true))
	for _, tid := range []int{1, 11} {
		if fmt.Sprintf("%x", ips[tid]) != fmt.Sprintf("%x", wantIPs[tid]) || len(errs[tid]) > 0 {
			t.Errorf("tid %d: %x, errors %q; without the gap %x", tid, ips[tid], errs[tid], wantIPs[tid])
		}
	}
	u := strings.Join(errs[-1], "\n")
	if len(errs[-1]) != 1 || !strings.Contains(u, fmt.Sprintf("cpu 0 pt offset %#x-%#x, tsc 0x14", at, at)) || !strings.Contains(u, why) {
		t.Errorf("unattributed: %q; want the gap at %#x, tsc 0x14", errs[-1], at)
	}

	rec, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	srcs, err := rec.Sources(2, &decode.FlowConfig{}, func(string) bool { return false })
	if err != nil || len(srcs) == 0 || srcs[0].TID != 2 {
		t.Fatalf("sources of tid 2: %v, %v", srcs, err)
	}
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	fo := ptfmt.FlowOptions{Format: "json", Jobs: 1, Origin: srcs[0].Origin}
	if err := ptfmt.WriteFlow(w, srcs[0].Trace, srcs[0].Image, srcs[0].Config, &fo); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	var events []string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.Contains(l, `"kind":"event"`) || strings.Contains(l, `"kind":"error"`) {
			events = append(events, l)
		}
	}
	// The overflow: at the time of the gap, at the offset where decoding
	// goes on (as for any OVF: the packet after it), a PSB of CPU 0's
	// queue after the gap.
	var ovfOff uint64
	if len(events) != 8 || !strings.Contains(events[0], `"event":"enabled, ip: 0000000000020000"`) ||
		!strings.HasPrefix(events[3], `{"event":"overflow","kind":"event","pt_offset":`) || !strings.HasSuffix(events[3], `,"tsc":20}`) ||
		!strings.Contains(events[4], `"event":"enabled, ip: 0000000000020010"`) {
		t.Fatalf("tid 2's events:\n%s\nwant enabled at 0x20000, overflow at tsc 20, enabled at 0x20010", strings.Join(events, "\n"))
	}
	fmt.Sscanf(strings.TrimPrefix(events[3], `{"event":"overflow","kind":"event","pt_offset":`), "%d", &ovfOff)
	pd, err := perf.OpenPerfData(filepath.Join(dir, "perf.data"))
	if err != nil {
		t.Fatal(err)
	}
	defer pd.Close()
	tr, err := perf.LoadPerfTrace(pd)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range tr.Queues {
		if q.CPU == 0 && (ovfOff <= at || !bytes.HasPrefix(q.Data[ovfOff:], ptpkt.PSBPattern[:])) {
			t.Errorf("the overflow is at %#x of CPU 0's queue, not at a PSB after the gap at %#x", ovfOff, at)
		}
	}
}
