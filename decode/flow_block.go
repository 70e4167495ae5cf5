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

// maxBlockInsns bounds a block (blockEntry.n is 16 bits wide).
const maxBlockInsns = 1<<16 - 1

// FlowBlock is a run of N straight-line instructions (all of class
// x86.ClassOther, none binding an event), the first at IP, the last ending
// at End, all in Section and executed in Mode. Consecutive blocks and
// instructions follow each other in the flow exactly as Insn calls would.
type FlowBlock struct {
	IP          uint64
	End         uint64 // the address after the last instruction
	N           uint32 // instructions, ≥ 1
	FirstSize   uint8  // size of the first instruction
	Mode        x86.ExecMode
	Speculative bool
	Section     *Section
	TSC         uint64 // as FlowInsn.TSC, the same for all N
}

// First returns the block's first instruction.
func (b *FlowBlock) First() FlowInsn {
	return FlowInsn{IP: b.IP, Size: b.FirstSize, Mode: b.Mode, Class: x86.ClassOther,
		Speculative: b.Speculative, Section: b.Section, TSC: b.TSC}
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
		off := ip - s.Vaddr
		if err := x86.DecodeInsn(s.Data[off:], ip, b.Mode, &x); err != nil {
			// The decoder decoded these bytes when it built the
			// block; they cannot have changed.
			panic("decode: FlowBlock.Insns: bytes at 0x" + strconv.FormatUint(ip, 16) + " no longer decode: " + err.Error())
		}
		in.IP, in.Size, in.flags = ip, x.Len, insnFlags(&x)
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
// by instruction (for pass-through sinks).
func SendBlock(next FlowSink, b *FlowBlock, off, tsc uint64) {
	if bs := AsBlockSink(next); bs != nil {
		bs.Block(b, off, tsc)
		return
	}
	b.Insns(func(in *FlowInsn) { next.Insn(in, off, tsc) })
}

// blockEntry is the cached run starting at one offset of a section.
type blockEntry struct {
	n     uint16 // instructions (0: the offset starts no run)
	first uint8  // size of the first instruction
	mode  x86.ExecMode
	ok    bool   // computed (for mode)
	bytes uint32 // length of the run
}

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
		c.pages[pg] = p
	}
	return &p[off&(1<<cachePageBits-1)]
}

// section returns the section d.ip is read from at the current time (as
// decodeAt does), and whether a block may be used there: every address of
// a run inside it resolves to it until the trace is consumed again.
func (d *FlowDecoder) blockSection() (*Section, bool) {
	s := d.sec
	if len(d.img.versions) == 0 {
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

// nextBlock steps over the run of straight-line instructions at d.ip and
// describes it in b, if the decoder is quiet (enabled, no event pending)
// and such a run starts there; otherwise it changes nothing and returns
// false, and Next decodes the next instruction. Afterwards the decoder is
// exactly where len(run) calls of Next would have left it.
func (d *FlowDecoder) nextBlock(b *FlowBlock) bool {
	if !d.enabled || d.processEvent || d.status&stEventPending != 0 {
		return false
	}
	s, ok := d.blockSection()
	if !ok {
		return false
	}
	off := d.ip - s.Vaddr
	be := s.blocks.entry(off, len(s.Data))
	if be == nil {
		return false
	}
	if !be.ok || be.mode != d.mode {
		buildBlock(s, off, d.mode, be)
	}
	n := uint64(be.n)
	if n == 0 || d.steps+n > d.maxSteps {
		return false
	}
	*b = FlowBlock{IP: d.ip, End: d.ip + uint64(be.bytes), N: uint32(n), FirstSize: be.first, Mode: d.mode,
		Speculative: d.speculative, Section: s, TSC: d.q.lastTime.tscOrZero()}
	d.ip = b.End
	d.icnt += n
	d.steps += n
	return true
}

// buildBlock computes the run at offset off of s in mode into be, reading
// (and filling) the section's instruction cache.
func buildBlock(s *Section, off uint64, mode x86.ExecMode, be *blockEntry) {
	var n uint16
	var first uint8
	o := off
	for n < maxBlockInsns && o < uint64(len(s.Data)) {
		e := s.cache.entry(o, len(s.Data))
		var size uint8
		var class x86.InsnClass
		if e != nil && e.size != 0 && e.mode == mode {
			size, class = e.size, e.class
		} else {
			var x x86.Insn
			code := s.Data[o:]
			ip := s.Vaddr + o
			if err := x86.DecodeInsn(code, ip, mode, &x); err != nil {
				// Perhaps an instruction Next classifies, or one
				// that continues in the next section: Next's job.
				if !FixupInsn(code, ip, mode, &x) {
					break
				}
			} else {
				FixupInsn(code, ip, mode, &x)
			}
			size, class = x.Len, x.Class
			var disp int64
			if x.Class.IsDirect() {
				disp = int64(x.Target - ip)
			}
			if e != nil && o+uint64(x.Len) <= uint64(len(s.Data)) && disp == int64(int32(disp)) {
				*e = insnEntry{size: x.Len, class: x.Class, mode: mode, flags: insnFlags(&x), disp: int32(disp)}
			}
		}
		if class != x86.ClassOther || o+uint64(size) > uint64(len(s.Data)) {
			break
		}
		if n == 0 {
			first = size
		}
		n++
		o += uint64(size)
	}
	*be = blockEntry{n: n, first: first, mode: mode, ok: true, bytes: uint32(o - off)}
}
