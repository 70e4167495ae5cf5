package decode

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/ptpkt"
)

// qRec is one step of the query layer's read-ahead: the event it read
// (of a TNT or TIP, only the fields fetchQEvent keeps), the deferred
// error, the offset and the time after it.
type qRec struct {
	sync   bool // a SyncForward: ip and st are its result
	ip     uint64
	st     int
	ev     Event
	offset uint64
	time   timeSnap
}

// queryStream reads pt with the query layer alone, as the flow layer's
// questions would but without the code: every event the read-ahead gives
// (fetchQEvent), through the whole trace, synchronizing at the next PSB
// after each error.
func queryStream(pt []byte, cfg *FlowConfig) []qRec {
	d := NewQueryDecoder(pt, cfg)
	var recs []qRec
	lastSync := ^uint64(0)
	for len(recs) < 1<<24 {
		ip, st := d.syncForward()
		recs = append(recs, qRec{sync: true, ip: ip, st: st, offset: d.Offset(), time: d.time.snap()})
		if st < 0 {
			if st == -int(CodeEOS) || d.SyncOffset() == lastSync {
				return recs
			}
			lastSync = d.SyncOffset()
			continue
		}
		lastSync = d.SyncOffset()
		for d.qstatus >= 0 && len(recs) < 1<<24 {
			ev := d.cur
			if ev.Type == EvTNT || ev.Type == EvTIP {
				ev = Event{Type: ev.Type, IPSuppressed: ev.IPSuppressed, IP: ev.IP, TNTBits: ev.TNTBits, TNTSize: ev.TNTSize, Offset: ev.Offset}
			}
			recs = append(recs, qRec{ev: ev, offset: d.Offset(), time: d.time.snap()})
			d.fetchQEvent()
		}
		recs = append(recs, qRec{st: d.qstatus, offset: d.Offset(), time: d.time.snap()})
	}
	return recs
}

func diffQuery(got, want []qRec) string {
	for i := 0; i < len(got) || i < len(want); i++ {
		if i >= len(got) || i >= len(want) {
			return fmt.Sprintf("%d steps, want %d", len(got), len(want))
		}
		if got[i] != want[i] {
			return fmt.Sprintf("step %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	return ""
}

// compareFastPaths decodes pt with the fast paths (the query layer's MTC
// runs and quiet TNT and TIP packets, RunFlow's blocks) and without them,
// and returns the first difference: in the query layer's read-ahead
// (queryStream), or in what a sink gets — every instruction with its
// offset and time, every event and error — instruction by instruction
// and, with the fast paths, through blocks. It returns the number of
// blocks the block decode used.
func compareFastPaths(pt []byte, img *Image, cfg *FlowConfig, resync bool) (diff string, blocks int) {
	if cfg.noFastPaths {
		return "compareFastPaths: the fast paths are off", 0
	}
	slowCfg := *cfg
	slowCfg.noFastPaths = true
	if d := diffQuery(queryStream(pt, cfg), queryStream(pt, &slowCfg)); d != "" {
		return "query layer, with fast paths vs without: " + d, 0
	}
	var ref recSink
	RunFlow(NewFlowDecoder(pt, img, &slowCfg), &ref, resync)
	fast := recSink{ref: &ref}
	RunFlow(NewFlowDecoder(pt, img, cfg), &fast, resync)
	if d := fast.check(); d != "" {
		return "instructions, with fast paths vs without: " + d, 0
	}
	blk := recBlocks{recSink: recSink{ref: &ref}}
	RunFlow(NewFlowDecoder(pt, img, cfg), &blk, resync)
	if d := blk.check(); d != "" {
		return "blocks with fast paths vs instructions without: " + d, blk.blocks
	}
	// Without fast paths a block sink gets instructions.
	noBlk := recBlocks{recSink: recSink{ref: &ref}}
	RunFlow(NewFlowDecoder(pt, img, &slowCfg), &noBlk, resync)
	if d := noBlk.check(); d != "" || noBlk.blocks != 0 {
		return fmt.Sprintf("block sink without fast paths (%d blocks): %s", noBlk.blocks, d), blk.blocks
	}
	return "", blk.blocks
}

// corpusCase is a row of libipt's conformance corpus as a decode: its
// trace, image and the configuration its ptxed options give.
type corpusCase struct {
	name   string
	pt     []byte
	img    *Image
	cfg    *FlowConfig
	resync bool
}

// corpusCases reads every row of the conformance corpus that has a ptxed
// expectation (the rows ptxed decodes), with the options of its ptxed
// command line that configure the decoder (the output options do not).
func corpusCases(t *testing.T) []corpusCase {
	dir := testenv.ConformanceDir(t)
	var cases []corpusCase
	for _, r := range testenv.CorpusIndex(t, dir) {
		if r.PtxedExp == "-" {
			continue
		}
		pt, err := os.ReadFile(filepath.Join(dir, r.PT))
		if err != nil {
			t.Fatal(err)
		}
		img := NewImage()
		for _, raw := range strings.Fields(r.RawImages) {
			if err := addRawImage(img, dir, raw); err != nil {
				t.Fatalf("%s: %v", r.Name, err)
			}
		}
		cfg, resync, err := ptxedFlowConfig(r.PtxedOpts)
		if err != nil {
			// ptxed does not decode either (bad_cpu: "unknown cpu").
			t.Logf("%s: %v: not decoded", r.Name, err)
			continue
		}
		cases = append(cases, corpusCase{r.Name, pt, img, cfg, resync})
	}
	return cases
}

// addRawImage adds a ptxed --raw image, FILE[:FROM]:BASE (the corpus
// uses no other form), to img.
func addRawImage(img *Image, dir, arg string) error {
	f := strings.Split(arg, ":")
	if len(f) < 2 || len(f) > 3 {
		return fmt.Errorf("raw image %q: want FILE[:FROM]:BASE", arg)
	}
	var nums []uint64
	for _, s := range f[1:] {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return fmt.Errorf("raw image %q: %v", arg, err)
		}
		nums = append(nums, v)
	}
	off, base := uint64(0), nums[len(nums)-1]
	if len(nums) == 2 {
		off = nums[0]
	}
	return img.AddFile(filepath.Join(dir, f[0]), off, 0, base)
}

// ptxedFlowConfig is the decoder configuration of a ptxed command line
// (as ptfmt's PtxedOptions.FlowConfig gives it): --cpu and its errata,
// the timing parameters, the address filters, --event:tick,
// --resync-on-error and --*:keep-tcal-on-ovf.
func ptxedFlowConfig(opts string) (cfg *FlowConfig, resync bool, err error) {
	cfg = &FlowConfig{}
	args := strings.Fields(opts)
	num := func(i int, bits int) (uint64, error) {
		if i+1 >= len(args) {
			return 0, fmt.Errorf("%s: missing value", args[i])
		}
		return strconv.ParseUint(args[i+1], 0, bits)
	}
	for i := 0; i < len(args); i++ {
		var v uint64
		switch a := args[i]; a {
		case "--cpu":
			if i+1 >= len(args) {
				return nil, false, fmt.Errorf("--cpu: missing value")
			}
			i++
			if args[i] == "none" {
				continue
			}
			cpu, err := ptpkt.ParseCPU(args[i])
			if err != nil {
				return nil, false, err
			}
			cfg.Packet.CPU = cpu
			if cfg.Packet.Errata, err = cpu.Errata(); err != nil {
				return nil, false, err
			}
		case "--mtc-freq", "--nom-freq", "--cpuid-0x15.eax", "--cpuid-0x15.ebx":
			bits := 8
			if strings.HasPrefix(a, "--cpuid") {
				bits = 32
			}
			if v, err = num(i, bits); err != nil {
				return nil, false, err
			}
			i++
			switch a {
			case "--mtc-freq":
				cfg.Packet.MTCFreq = uint8(v)
			case "--nom-freq":
				cfg.Packet.NomFreq = uint8(v)
			case "--cpuid-0x15.eax":
				cfg.Packet.CPUID15EAX = uint32(v)
			default:
				cfg.Packet.CPUID15EBX = uint32(v)
			}
		case "--event:tick":
			cfg.TickEvents = true
		case "--resync-on-error":
			resync = true
		case "--insn:keep-tcal-on-ovf", "--block:keep-tcal-on-ovf":
			// (ptxed's option for the decoder it runs; one
			// FlowDecoder serves both)
			cfg.Packet.KeepTcalOnOVF = true
		default:
			var n int
			var field string
			if k, _ := fmt.Sscanf(a, "--filter:addr%d_%s", &n, &field); k == 2 && n >= 0 && n < 4 {
				if v, err = num(i, 64); err != nil {
					return nil, false, err
				}
				i++
				switch field {
				case "cfg":
					cfg.Filter.Cfg[n] = uint8(v)
				case "a":
					cfg.Filter.A[n] = v
				case "b":
					cfg.Filter.B[n] = v
				}
			}
			// Every other option only changes what ptxed prints.
		}
	}
	return cfg, resync, nil
}

// TestQueryFastPaths: the query layer's fast paths (fetchQEvent's MTC
// runs and quiet TNT and TIP packets, fetchEvent's MTC runs, takeTNT's
// read of the MTC or TNT-8 after a TNT) and RunFlow's blocks change
// nothing: with them and without them (FlowConfig.noFastPaths), the
// query layer reads the same events with the same offsets and times, and
// a sink gets the same instructions, events and errors, on every decode
// of libipt's conformance corpus, the corpus's synthetic traces and soft-PT
// traces (an MTC per instruction, with and without other packets among
// them). The corpus's rows decode with their ptxed options, once with
// --resync-on-error and once without.
func TestQueryFastPaths(t *testing.T) {
	n := 0
	for _, c := range corpusCases(t) {
		for _, resync := range []bool{c.resync, !c.resync} {
			if d, _ := compareFastPaths(c.pt, c.img, c.cfg, resync); d != "" {
				t.Errorf("%s (resync %v): %s", c.name, resync, d)
			}
		}
		n++
	}
	if n < 430 {
		t.Errorf("%d corpus rows, want at least 430", n)
	}
	for _, name := range []string{"small", "mid"} {
		pt, img := loadSynthetic(t, name)
		if d, blocks := compareFastPaths(pt, img, &FlowConfig{}, false); d != "" || blocks == 0 {
			t.Errorf("synthetic/%s (%d blocks): %s", name, blocks, d)
		}
	}
	for seed := int64(1); seed <= 20; seed++ {
		for _, noise := range []bool{false, true} {
			pt, cfg, _ := softPTTrace(300, seed, noise)
			if d, blocks := compareFastPaths(pt, softPTImage(), cfg, false); d != "" || blocks == 0 {
				t.Errorf("soft PT, seed %d, noise %v (%d blocks): %s", seed, noise, blocks, d)
			}
		}
	}
}

// TestSoftPTTrace: softPTTrace's traces decode to the instructions they
// stand for, without an error, so that TestQueryFastPaths compares
// decodes that run through the whole trace.
func TestSoftPTTrace(t *testing.T) {
	for _, noise := range []bool{false, true} {
		pt, cfg, want := softPTTrace(2000, 3, noise)
		var s recSink
		RunFlow(NewFlowDecoder(pt, softPTImage(), cfg), &s, false)
		var n uint64
		for _, r := range s.recs {
			if r.kind == callInsn {
				n++
			}
		}
		if n != want || len(s.errs) != 0 {
			t.Errorf("noise %v: %d instructions, want %d; errors %+v", noise, n, want, s.errs)
		}
	}
}
