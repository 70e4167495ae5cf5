package decode

import (
	"strconv"

	"github.com/ptjit/ptjit/x86"
)

// The block fast path (libipt's pt_blk_decoder idea, inside the flow
// layer): between two branches the decoder needs nothing from the trace,
// so a run of straight-line instructions (class x86.ClassOther) can be
// stepped over at once when no event is pending. Each section keeps, per
// byte offset and execution mode, the length of the run that starts there
// (instructions and bytes), computed once; the run stops before the first
// instruction of another class (a branch, ptwrite, mov to CR3), before an
// instruction that does not fit in the section or does not decode (the
// per-instruction path handles those), or after maxBlockInsns.
//
// The cache lives in the Section, so it is keyed by code version: a JIT
// region's new version is a different Section (its own TSC validity), and
// its blocks are computed from its own bytes; the old version's blocks are
// never consulted for it. File-backed code is cached per mapping (one
// Section per mapping). A block is only used where the section is the one
// every address of the run resolves to: in an image without versions, or in
// a version valid at the current time, or in a static section no version
// overlaps. Anything else goes through Next, instruction by instruction.

// maxBlockInsns bounds a block's run (blockEntry.n is 8 bits wide; a
// longer run is several blocks), so its length fits blockEntry.bytes.
const maxBlockInsns = 1<<8 - 1

// FlowBlock is a basic block of the decoded flow: N instructions from IP
// to End, all in Section and executed in Mode, of which all but the last
// are straight-line code (class x86.ClassOther). The last one is the
// block's end: a branch (or another instruction the trace or an event may
// concern) of class EndClass, already followed, with its direct target in
// Target; EndClass is x86.ClassOther when the run stopped before one
// (section end, an instruction Next must decode, a size limit), and then
// the next instruction comes in its own Insn or block. Consecutive blocks
// and instructions follow each other in the flow exactly as Insn calls
// would.
type FlowBlock struct {
	IP          uint64
	End         uint64 // the address after the last instruction
	N           uint32 // instructions, ≥ 1
	FirstSize   uint8  // size of the first instruction
	EndClass    x86.InsnClass
	Mode        x86.ExecMode
	Speculative bool
	Section     *Section
	Target      uint64 // the last instruction's direct branch target
	TSC         uint64 // as FlowInsn.TSC, the same for all N
}

// First returns the block's first instruction.
func (b *FlowBlock) First() FlowInsn {
	in := FlowInsn{IP: b.IP, Size: b.FirstSize, Mode: b.Mode, Class: x86.ClassOther,
		Speculative: b.Speculative, Section: b.Section, TSC: b.TSC}
	if b.N == 1 {
		in.Class, in.Target = b.EndClass, b.Target
	}
	return in
}

// Insns calls fn with each of the block's instructions in order (the
// per-instruction view, for sinks that need it). It decodes the section's
// bytes again and touches no decoder cache, so it may run on another
// goroutine than the decoder that produced b.
func (b *FlowBlock) Insns(fn func(in *FlowInsn)) {
	in := b.First()
	s := b.Section
	ip := b.IP
	for i := uint32(0); i < b.N; i++ {
		var x x86.Insn
		code := s.Data[ip-s.Vaddr:]
		if err := x86.DecodeInsn(code, ip, b.Mode, &x); err != nil {
			if !FixupInsn(code, ip, b.Mode, &x) {
				// The decoder decoded these bytes when it built
				// the block; they cannot have changed.
				panic("decode: FlowBlock.Insns: bytes at 0x" + strconv.FormatUint(ip, 16) + " no longer decode: " + err.Error())
			}
		} else {
			FixupInsn(code, ip, b.Mode, &x)
		}
		in.IP, in.Size, in.Class, in.Target, in.flags = ip, x.Len, x.Class, x.Target, insnFlags(&x)
		fn(&in)
		ip += uint64(x.Len)
	}
}

// BlockSink is a FlowSink that also takes whole blocks of straight-line
// instructions: Block(b) stands for b.N Insn calls, each with the same off
// and tsc. RunFlow and the parallel decoders use it when AsBlockSink says
// the sink takes blocks; output that needs every instruction (disassembly,
// ptxed text, JSON per instruction) simply does not implement it.
type BlockSink interface {
	FlowSink
	Block(b *FlowBlock, off, tsc uint64)
}

// BlockCounter is a BlockSink that needs to see only some blocks: of the
// others RunFlow only adds the instructions (and the end class) to the
// counters it gives, one Block call (an interface call, a fifth of the time
// of ptjit decode --stat) fewer per block. --stat needs no block at all
// (its counts are the counters); the call tree only the blocks that end in
// a call or return and the block after one (while its state says so).
// Skipped blocks are still decoded exactly; only their hand-over is saved.
type BlockCounter interface {
	BlockSink
	// BlockCounts returns the counters, or ok false if every block must
	// be handed over. It is asked once, before blocks flow.
	BlockCounts() (c BlockCounts, ok bool)
}

// BlockCounts are a BlockCounter's counters and what it wants to see. A
// block is handed over (Block) if *Want is nonzero or WantEnd[its end
// class] is set; otherwise its N is added to *Insns and, if Classes is not
// nil, Classes[its end class] is incremented.
type BlockCounts struct {
	Insns   *uint64
	Classes *[256]uint64
	Want    *uint8
	WantEnd *[256]bool
}

// skip reports whether b need not be handed over, and counts it if so.
func (c *BlockCounts) skip(b *FlowBlock) bool {
	if *c.Want != 0 || c.WantEnd[b.EndClass] {
		return false
	}
	*c.Insns += uint64(b.N)
	if c.Classes != nil {
		c.Classes[b.EndClass]++
	}
	return true
}

// blockCounts returns bs's counters if it is a BlockCounter that offers
// them (with Want and WantEnd never nil), else nil.
func blockCounts(bs BlockSink) *BlockCounts {
	bc, ok := bs.(BlockCounter)
	if !ok {
		return nil
	}
	c, ok := bc.BlockCounts()
	if !ok || c.Insns == nil {
		return nil
	}
	if c.Want == nil {
		c.Want = new(uint8)
	}
	if c.WantEnd == nil {
		c.WantEnd = new([256]bool)
	}
	return &c
}

// BlockTaker is implemented by pass-through sinks that take blocks only
// when the sink behind them does.
type BlockTaker interface {
	TakesBlocks() bool
}

// AsBlockSink returns s as a BlockSink if it takes blocks, or nil.
func AsBlockSink(s FlowSink) BlockSink {
	bs, ok := s.(BlockSink)
	if !ok {
		return nil
	}
	if t, ok := s.(BlockTaker); ok && !t.TakesBlocks() {
		return nil
	}
	return bs
}

// SendBlock hands b to next: whole if next takes blocks, else instruction
// by instruction. Pass-through sinks should keep a BlockRelay instead,
// which asks next only once.
func SendBlock(next FlowSink, b *FlowBlock, off, tsc uint64) {
	var r BlockRelay
	r.Send(next, b, off, tsc)
}

// BlockRelay is what a pass-through sink keeps to hand blocks on to the
// sink behind it: it finds out once whether that sink takes blocks (a type
// assertion per block cost a fifth of the time of ptjit decode --stat).
// The sink behind it must not change once blocks flow.
type BlockRelay struct {
	bs   BlockSink
	done bool
}

func (r *BlockRelay) resolve(next FlowSink) {
	if !r.done {
		r.bs, r.done = AsBlockSink(next), true
	}
}

// Takes reports whether next takes blocks (for BlockTaker).
func (r *BlockRelay) Takes(next FlowSink) bool {
	r.resolve(next)
	return r.bs != nil
}

// Send hands b to next: whole if next takes blocks, else instruction by
// instruction.
// It is small enough to inline: the usual case, a resolved block taker,
// is one test and one call.
func (r *BlockRelay) Send(next FlowSink, b *FlowBlock, off, tsc uint64) {
	if r.bs != nil {
		r.bs.Block(b, off, tsc)
		return
	}
	r.sendSlow(next, b, off, tsc)
}

// sendSlow is Send before next is resolved, or to a sink that does not
// take blocks.
func (r *BlockRelay) sendSlow(next FlowSink, b *FlowBlock, off, tsc uint64) {
	r.resolve(next)
	if r.bs != nil {
		r.bs.Block(b, off, tsc)
		return
	}
	b.Insns(func(in *FlowInsn) { next.Insn(in, off, tsc) })
}

// blockEntry is the cached block starting at one offset of a section: the
// run of straight-line instructions and the instruction that ends it.
// There is one per byte offset of a section, so its size is the cache's
// footprint: 12 bytes (libipt's block cache entries are 8), and where a
// trace jumps around a program of 64 KiB the load of the entry is the
// decoder's costliest instruction.
type blockEntry struct {
	n      uint8 // straight-line instructions (class other) before the end
	first  uint8 // size of the first instruction
	tsize  uint8
	tclass x86.InsnClass
	mode   x86.ExecMode
	flags  uint8  // blockOK, blockTerm and the end instruction's insnFlag*
	bytes  uint16 // length of the run (the end instruction starts there)
	tdisp  int32  // the end instruction's direct target - its address
}

// blockEntry.flags beside the end instruction's insnFlag* bits.
const (
	blockOK   = 1 << 7 // computed (for mode)
	blockTerm = 1 << 6 // the run ends at an instruction of another class, cached here
	blockInsn = blockTerm - 1
)

type blockCache struct {
	pages []*[1 << cachePageBits]blockEntry
}

// entry returns the cache slot for offset off in a section of size n.
func (c *blockCache) entry(off uint64, n int) *blockEntry {
	pg := off >> cachePageBits
	if c.pages == nil {
		c.pages = make([]*[1 << cachePageBits]blockEntry, (n+(1<<cachePageBits)-1)>>cachePageBits)
	}
	if pg >= uint64(len(c.pages)) {
		return nil
	}
	p := c.pages[pg]
	if p == nil {
		p = new([1 << cachePageBits]blockEntry)
		p[0].flags, p[len(p)-1].flags = 0, 0
		c.pages[pg] = p
	}
	return &p[off&(1<<cachePageBits-1)]
}

// section returns the section d.ip is read from at the current time (as
// decodeAt does), and whether a block may be used there: every address of
// a run inside it resolves to it until the trace is consumed again.
func (d *FlowDecoder) blockSection() (*Section, bool) {
	s := d.sec
	if d.img.nver == 0 {
		if s == nil || d.ip-s.Vaddr >= uint64(len(s.Data)) {
			if s = d.img.Lookup(d.ip, 0); s == nil {
				return nil, false
			}
			d.sec = s
		}
		return s, true
	}
	tsc := d.q.lastTime.tscOrZero()
	if s == nil || d.ip-s.Vaddr >= uint64(len(s.Data)) || s.shadowed || !s.validAt(tsc) {
		if s = d.img.Lookup(d.ip, tsc); s == nil {
			return nil, false
		}
		d.sec = s
	}
	return s, !s.shadowed && s.validAt(tsc)
}

// nextBlock decodes the block at d.ip if the decoder is quiet (enabled,
// no event pending) and the block is cached or can be: the run of
// straight-line code (stepped over at once) and, if it is cached with it,
// the instruction that ends the run, which is followed exactly as Next
// would (in receives it). It returns false, changing nothing, where Next
// must decode the next instruction instead. Otherwise st is what Next would
// have returned for the block's last instruction: status flags, or a
// negative Code for an error at the end instruction in (b.EndClass is
// then x86.ClassOther: b holds the run before it, and b.N may be 0).
func (d *FlowDecoder) nextBlock(b *FlowBlock, in *FlowInsn) (ok bool, st int) {
	if !d.enabled || d.processEvent || d.status&stEventPending != 0 {
		return false, 0
	}
	s := d.sec
	if s == nil || d.ip-s.Vaddr >= uint64(len(s.Data)) ||
		d.img.nver != 0 && (s.shadowed || !s.validAt(d.q.lastTime.tscOrZero())) {
		if s, ok = d.blockSection(); !ok {
			return false, 0
		}
	}
	off := d.ip - s.Vaddr
	var be *blockEntry
	if pg := off >> cachePageBits; s == d.bpageSec && pg == d.bpageIdx {
		be = &d.bpage[off&(1<<cachePageBits-1)]
	} else {
		if be = s.blocks.entry(off, len(s.Data)); be == nil {
			return false, 0
		}
		d.bpageSec, d.bpageIdx, d.bpage = s, pg, s.blocks.pages[pg]
	}
	if be.flags&blockOK == 0 || be.mode != d.mode {
		buildBlock(s, off, d.mode, be)
	}
	n := uint64(be.n)
	term := be.flags&blockTerm != 0 && d.steps+n+1 <= d.maxSteps
	if !term && (n == 0 || d.steps+n > d.maxSteps) {
		return false, 0
	}
	tsc := d.q.lastTime.tscOrZero()
	ip := d.ip
	// Field by field, and the pointer only when it changes: a composite
	// literal assignment to *b costs a typed copy with write barriers,
	// a quarter of the time on a trace of short blocks (see BENCHMARKS.md).
	b.IP, b.End, b.N, b.FirstSize = ip, ip+uint64(be.bytes), uint32(n), be.first
	b.EndClass, b.Mode, b.Speculative, b.Target, b.TSC = x86.ClassOther, d.mode, d.speculative, 0, tsc
	if b.Section != s {
		b.Section = s
	}
	d.ip = b.End
	d.icnt += n
	d.steps += n
	if !term {
		return true, d.flowStatus(0)
	}
	// The end instruction, as Next decodes a quiet one, followed by
	// Next's own rule (follow); filled into in only where something
	// reads it (an event or an error bound to it), not for the usual
	// jump, call or cached TNT bit.
	end, next := d.ip, d.ip+uint64(be.tsize)
	var target uint64
	if be.tclass.IsDirect() {
		target = end + uint64(int64(be.tdisp))
	}
	d.steps++
	// follow's rules; the usual kinds (the libxdc lesson: a hot loop
	// is a handful of branch kinds) put together from its helpers here,
	// as follow does, without the call.
	switch be.tclass {
	case x86.ClassJump:
		d.pass(be.tsize)
		d.ip = target
	case x86.ClassCall:
		d.pass(be.tsize)
		d.call(target)
	case x86.ClassCondJump:
		d.pass(be.tsize)
		taken, qst := d.askCond()
		if qst >= 0 {
			qst = d.queried(d.ip, qst)
		}
		st = d.takeCond(taken, qst, target)
	default:
		st = d.follow(be.tclass, be.tsize, target)
	}
	if st < 0 {
		fillEnd(in, be, s, end, target, d.mode, d.speculative, tsc)
		return true, st
	}
	if n == 0 {
		b.FirstSize = be.tsize
	}
	b.N++
	b.End = next
	b.EndClass, b.Target = be.tclass, target
	if !d.processEvent && d.status&stEventPending == 0 {
		return true, d.flowStatus(0)
	}
	fillEnd(in, be, s, end, target, b.Mode, b.Speculative, tsc)
	st = d.checkIPEvent(in)
	if st < 0 {
		// Next reports the instruction, then the error.
		b.N--
		b.End = in.IP
		b.EndClass, b.Target = x86.ClassOther, 0
		if n == 0 {
			b.FirstSize = 0
		}
	}
	return true, st
}

// fillEnd sets in to a block's end instruction at ip (entry be of section
// s), as Next would report it.
func fillEnd(in *FlowInsn, be *blockEntry, s *Section, ip, target uint64, mode x86.ExecMode, spec bool, tsc uint64) {
	in.IP, in.Size, in.Mode, in.Class, in.Speculative = ip, be.tsize, mode, be.tclass, spec
	in.TSC, in.flags, in.Target = tsc, be.flags&blockInsn, target
	if in.Section != s {
		in.Section = s
	}
}

// buildBlock computes the block at offset off of s in mode into be. It
// decodes the instructions itself rather than through the section's
// instruction cache: a block is built once per entry point, and a
// decode that runs on blocks (--stat, --calls) then never allocates the
// instruction cache, whose pages of fresh memory cost more in page faults
// than the decoding they would save (BENCHMARKS.md, 2026-11-26).
func buildBlock(s *Section, off uint64, mode x86.ExecMode, be *blockEntry) {
	*be = blockEntry{mode: mode, flags: blockOK}
	o := off
	for be.n < maxBlockInsns && o < uint64(len(s.Data)) {
		code := s.Data[o:]
		ip := s.Vaddr + o
		var x x86.Insn
		if err := x86.DecodeInsn(code, ip, mode, &x); err != nil {
			// Perhaps an instruction that continues in the next
			// section: Next's job.
			if !FixupInsn(code, ip, mode, &x) {
				break
			}
		} else {
			FixupInsn(code, ip, mode, &x)
		}
		if o+uint64(x.Len) > uint64(len(s.Data)) {
			break
		}
		if be.n == 0 {
			be.first = x.Len
		}
		if x.Class != x86.ClassOther {
			disp := int64(x.Target - ip)
			if x.Class.IsDirect() && disp != int64(int32(disp)) {
				break
			}
			be.tsize, be.tclass = x.Len, x.Class
			if x.Class.IsDirect() {
				be.tdisp = int32(disp)
			}
			be.flags |= blockTerm | insnFlags(&x)
			break
		}
		be.n++
		o += uint64(x.Len)
	}
	be.bytes = uint16(o - off)
}
