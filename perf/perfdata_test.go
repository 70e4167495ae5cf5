package perf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// writeRoundTripFile writes a per-thread recording with two threads and
// returns the PT bytes written per thread.
func writeRoundTripFile(t testing.TB, path string, cfg PerfDataConfig) map[int][]byte {
	t.Helper()
	w, err := CreatePerfData(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	w.SetCPU(0)
	w.Comm(100, 100, "main", true, 10)
	w.Comm(100, 101, "worker", false, 11)
	m := PerfMmap{Pid: 100, Tid: 100, Addr: 0x400000, Len: 0x2000, Pgoff: 0x1000, Prot: 5, Flags: 2, Filename: self}
	if err := PerfMmapFile(&m); err != nil {
		t.Fatal(err)
	}
	w.Mmap2(&m, 12)
	w.Mmap2(&PerfMmap{Pid: 100, Tid: 100, Addr: 0x7000, Len: 0x1000, Prot: 5, Flags: 2,
		BuildID: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}, Filename: "/bid"}, 13)
	w.ItraceStart(100, 100, 14)
	w.Fork(100, 100, 101, 100, 15)
	got := map[int][]byte{}
	chunks := []struct {
		tid  int
		data []byte
	}{
		{100, concat(ptPSB, ptTSC(20), ptPSBEND)},
		{101, concat(ptPSB, ptTSC(21), ptPSBEND, ptModeExec64)},
		{100, concat(ptModeExec64, ptTIP48(ptOpTIPPGE, 0x401000), ptShortTNT(true))},
		{100, []byte{ptOpTIPPGD}},
	}
	for _, c := range chunks {
		w.AuxTrace(c.tid, -1, 30, c.data)
		padded := append([]byte(nil), c.data...)
		for len(padded)%8 != 0 {
			padded = append(padded, 0)
		}
		got[c.tid] = append(got[c.tid], padded...)
	}
	w.Switch(true, true, 100, 100, 0, 0, 40)
	w.Exit(100, 100, 101, 100, 50)
	w.Exit(100, 100, 100, 100, 51)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestPerfDataRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	cfg := PerfDataConfig{MTC: true, MTCPeriod: 3, NoRetComp: true, TSCCTCN: 2, TSCCTCD: 3,
		MaxNonTurboRatio: 24, Filter: "filter 0x1000/0x100@/bin/true", Cmdline: []string{"ptjit", "run", "x"},
		Time: PerfTimeConv{Shift: 10, Mult: 700, Zero: 12345}, NrCPUs: 4}
	want := writeRoundTripFile(t, path, cfg)
	p, err := OpenPerfData(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Unterminated {
		t.Error("closed file reads as unterminated")
	}
	if len(p.Attrs) != 1 || p.Attrs[0].Type != DefaultPTPMUType || p.Attrs[0].Size != perfAttrSize ||
		p.Attrs[0].SampleType != perfSampleType || !p.Attrs[0].SampleIDAll() || len(p.Attrs[0].IDs) != 1 {
		t.Fatalf("attrs %+v", p.Attrs)
	}
	if got := strings.Join(p.Features.Cmdline, " "); got != "ptjit run x" {
		t.Errorf("cmdline %q", got)
	}
	if p.Features.NrCPUsOnline != 4 || p.Features.Arch != "x86_64" {
		t.Errorf("nrcpus %d arch %q", p.Features.NrCPUsOnline, p.Features.Arch)
	}
	tr, err := LoadPerfTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Info == nil || tr.Info.Type != AuxtraceIntelPT {
		t.Fatalf("no Intel PT AUXTRACE_INFO: %+v", tr.Info)
	}
	pt := tr.Info.IntelPT
	if pt.PMUType != DefaultPTPMUType || pt.TimeShift != 10 || pt.TimeMult != 700 || pt.TimeZero != 12345 ||
		!pt.CapUserTimeZero || pt.TSCBit != PTConfigTSC || pt.NoRetCompBit != PTConfigNoRetComp ||
		pt.PerCPUMmaps || !pt.HasMTC || pt.MTCBit != PTConfigMTC || pt.MTCFreqBits != PTConfigMTCMask ||
		pt.TSCCTCN != 2 || pt.TSCCTCD != 3 || pt.MaxNonTurboRatio != 24 || pt.Filter != cfg.Filter {
		t.Errorf("Intel PT info %+v", pt)
	}
	if tr.PTAttr == nil || tr.PTAttr.Config&PTConfigMTCMask != 3<<PTConfigMTCShift || !tr.TSCEnabled() {
		t.Errorf("PT attr %+v", tr.PTAttr)
	}
	if !tr.HasTimeConv || tr.TimeConv.Shift != 10 || tr.TimeConv.Mult != 700 || tr.TimeConv.Zero != 12345 {
		t.Errorf("time conv %+v", tr.TimeConv)
	}
	if len(tr.Queues) != 2 {
		t.Fatalf("%d queues, want 2", len(tr.Queues))
	}
	for _, q := range tr.Queues {
		if q.CPU != -1 {
			t.Errorf("%v: cpu %d, want -1", q, q.CPU)
		}
		if !bytes.Equal(q.Data, want[int(q.Tid)]) {
			t.Errorf("%v data\n%x\nwant\n%x", q, q.Data, want[int(q.Tid)])
		}
		for i, b := range q.Buffers {
			if b.Gap {
				t.Errorf("%v buffer %d: gap", q, i)
			}
			if b.Reference != 30 {
				t.Errorf("%v buffer %d: reference %d", q, i, b.Reference)
			}
		}
	}
	if q := tr.Queue(0); q == nil || q.Tid != 100 || len(q.Buffers) != 3 {
		t.Errorf("queue 0: %+v", q)
	}
	// The auxtrace index names every AUXTRACE record.
	if len(p.Features.AuxIndex) != 4 {
		t.Errorf("auxtrace index has %d entries, want 4", len(p.Features.AuxIndex))
	}
	for _, e := range p.Features.AuxIndex {
		found := false
		for _, q := range tr.Queues {
			for _, b := range q.Buffers {
				found = found || uint64(b.RecordOffset) == e.Offset
			}
		}
		if !found || e.Size != 48 {
			t.Errorf("auxtrace index entry %+v names no AUXTRACE record", e)
		}
	}
	// Sideband: in time order, times converted from TSC.
	var kinds []string
	for i := range tr.Sideband {
		r := &tr.Sideband[i]
		kinds = append(kinds, r.Type.String())
		if want := cfg.Time.TSCToPerf(uint64(10 + i)); i < 6 && r.ID.Time != want {
			t.Errorf("sideband %d (%v): time %d, want %d", i, r.Type, r.ID.Time, want)
		}
	}
	if got := strings.Join(kinds, ","); got != "COMM,COMM,MMAP2,MMAP2,ITRACE_START,FORK,SWITCH,EXIT,EXIT" {
		t.Errorf("sideband %s", got)
	}
	sb := tr.Sideband
	if sb[0].Comm != "main" || sb[0].Misc&MiscCommExec == 0 || sb[1].Comm != "worker" || sb[1].CommTid != 101 {
		t.Errorf("COMM records %+v %+v", sb[0], sb[1])
	}
	self, _ := os.Executable()
	if m := sb[2].Mmap; m.Filename != self || m.Addr != 0x400000 || m.Len != 0x2000 || m.Pgoff != 0x1000 ||
		m.Prot != 5 || m.Flags != 2 || m.Ino == 0 {
		t.Errorf("MMAP2 %+v", m)
	}
	if m := sb[3].Mmap; m.Filename != "/bid" || len(m.BuildID) != 20 || m.BuildID[19] != 20 {
		t.Errorf("MMAP2 build-id %+v", m)
	}
	if sb[4].ItracePid != 100 || sb[4].ItraceTid != 100 {
		t.Errorf("ITRACE_START %+v", sb[4])
	}
	if !sb[6].SwitchOut() || sb[6].Misc&MiscSwitchPreempt == 0 {
		t.Errorf("SWITCH misc %#x", sb[6].Misc)
	}
	if sb[7].Task.Tid != 101 || sb[7].Task.Time != cfg.Time.TSCToPerf(50) {
		t.Errorf("EXIT %+v", sb[7].Task)
	}
}

func TestPerfTimeConv(t *testing.T) {
	tcs := []PerfTimeConv{
		{Shift: 0, Mult: 1},
		{Shift: 10, Mult: 700, Zero: 12345},
		{Shift: 31, Mult: 1 << 30, Zero: 1 << 40},
	}
	for _, tc := range tcs {
		for _, tsc := range []uint64{0, 1, 1000, 1 << 40, 123456789012345} {
			ns := tc.TSCToPerf(tsc)
			back := tc.PerfToTSC(ns)
			// Rounding loses at most one perf-time unit's worth of TSC.
			if diff := int64(back - tsc); diff > 0 || float64(-diff) > float64(uint64(1)<<tc.Shift)/float64(tc.Mult)+1 {
				t.Errorf("%+v: tsc %d -> ns %d -> tsc %d", tc, tsc, ns, back)
			}
		}
	}
	if got := (PerfTimeConv{Shift: 1, Mult: 3, Zero: 5}).TSCToPerf(10); got != 5+15 {
		t.Errorf("TSCToPerf = %d, want 20", got)
	}
}

// TestPerfDataUnterminated: a writer that dies before Close leaves a file
// whose header covers the data up to its last Flush, followed by whatever
// it was writing; one that dies before any Flush leaves data size 0, which
// the reader reads up to the last complete record, reporting the cut one.
func TestPerfDataUnterminated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	w, err := CreatePerfData(path, PerfDataConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.Comm(7, 7, "crashy", true, 1)
	trace := concat(ptPSB, ptTSC(5), ptPSBEND)
	w.AuxTrace(7, -1, 5, trace)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Simulate the crash: no Close, then a half-written AUXTRACE record.
	flushed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec [48]byte
	binary.LittleEndian.PutUint32(rec[0:], uint32(RecAuxtrace))
	binary.LittleEndian.PutUint16(rec[6:], 48)
	binary.LittleEndian.PutUint64(rec[8:], 4096)
	cut := append(append([]byte(nil), flushed...), rec[:]...)
	cut = append(cut, 0x02, 0x82)
	zero := func(b []byte) []byte {
		b = append([]byte(nil), b...)
		binary.LittleEndian.PutUint64(b[48:], 0)
		return b
	}
	for _, c := range []struct {
		name         string
		data         []byte
		unterminated bool
		truncated    bool
	}{
		{"flushed", flushed, false, false},
		{"flushed+cut", cut, false, false},
		{"size0", zero(flushed), true, false},
		{"size0+cut", zero(cut), true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := NewPerfData(bytes.NewReader(c.data), int64(len(c.data)), "crashed.data")
			if err != nil {
				t.Fatal(err)
			}
			if p.Unterminated != c.unterminated || (c.unterminated && p.DataEnd != int64(len(c.data))) ||
				(!c.unterminated && p.DataEnd != int64(len(flushed))) {
				t.Fatalf("Unterminated %v DataEnd %d", p.Unterminated, p.DataEnd)
			}
			tr, err := LoadPerfTrace(p)
			if err != nil {
				t.Fatal(err)
			}
			if tr.Truncated != c.truncated {
				t.Errorf("Truncated = %v", tr.Truncated)
			}
			if len(tr.Queues) != 1 || !bytes.Equal(tr.Queues[0].Data[:len(trace)], trace) {
				t.Errorf("queues %+v", tr.Queues)
			}
			if len(tr.Sideband) != 1 || tr.Sideband[0].Comm != "crashy" {
				t.Errorf("sideband %+v", tr.Sideband)
			}
			if c.truncated {
				rr := p.Records()
				var r PerfRecord
				var err error
				for err == nil {
					err = rr.Next(&r)
				}
				if !errors.Is(err, ErrPerfDataTruncated) || !strings.Contains(err.Error(), "crashed.data: record at 0x") {
					t.Errorf("error %v", err)
				}
			}
		})
	}
}

// TestPerfDataErrors: malformed files give one-line errors naming the file
// and the offset, never a panic.
func TestPerfDataErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	writeRoundTripFile(t, path, PerfDataConfig{})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	mod := func(f func(b []byte) []byte) []byte {
		return f(append([]byte(nil), good...))
	}
	// Offset of the first AUXTRACE record.
	auxOff := func() int {
		off := perfDataStart
		for {
			if PerfRecordType(le.Uint32(good[off:])) == RecAuxtrace {
				return off
			}
			off += int(le.Uint16(good[off+6:]))
		}
	}()
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "bad.data: header at 0x0: file of 0 bytes is too small"},
		{"magic", mod(func(b []byte) []byte { copy(b, "NOTPERF!"); return b }), "bad.data: header at 0x0: bad magic"},
		{"pipe header on a file", mod(func(b []byte) []byte { le.PutUint64(b[8:], 16); return b }), "bad.data: record at 0x10: type 144 size 0 is smaller than a record header"}, // read as pipe mode: the file header is no record,
		{"header cut", good[:60], "header at 0x0: 0x68 bytes exceed file size 0x3c"},
		{"attrs beyond file", mod(func(b []byte) []byte { le.PutUint64(b[24:], 1<<40); return b }), "attrs at 0x"},
		{"data beyond file", mod(func(b []byte) []byte { le.PutUint64(b[48:], 1<<40); return b }), "header at 0x30: data section"},
		{"ids beyond file", mod(func(b []byte) []byte { le.PutUint64(b[perfHeaderSize+perfAttrSize+8:], 1<<40); return b }), "ids section"},
		{"record too small", mod(func(b []byte) []byte { le.PutUint16(b[perfDataStart+6:], 4); return b }),
			"bad.data: record at 0x100: AUXTRACE_INFO size 4 is smaller than a record header"},
		{"auxtrace size", mod(func(b []byte) []byte { le.PutUint64(b[auxOff+8:], 1<<50); return b }),
			"bad.data: record at 0x" + strconv.FormatInt(int64(auxOff), 16) + ": AUXTRACE size 0x4000000000000 exceeds data end"},
		{"feature beyond file", mod(func(b []byte) []byte {
			end := le.Uint64(b[40:]) + le.Uint64(b[48:])
			le.PutUint64(b[end:], 1<<40)
			return b
		}), "section 0x10000000000+"},
		{"compressed", mod(func(b []byte) []byte { le.PutUint32(b[perfDataStart:], uint32(RecCompressed)); return b }),
			"compressed perf.data"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := readAllPerfData(c.data, "bad.data")
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want it to contain %q on one line", msg, c.want)
			}
			var pe *PerfDataError
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *PerfDataError", err)
			}
		})
	}
}

// readAllPerfData parses data completely: header, attrs, features, every
// record and the trace assembly.
func readAllPerfData(data []byte, name string) error {
	p, err := NewPerfData(bytes.NewReader(data), int64(len(data)), name)
	if err != nil {
		return err
	}
	rr := p.Records()
	var r PerfRecord
	for {
		err := rr.Next(&r)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	_, err = LoadPerfTrace(p)
	return err
}

// TestPerfDataReadsPerfRecord reads files written by perf itself and
// compares the record counts with perf report --stats: one event, and two
// events with different sample types (records then name their event by
// PERF_SAMPLE_IDENTIFIER).
func TestPerfDataReadsPerfRecord(t *testing.T) {
	skipIfNoPerf(t)
	// A sample every 1 ms of CPU time: a 10 µs period (-c 10000) made
	// the hrtimer interrupts of this VM stretch the run to minutes.
	workload := []string{"--", "/bin/sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"}
	for _, c := range []struct {
		name   string
		events []string
		attrs  int
	}{
		{"one-event", []string{"-e", "cpu-clock"}, 1},
		{"two-sample-types", []string{"-e", "cpu-clock/call-graph=fp/", "-e", "task-clock"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "perf.data")
			args := append(append([]string{"record", "-q", "-c", "1000000", "-o", path}, c.events...), workload...)
			out, err := exec.Command("perf", args...).CombinedOutput()
			if err != nil {
				// perf is installed (skipIfNoPerf): a failing perf record
				// of software events is a failure, not a reason to skip.
				t.Fatalf("perf record: %v\n%s", err, out)
			}
			checkAgainstPerfStats(t, path, c.attrs)
		})
	}
}

func checkAgainstPerfStats(t *testing.T, path string, attrs int) {
	p, err := OpenPerfData(path)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if len(p.Attrs) != attrs {
		t.Fatalf("%d attrs, want %d", len(p.Attrs), attrs)
	}
	counts := map[string]int{}
	perAttr := map[*PerfAttr]int{}
	var samples, withIP int
	rr := p.Records()
	var r PerfRecord
	for {
		err := rr.Next(&r)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		counts[r.Type.String()]++
		if r.Type == RecSample {
			samples++
			perAttr[r.Attr]++
			if r.Sample.IP != 0 && r.ID.Time != 0 && r.ID.Pid != 0 {
				withIP++
			}
		}
	}
	stats, err := exec.Command("perf", "report", "-i", path, "--stats").Output()
	if err != nil {
		t.Fatalf("perf report --stats: %v", err)
	}
	re := regexp.MustCompile(`^\s+(\S+) events:\s+(\d+)`)
	want := map[string]int{}
	var perEvent []int // SAMPLE counts of the per-event sections, in attr order
	sc := bufio.NewScanner(bytes.NewReader(stats))
	inAggregate := true
	for sc.Scan() {
		line := sc.Text()
		if strings.HasSuffix(line, " stats:") && !strings.HasPrefix(line, "Aggregated") {
			inAggregate = false
			continue
		}
		m := re.FindStringSubmatch(line)
		if m == nil || m[1] == "TOTAL" {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		if inAggregate {
			want[m[1]] = n
		} else if m[1] == "SAMPLE" {
			perEvent = append(perEvent, n)
		}
	}
	if len(want) == 0 {
		t.Fatalf("no counts in perf report --stats:\n%s", stats)
	}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("%s: read %d records, perf report --stats counts %d", k, counts[k], n)
		}
	}
	if samples == 0 || withIP != samples {
		t.Errorf("%d samples, %d with ip, pid and time", samples, withIP)
	}
	if attrs > 1 {
		for i, n := range perEvent {
			if i < len(p.Attrs) && perAttr[&p.Attrs[i]] != n {
				t.Errorf("event %d: %d samples attributed, perf counts %d", i, perAttr[&p.Attrs[i]], n)
			}
		}
	}
	if len(p.Features.Cmdline) == 0 || !strings.Contains(strings.Join(p.Features.Cmdline, " "), "record") {
		t.Errorf("cmdline feature %q", p.Features.Cmdline)
	}
	if p.Features.NrCPUsOnline != uint32(runtime.NumCPU()) {
		t.Errorf("nrcpus online %d, want %d", p.Features.NrCPUsOnline, runtime.NumCPU())
	}
	if p.Features.OSRelease == "" || p.Features.Hostname == "" || p.Features.CPUID == "" {
		t.Errorf("features %+v", p.Features)
	}
}

// BenchmarkPerfDataLoad reads a 4 MiB per-thread recording (20000 sideband
// records, 1000 AUXTRACE buffers of 4 KiB) into a PerfTrace.
func BenchmarkPerfDataLoad(b *testing.B) {
	path := filepath.Join(b.TempDir(), "perf.data")
	w, err := CreatePerfData(path, PerfDataConfig{})
	if err != nil {
		b.Fatal(err)
	}
	buf := concat(ptPSB, ptPSBEND, bytes.Repeat([]byte{0x02 | 1<<6}, 4096-18)) // PSB, PSBEND, TNTs
	for i := 0; i < 1000; i++ {
		for j := 0; j < 10; j++ {
			w.Comm(1, 1+i%4, "bench", false, uint64(i*100+j))
			w.Mmap2(&PerfMmap{Pid: 1, Tid: 1, Addr: uint64(i) << 12, Len: 4096, Prot: 5, Flags: 2, Filename: "/bench/lib.so"}, uint64(i*100+j))
		}
		w.AuxTrace(1+i%4, -1, uint64(i*100+50), buf)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	st, _ := os.Stat(path)
	b.SetBytes(st.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := OpenPerfData(path)
		if err != nil {
			b.Fatal(err)
		}
		tr, err := LoadPerfTrace(p)
		if err != nil || len(tr.Queues) != 4 || len(tr.Sideband) != 20000 {
			b.Fatalf("load: %v", err)
		}
		p.Close()
	}
}

// BenchmarkPerfDataRecords iterates over the records of the same kind of
// file without assembling anything (the cost of Next).
func BenchmarkPerfDataRecords(b *testing.B) {
	path := filepath.Join(b.TempDir(), "perf.data")
	w, err := CreatePerfData(path, PerfDataConfig{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 20000; i++ {
		w.Comm(1, 1, "bench", false, uint64(i))
		w.ItraceStart(1, 1, uint64(i))
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	p, err := OpenPerfData(path)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	b.SetBytes(p.DataEnd - p.DataStart)
	b.ReportAllocs()
	b.ResetTimer()
	var r PerfRecord
	for i := 0; i < b.N; i++ {
		rr := p.Records()
		n := 0
		for rr.Next(&r) == nil {
			n++
		}
		if n != 40003 {
			b.Fatalf("%d records", n)
		}
	}
}

// TestPerfDataCutCopy: a finished perf.data cut short (a partial copy: the
// header names a data section past the end) loads up to the cut, flagged
// Truncated, each queue's bytes a prefix of what was written.
func TestPerfDataCutCopy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	want := writeRoundTripFile(t, path, PerfDataConfig{})
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.data")
	if err := os.WriteFile(cut, good[:len(good)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := OpenPerfData(cut)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr, err := LoadPerfTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	if !p.CutShort || !tr.Truncated {
		t.Errorf("CutShort %v, Truncated %v: want both", p.CutShort, tr.Truncated)
	}
	total := 0
	for _, q := range tr.Queues {
		w := want[int(q.Tid)]
		if len(q.Data) > len(w) || !bytes.Equal(q.Data, w[:len(q.Data)]) {
			t.Errorf("%v: %d bytes, not a prefix of the %d written", q, len(q.Data), len(w))
		}
		total += len(q.Data)
	}
	if total == 0 {
		t.Error("nothing loaded before the cut")
	}

	// A cut copy whose data is garbage from the first record on: the
	// error is still a *PerfDataError at that record's offset, and it
	// says what the header claimed.
	bad := append([]byte(nil), good[:len(good)*2/3]...)
	q, err := OpenPerfData(cut)
	if err != nil {
		t.Fatal(err)
	}
	start := q.DataStart
	q.Close()
	for i := start; i < start+8 && int(i) < len(bad); i++ {
		bad[i] = 0x30
	}
	bad[start+6], bad[start+7] = 0, 0 // size 0: smaller than a header
	if err := os.WriteFile(cut, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := OpenPerfData(cut)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	var r PerfRecord
	err = p2.Records().Next(&r)
	var pe *PerfDataError
	if !errors.As(err, &pe) || err != error(pe) {
		t.Fatalf("garbage record in a cut copy: %T %v, want a *PerfDataError", err, err)
	}
	if pe.Offset != start || !strings.Contains(err.Error(), "exceeds file size") {
		t.Errorf("error %q: want offset %#x and the header's claim", err, start)
	}
}
