package decode

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/ptjit/ptjit/ptpkt"
	"github.com/ptjit/ptjit/x86"
)

// flowLog writes everything a sink sees, one line each, so that two
// decodes can be compared exactly.
type flowLog struct{ lines []string }

func (l *flowLog) Insn(in *FlowInsn, off, tsc uint64) {
	sec := 0
	if in.Section != nil {
		sec = in.Section.ID
	}
	l.lines = append(l.lines, fmt.Sprintf("insn %#x size %d class %v mode %v spec %v sec %d target %#x itsc %d off %#x tsc %d",
		in.IP, in.Size, in.Class, in.Mode, in.Speculative, sec, in.Target, in.TSC, off, tsc))
}
func (l *flowLog) Event(ev *Event, off uint64) {
	l.lines = append(l.lines, fmt.Sprintf("event %+v off %#x", *ev, off))
}
func (l *flowLog) Error(e *FlowError, kind ErrorKind) {
	l.lines = append(l.lines, fmt.Sprintf("%v %v", kind, e))
}

// blockLog is flowLog taking blocks, expanded with FlowBlock.Insns; it
// counts the blocks it got.
type blockLog struct {
	flowLog
	blocks int
}

func (l *blockLog) Block(b *FlowBlock, off, tsc uint64) {
	l.blocks++
	n := 0
	end := b.IP
	b.Insns(func(in *FlowInsn) { l.Insn(in, off, tsc); n++; end = in.IP + uint64(in.Size) })
	if uint32(n) != b.N || end != b.End {
		l.lines = append(l.lines, fmt.Sprintf("bad block at %#x: N %d End %#x, expanded %d to %#x", b.IP, b.N, b.End, n, end))
	}
	if f := b.First(); f.Size == 0 || f.IP != b.IP {
		l.lines = append(l.lines, fmt.Sprintf("bad block at %#x: first instruction %+v", b.IP, f))
	}
}

// compareBlockFlow decodes pt with RunFlow instruction by instruction and
// through blocks, and the same on two goroutines (the recorder keeps the
// blocks and replays them), and fails unless the block decodes saw
// exactly the flow of the instruction decodes. It returns the
// instruction-level log and the blocks the one-core block decode used.
func compareBlockFlow(t *testing.T, name string, pt []byte, img *Image, cfg *FlowConfig, resync bool) ([]string, int) {
	t.Helper()
	var ref flowLog
	RunFlow(NewFlowDecoder(pt, img.Clone(), cfg), &ref, resync)
	var blk blockLog
	RunFlow(NewFlowDecoder(pt, img.Clone(), cfg), &blk, resync)
	if d := diffLines(blk.lines, ref.lines); d != "" {
		t.Errorf("%s: block decode vs instruction decode: %s", name, d)
	}
	var par blockLog
	ParallelFlow(pt, img, cfg, &par, resync, 2)
	var parRef flowLog
	ParallelFlow(pt, img, cfg, &parRef, resync, 2)
	if d := diffLines(par.lines, parRef.lines); d != "" {
		t.Errorf("%s: -j 2 block decode vs -j 2 instruction decode: %s", name, d)
	}
	return ref.lines, blk.blocks
}

func diffLines(a, b []string) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			get := func(s []string) string {
				if i < len(s) {
					return s[i]
				}
				return "<end>"
			}
			return fmt.Sprintf("line %d: %q vs %q (lengths %d, %d)", i, get(a), get(b), len(a), len(b))
		}
	}
	return ""
}

// TestBlockFlowSynthetic: the block path gives exactly the instruction
// path's flow on the corpus's synthetic traces (cut into chunks at -j 2
// for mid), and it is really used.
func TestBlockFlowSynthetic(t *testing.T) {
	for _, name := range []string{"small", "mid"} {
		pt, img := loadSynthetic(t, name)
		lines, blocks := compareBlockFlow(t, name, pt, img, &FlowConfig{}, false)
		if blocks == 0 || len(lines) == 0 {
			t.Errorf("%s: %d blocks, %d lines: the block path was not used", name, blocks, len(lines))
		}
	}
}

// TestBlockCacheVersions is the cache-invalidation case: a JIT region
// patched between two executions of the same block. Three versions of the
// code at 0x1000, valid one after the other, each run twice (the second
// run of each is a block-cache hit):
//
//	A  [0, 200):   nop; nop; nop; jmp *%rax               (a block of 3 insns, 3 bytes)
//	B  [200, 400): mov %rax,%rax; nop; nop; jmp *%rax     (3 insns, 5 bytes)
//	A' [400, ∞):   A's bytes again, as a new version
//
// A cache keyed by address alone would run A's block in B and go on at
// 0x1003, in the middle of B's mov; keyed by version, every instruction is
// read from the version valid when it ran.
func TestBlockCacheVersions(t *testing.T) {
	a := []byte{0x90, 0x90, 0x90, 0xff, 0xe0}
	b := []byte{0x48, 0x89, 0xc0, 0x90, 0x90, 0xff, 0xe0}
	img := NewImage()
	for _, v := range []struct {
		code     []byte
		from, to uint64
		tag      string
	}{{a, 0, 200, "A"}, {b, 200, 400, "B"}, {a, 400, AlwaysValid, "A'"}} {
		if err := img.AddVersion(0x1000, v.code, v.from, v.to, v.tag); err != nil {
			t.Fatal(err)
		}
	}
	var enc ptpkt.Encoder
	add := func(p ptpkt.Packet) {
		if err := enc.Append(&p); err != nil {
			t.Fatal(err)
		}
	}
	add(ptpkt.Packet{Type: ptpkt.PktPSB})
	add(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 100})
	add(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
	add(ptpkt.Packet{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: 0x1000})
	add(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
	runs := []struct {
		tsc uint64 // a TSC packet before the run (0: none)
		tag string
		ips []uint64
	}{
		{0, "A", []uint64{0x1000, 0x1001, 0x1002, 0x1003}},
		{0, "A", []uint64{0x1000, 0x1001, 0x1002, 0x1003}},
		{300, "B", []uint64{0x1000, 0x1003, 0x1004, 0x1005}},
		{0, "B", []uint64{0x1000, 0x1003, 0x1004, 0x1005}},
		{500, "A'", []uint64{0x1000, 0x1001, 0x1002, 0x1003}},
		{0, "A'", []uint64{0x1000, 0x1001, 0x1002, 0x1003}},
	}
	// The TSC packet comes before the TIP into the run it times: the
	// decoder's time for an instruction is that of the last packet it
	// consumed.
	var want []string
	for i, r := range runs {
		for _, ip := range r.ips {
			want = append(want, fmt.Sprintf("%#x %s", ip, r.tag))
		}
		if i == len(runs)-1 {
			add(ptpkt.Packet{Type: ptpkt.PktTIPPGD})
			break
		}
		if next := runs[i+1].tsc; next != 0 {
			add(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: next})
		}
		if err := enc.IPPacket(ptpkt.PktTIP, 0x1000); err != nil {
			t.Fatal(err)
		}
	}
	lines, blocks := compareBlockFlow(t, "versions", enc.Buf, img, &FlowConfig{}, false)
	// Every run but the first (decoded while the enable event is still
	// being bound) goes through a block.
	if blocks != len(runs)-1 {
		t.Errorf("%d blocks used, want %d", blocks, len(runs)-1)
	}
	// What ran, against what the code versions say ran.
	tags := map[int]string{}
	for _, s := range img.Sections() {
		tags[s.ID] = s.Tag
	}
	var got []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "insn ") {
			continue
		}
		var ip uint64
		var sec int
		f := strings.Fields(l)
		fmt.Sscanf(f[1], "0x%x", &ip)
		fmt.Sscanf(f[11], "%d", &sec)
		got = append(got, fmt.Sprintf("%#x %s", ip, tags[sec]))
	}
	if d := diffLines(got, want); d != "" {
		t.Errorf("decoded vs executed: %s\n%s", d, strings.Join(lines, "\n"))
	}
}

// TestBlockEntryBounds: a run stops before an instruction that does not
// fit in its section.
func TestBlockEntryBounds(t *testing.T) {
	img := NewImage()
	// nop; nop; then the first byte of a 3-byte mov cut by the section's end.
	if err := img.AddBytes([]byte{0x90, 0x90, 0x48}, 0x2000, "cut", 0); err != nil {
		t.Fatal(err)
	}
	s := img.Sections()[0]
	var be blockEntry
	buildBlock(s, 0, x86.Mode64, &be)
	if be.n != 2 || be.bytes != 2 || be.first != 1 || be.flags&blockOK == 0 {
		t.Errorf("cut run: %+v, want 2 instructions, 2 bytes", be)
	}
	buildBlock(s, 2, x86.Mode64, &be)
	if be.n != 0 || be.flags&blockOK == 0 {
		t.Errorf("run at a cut instruction: %+v, want empty", be)
	}
}

// TestBlockMaxSteps: an endless direct loop (nop; nop; jmp back) in a
// trace that never says more: the block path stops with "no progress" at
// exactly the instruction where Next does (MaxSteps not a multiple of the
// block's length).
func TestBlockMaxSteps(t *testing.T) {
	img := NewImage()
	if err := img.AddBytes([]byte{0x90, 0x90, 0xeb, 0xfc}, 0x3000, "loop", 0); err != nil {
		t.Fatal(err)
	}
	var enc ptpkt.Encoder
	for _, p := range []ptpkt.Packet{
		{Type: ptpkt.PktPSB},
		{Type: ptpkt.PktModeExec, CSL: true},
		{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: 0x3000},
		{Type: ptpkt.PktPSBEnd},
		// A TIP the loop never asks for: the decoder waits for an
		// indirect branch that never comes.
		{Type: ptpkt.PktTIP, IPC: ptpkt.IPSext48, IP: 0x3000},
	} {
		if err := enc.Append(&p); err != nil {
			t.Fatal(err)
		}
	}
	lines, blocks := compareBlockFlow(t, "loop", enc.Buf, img, &FlowConfig{MaxSteps: 100}, false)
	if blocks == 0 {
		t.Error("the block path was not used")
	}
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, "insn ") {
			n++
		}
	}
	last := lines[len(lines)-1]
	if n != 100 || !strings.Contains(last, CodeNoProgress.String()) {
		t.Errorf("%d instructions, then %q; want 100, then a no-progress error", n, last)
	}
}

// TestWindowOneJob: with one job, each window of a long trace is decoded
// straight into the sink (ptjit decode --calls -j 1 used to record a whole
// 64 MiB window for replay, ~50 bytes per trace byte); the flow is what
// the recorded and replayed decode gives, instructions and blocks alike.
func TestWindowOneJob(t *testing.T) {
	pt, img := loadSynthetic(t, "mid")
	run := func(direct bool, sink FlowSink) {
		err := ForEachWindow(BytesTrace(pt), 200<<10, func(w []byte, stop, base uint64) {
			s := &OffsetSink{Next: sink, Base: base}
			if direct {
				ParallelFlowWindow(w, stop, img, &FlowConfig{}, s, false, 1)
				return
			}
			ParallelFlowChunksWindow(w, stop, img, &FlowConfig{}, false, 1,
				func() FlowSink { return &flowRecorder{} },
				func(r FlowSink) { r.(*flowRecorder).replay(s) })
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var direct, recorded flowLog
	run(true, &direct)
	run(false, &recorded)
	if d := diffLines(direct.lines, recorded.lines); d != "" {
		t.Errorf("windows, one job, direct vs recorded: %s", d)
	}
	var blk blockLog
	run(true, &blk)
	if d := diffLines(blk.lines, recorded.lines); d != "" {
		t.Errorf("windows, one job, blocks vs recorded instructions: %s", d)
	}
	if blk.blocks == 0 || len(recorded.lines) < 2137044 {
		t.Errorf("%d blocks, %d lines", blk.blocks, len(recorded.lines))
	}
}

// TestBlockEntryLayout: the block cache's entry stays 12 bytes (one per
// byte of code: its size is the cache's footprint), and the end
// instruction's flags fit beside blockOK and blockTerm.
func TestBlockEntryLayout(t *testing.T) {
	if n := unsafe.Sizeof(blockEntry{}); n != 12 {
		t.Errorf("blockEntry is %d bytes, want 12", n)
	}
	if all := insnFlagIret | insnFlagVMPtrld; all&^blockInsn != 0 {
		t.Errorf("insn flags %#x overlap blockOK/blockTerm", all)
	}
}
