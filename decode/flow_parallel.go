package decode

import (
	"bytes"
	"sync"

	"github.com/ptjit/ptjit/ptpkt"
	"github.com/ptjit/ptjit/x86"
)

// Parallel decoding: a trace is cut at PSBs into chunks that are decoded on
// several goroutines, each with its own FlowDecoder and image copy; the
// results are handed to the sink in trace order.
//
// A chunk's decoder also reads the PSB+ header that starts the next chunk, so
// it walks up to the instruction where that header puts the next chunk's
// decoder: the concatenated output is what one decoder would produce, except
// that the return stack and cycle calibration restart at every chunk (a
// compressed return whose call precedes the PSB is reported as an error by
// the chunk that has it).
//
// Memory is bounded: at most 2*jobs chunks are decoded ahead of the sink.

// parallelChunk is the amount of trace per chunk; a chunk ends at the first
// PSB at or after this size.
const parallelChunk = 64 << 10

// recInsn is a recorded instruction; it holds no pointers so that large
// recordings cost the garbage collector nothing.
type recInsn struct {
	ip, off, tsc, target, itsc uint64
	sec                        uint32 // index into flowRecorder.secs
	size                       uint8
	class                      x86.InsnClass
	mode                       x86.ExecMode
	spec                       bool
	flags                      uint8 // FlowInsn.flags; for a block, its FirstSize
	blk                        bool  // a FlowBlock (class: its EndClass)
	n, blen                    uint32
}

// recExtra is a recorded event or error, replayed before insns[at].
type recExtra struct {
	at    int
	off   uint64
	ev    *Event
	err   *FlowError
	ekind ErrorKind
}

// flowRecorder is a FlowSink that keeps everything for later replay.
type flowRecorder struct {
	insns  []recInsn
	extras []recExtra
	secs   []*Section
	last   *Section
}

func (r *flowRecorder) Insn(in *FlowInsn, off, tsc uint64) {
	if in.Section != r.last || len(r.secs) == 0 {
		r.last = in.Section
		r.secs = append(r.secs, in.Section)
	}
	r.insns = append(r.insns, recInsn{ip: in.IP, off: off, tsc: tsc, target: in.Target, itsc: in.TSC,
		sec: uint32(len(r.secs) - 1), size: in.Size, class: in.Class, mode: in.Mode,
		spec: in.Speculative, flags: in.flags})
}

// Block implements BlockSink: a block is kept as one record.
func (r *flowRecorder) Block(b *FlowBlock, off, tsc uint64) {
	if b.Section != r.last || len(r.secs) == 0 {
		r.last = b.Section
		r.secs = append(r.secs, b.Section)
	}
	r.insns = append(r.insns, recInsn{ip: b.IP, off: off, tsc: tsc, target: b.Target, itsc: b.TSC,
		sec: uint32(len(r.secs) - 1), class: b.EndClass, mode: b.Mode, spec: b.Speculative, flags: b.FirstSize,
		blk: true, n: b.N, blen: uint32(b.End - b.IP)})
}

func (r *flowRecorder) Event(ev *Event, off uint64) {
	e := *ev
	r.extras = append(r.extras, recExtra{at: len(r.insns), off: off, ev: &e})
}

func (r *flowRecorder) Error(e *FlowError, kind ErrorKind) {
	c := *e
	r.extras = append(r.extras, recExtra{at: len(r.insns), err: &c, ekind: kind})
}

func (r *flowRecorder) replay(sink FlowSink) {
	x := 0
	var in FlowInsn
	var blk FlowBlock
	var relay BlockRelay
	var cnt *BlockCounts
	if bs := AsBlockSink(sink); bs != nil {
		cnt = blockCounts(bs)
	}
	for i := 0; i <= len(r.insns); i++ {
		for x < len(r.extras) && r.extras[x].at == i {
			e := &r.extras[x]
			if e.ev != nil {
				sink.Event(e.ev, e.off)
			} else {
				sink.Error(e.err, e.ekind)
			}
			x++
		}
		if i == len(r.insns) {
			break
		}
		ri := &r.insns[i]
		if ri.blk {
			blk = FlowBlock{IP: ri.ip, End: ri.ip + uint64(ri.blen), N: ri.n, FirstSize: ri.flags, EndClass: ri.class,
				Mode: ri.mode, Speculative: ri.spec, Section: r.secs[ri.sec], Target: ri.target, TSC: ri.itsc}
			if cnt != nil && cnt.skip(&blk) {
				continue
			}
			relay.Send(sink, &blk, ri.off, ri.tsc)
			continue
		}
		in = FlowInsn{IP: ri.ip, Size: ri.size, Mode: ri.mode, Class: ri.class, Speculative: ri.spec,
			Section: r.secs[ri.sec], Target: ri.target, TSC: ri.itsc, flags: ri.flags}
		sink.Insn(&in, ri.off, ri.tsc)
	}
}

func (r *flowRecorder) reset() { *r = flowRecorder{} }

// psbOffsets returns the offsets of all PSB packets in pt.
func psbOffsets(pt []byte) []uint64 {
	var out []uint64
	pat := ptpkt.PSBPattern[:]
	for i := 0; i+len(pat) <= len(pt); {
		j := bytes.Index(pt[i:], pat)
		if j < 0 {
			break
		}
		out = append(out, uint64(i+j))
		i += j + len(pat)
	}
	return out
}

// psbHeaderEnd returns the offset just after the PSB+ header starting at
// off (after its PSBEND or OVF), or len(pt) if the header does not end.
func psbHeaderEnd(pt []byte, off uint64, cfg *ptpkt.Config) uint64 {
	pd := ptpkt.NewPacketDecoder(pt, cfg)
	if pd.SyncSet(off) != nil {
		return uint64(len(pt))
	}
	var p ptpkt.Packet
	for {
		if pd.Next(&p) != nil {
			return uint64(len(pt))
		}
		if p.Type == ptpkt.PktPSBEnd || p.Type == ptpkt.PktOVF {
			return pd.Offset()
		}
	}
}

// psbTracing reports whether the PSB+ header at off says tracing is on
// (it holds a FUP). Chunks start only at such PSBs: where tracing is off,
// the decoder before the PSB knows where it was disabled, and the
// TIP.PGE after it, at that IP, "resumes" tracing (libipt's resumed); a
// fresh decoder would report it enabled, with the PSB+'s mode and
// interrupt flag as events. A per-CPU trace has such PSBs at every
// context switch.
func psbTracing(pt []byte, off uint64, cfg *ptpkt.Config) bool {
	pd := ptpkt.NewPacketDecoder(pt, cfg)
	if pd.SyncSet(off) != nil {
		return false
	}
	var p ptpkt.Packet
	for {
		if pd.Next(&p) != nil {
			return false
		}
		switch p.Type {
		case ptpkt.PktFUP:
			return true
		case ptpkt.PktPSBEnd, ptpkt.PktOVF:
			return false
		}
	}
}

type flowChunk struct {
	start, end uint64 // [start, end): this chunk's own bytes
	last       bool
	sink       FlowSink
	done       chan struct{}
}

// ParallelFlow decodes pt like RunFlow, on up to jobs goroutines, and
// hands the result to sink in trace order. The chunks' output is recorded
// and replayed; sinks that can work on several chunks at once should use
// ParallelFlowChunks, which also parallelizes the sink's own work.
func ParallelFlow(pt []byte, img *Image, cfg *FlowConfig, sink FlowSink, resync bool, jobs int) {
	ParallelFlowWindow(pt, uint64(len(pt)), img, cfg, sink, resync, jobs)
}

// ParallelFlowWindow is ParallelFlow for a window of a longer trace (see
// ForEachWindow): the flow is decoded up to stop, the offset of the PSB
// that starts the next window; pt goes on past stop at least to the end of
// that PSB's header, which tells where the window's last instructions
// lead. stop == len(pt) means the trace ends there.
func ParallelFlowWindow(pt []byte, stop uint64, img *Image, cfg *FlowConfig, sink FlowSink, resync bool, jobs int) {
	if jobs <= 1 {
		// One goroutine: straight into the sink. Recording a whole
		// window for replay would cost ~50 bytes per trace byte.
		if stop == uint64(len(pt)) {
			RunFlow(NewFlowDecoder(pt, img, cfg), sink, resync)
		} else {
			decodeChunk(pt, img, cfg, &flowChunk{start: 0, end: stop, sink: sink}, resync)
		}
		return
	}
	ParallelFlowChunksWindow(pt, stop, img, cfg, resync, jobs,
		func() FlowSink { return &flowRecorder{} },
		func(s FlowSink) {
			r := s.(*flowRecorder)
			r.replay(sink)
			r.reset()
		})
}

// ParallelFlowChunks decodes pt in chunks on up to jobs goroutines: each
// chunk is decoded into a fresh sink from newSink (on a worker goroutine),
// and emit is called with the chunks' sinks one at a time, in trace order.
// With jobs <= 1 (or a short trace) there is a single chunk.
func ParallelFlowChunks(pt []byte, img *Image, cfg *FlowConfig, resync bool, jobs int,
	newSink func() FlowSink, emit func(FlowSink)) {
	ParallelFlowChunksWindow(pt, uint64(len(pt)), img, cfg, resync, jobs, newSink, emit)
}

// ParallelFlowChunksWindow is ParallelFlowChunks for a window of a longer
// trace, decoded up to stop (see ParallelFlowWindow).
func ParallelFlowChunksWindow(pt []byte, stop uint64, img *Image, cfg *FlowConfig, resync bool, jobs int,
	newSink func() FlowSink, emit func(FlowSink)) {
	if cfg == nil {
		cfg = &FlowConfig{}
	}
	final := stop == uint64(len(pt))
	var psbs []uint64
	if jobs > 1 && stop >= 2*parallelChunk {
		// Only to cut chunks: one core decodes the window whole.
		psbs = psbOffsets(pt[:stop])
	}
	if jobs <= 1 || len(psbs) < 2 || stop < 2*parallelChunk {
		s := newSink()
		if final {
			RunFlow(NewFlowDecoder(pt, img, cfg), s, resync)
		} else {
			c := &flowChunk{start: 0, end: stop, sink: s}
			decodeChunk(pt, img, cfg, c, resync)
		}
		emit(s)
		return
	}
	// Anything before the first PSB is unusable to any decoder; RunFlow
	// skips it the same way.
	var chunks []*flowChunk
	start := psbs[0]
	for _, p := range psbs[1:] {
		if p-start >= parallelChunk && psbTracing(pt, p, &cfg.Packet) {
			chunks = append(chunks, &flowChunk{start: start, end: p})
			start = p
		}
	}
	chunks = append(chunks, &flowChunk{start: start, end: stop, last: final})
	for _, c := range chunks {
		c.done = make(chan struct{})
	}
	work := make(chan *flowChunk)
	var wg sync.WaitGroup
	for w := 0; w < jobs; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := img.Clone()
			for c := range work {
				c.sink = newSink()
				decodeChunk(pt, local, cfg, c, resync)
				close(c.done)
			}
		}()
	}
	// The feeder stays at most 2*jobs chunks ahead of the consumer.
	window := make(chan struct{}, 2*jobs)
	go func() {
		for _, c := range chunks {
			window <- struct{}{}
			work <- c
		}
		close(work)
	}()
	for _, c := range chunks {
		<-c.done
		emit(c.sink)
		c.sink = nil
		<-window
	}
	wg.Wait()
}

// decodeChunk decodes one chunk into c.rec.
func decodeChunk(pt []byte, img *Image, cfg *FlowConfig, c *flowChunk, resync bool) {
	limit := c.end
	if !c.last {
		limit = psbHeaderEnd(pt, c.end, &cfg.Packet)
	}
	d := NewFlowDecoder(pt[:limit], img, cfg)
	if c.start > 0 {
		// SyncForward searches after the current position: step back
		// so it finds the PSB at c.start.
		d.q.pd.SyncSet(c.start - 1)
	}
	sink := c.sink
	if r, ok := sink.(*flowRecorder); ok {
		r.insns = make([]recInsn, 0, 2*(c.end-c.start))
	}
	if !c.last {
		sink = &chunkSink{next: sink}
	}
	RunFlow(d, sink, resync)
}

// chunkSink drops the "end of trace" a non-final chunk sees at its end.
type chunkSink struct {
	next  FlowSink
	relay BlockRelay
}

func (s *chunkSink) Insn(in *FlowInsn, off, tsc uint64)  { s.next.Insn(in, off, tsc) }
func (s *chunkSink) Block(b *FlowBlock, off, tsc uint64) { s.relay.Send(s.next, b, off, tsc) }
func (s *chunkSink) TakesBlocks() bool                   { return s.relay.Takes(s.next) }

// BlockCounts implements BlockCounter: next's, if it is one.
func (s *chunkSink) BlockCounts() (BlockCounts, bool) {
	if bc, ok := s.next.(BlockCounter); ok && s.relay.Takes(s.next) {
		return bc.BlockCounts()
	}
	return BlockCounts{}, false
}
func (s *chunkSink) Event(ev *Event, off uint64) {
	if ev.Type == EvEndOfTrace {
		return
	}
	s.next.Event(ev, off)
}
func (s *chunkSink) Error(e *FlowError, kind ErrorKind) { s.next.Error(e, kind) }
