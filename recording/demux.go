package recording

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/ptpkt"
)

// DemuxError is what demultiplexing a per-CPU trace could not attribute
// to a thread: a stretch of a CPU's trace whose thread the sideband does
// not tell (lost records, no switch record, a time where no traced thread
// runs), reported with the CPU, the offset in that CPU's queue and the
// time, never guessed.
type DemuxError struct {
	CPU    int
	Offset uint64 // in the CPU's queue
	End    uint64 // end of the stretch left out, in the CPU's queue
	TSC    uint64
	Reason string
}

func (e *DemuxError) Error() string {
	return fmt.Sprintf("cpu %d trace offset %#x-%#x (tsc %#x): not attributed to a thread: %s", e.CPU, e.Offset, e.End, e.TSC, e.Reason)
}

// piece is a stretch [from, to) of one CPU queue's trace between two cut
// points (a PSB, or the packet after a TIP.PGD), with the time at its
// first IP packet and what IP compression needs to decode it on its own.
type piece struct {
	q        *perf.PerfAuxQueue
	from, to uint64
	tsc      uint64
	haveTSC  bool
	psb      bool // starts with a PSB: the decoder's packet state restarts there
	ipPacket bool // holds a packet with an IP (TIP.PGE, FUP, TIP): it may run instructions
	// The first IP packet, when it is compressed against the CPU's last
	// IP (which another thread's packets may have set): its offset, size
	// and the full form that decodes it anywhere.
	fixOff  uint64
	fixLen  int
	fixFull []byte
	// gap: the AUX data has a gap right after the piece (auxGap.at); the
	// decoder must not read on as if the next bytes followed.
	gap *auxGap
}

// auxGap is where a CPU queue's AUX data is not contiguous: perf lost
// trace there (an AUXTRACE buffer that does not continue the previous
// one, an AUX record flagged TRUNCATED). Pass 1 ends the piece before it
// at its last whole packet (end) and resumes at the first PSB after it
// (resume); the joined stream of the piece's thread gets an OVF there
// (the decoder reports an overflow: trace lost, and resyncs), and
// [end, resume) is reported as a DemuxError.
type auxGap struct {
	at          uint64 // queue offset where the bytes stop following each other
	why         string
	end, resume uint64
	tsc         uint64 // time at end
	haveTSC     bool
}

// splitQueue is pass 1: it walks the packets of a CPU queue (no
// instruction decoding) and cuts it into pieces, keeping the packet-layer
// state a piece needs (last IP, time).
//
// Most of a queue is short TNTs, PADs and MTCs, which pass 1 steps over
// without decoding. The time of a piece is needed only at its first IP
// packet, so MTCs are applied lazily: tm is the time at offset tmAt and
// the MTCs between tmAt and the walk's position are pending, applied
// (replayMTC) only when a piece needs its time. TSC, TMA and CBR are
// applied where they are met: a TSC resets what the pending MTCs would
// have changed, a TMA changes the time only right after a TSC (where
// MTCs are ignored), and a CBR changes nothing an MTC reads. Inside a BBP
// block (where an even byte may start a BIP) nothing is pending: every
// packet is decoded.
//
// It reads the queue in windows of splitWindow bytes through *buf, which
// the walks of all queues share: the memory of one window is all it
// touches.
func splitQueue(q *perf.PerfAuxQueue, tr decode.TraceReader, cfg *ptpkt.Config, buf *[]byte, gaps []*auxGap) ([]piece, error) {
	var out []piece
	var last ptpkt.LastIP
	var tm ptpkt.Time
	var tmAt uint64 // offset in the queue up to which tm holds the MTCs
	cur := piece{q: q}
	cut := func(at uint64, psb bool) {
		if at > cur.from {
			cur.to = at
			out = append(out, cur)
		}
		cur = piece{q: q, from: at, psb: psb}
	}
	var walked uint64  // where the walk of the current segment stopped
	var resumed uint64 // where it started
	walk := func(pt []byte, stop, base uint64) {
		buf := pt[:stop]
		d := ptpkt.NewPacketDecoder(buf, cfg)
		walked = base
		// catchUp applies the pending MTCs up to off.
		catchUp := func(off uint64) {
			if off > tmAt {
				replayMTC(&tm, buf, tmAt-base, off-base, cfg)
				tmAt = off
			}
		}
		defer func() { catchUp(base + stop) }()
		var p ptpkt.Packet
		if err := d.SyncForward(); err != nil {
			walked = base + stop
			if base == resumed {
				resumed = walked
			}
			return
		}
		if base == resumed {
			resumed = base + d.Offset()
		}
		tmAt = max(tmAt, base+d.Offset())
		inBlock := false // between BBP and BEP: even bytes are BIPs, not TNT
		for {
			if !inBlock {
				i := d.Offset()
				if j := skipQuiet(buf, i); j != i {
					d.SyncSet(j)
				}
			}
			off := base + d.Offset()
			walked = off
			if err := d.Next(&p); err != nil {
				if ptpkt.IsEOS(err) || d.SyncForward() != nil {
					return
				}
				continue
			}
			end := base + d.Offset()
			switch p.Type {
			case ptpkt.PktBBP:
				catchUp(off)
				inBlock = true
			case ptpkt.PktBEP, ptpkt.PktOVF:
				inBlock = false
			case ptpkt.PktPSB:
				inBlock = false
				cut(off, true)
				last.Reset()
			case ptpkt.PktTSC:
				tm.UpdateTSC(&p, cfg)
				tmAt = end
			case ptpkt.PktTMA:
				if tm.UpdateTMA(&p, cfg) == nil {
					tmAt = end
				}
			case ptpkt.PktMTC:
				if inBlock {
					tm.UpdateMTC(&p, cfg)
				}
			case ptpkt.PktCBR:
				tm.UpdateCBR(&p, cfg)
			case ptpkt.PktTIP, ptpkt.PktTIPPGE, ptpkt.PktTIPPGD, ptpkt.PktFUP:
				if p.Type != ptpkt.PktTIPPGD && !cur.ipPacket {
					cur.ipPacket = true
					catchUp(off)
					t, _, _, err := tm.TSC()
					cur.tsc, cur.haveTSC = t, err == nil
					if !cur.psb && (p.IPC == ptpkt.IPUpdate16 || p.IPC == ptpkt.IPUpdate32 || p.IPC == ptpkt.IPUpdate48) {
						prev := last
						if prev.Update(p.IPC, p.IP) == nil {
							ip, err := prev.IP()
							if err == nil {
								full := ptpkt.Packet{Type: p.Type, IPC: ptpkt.IPFull, IP: ip}
								if b, err := ptpkt.AppendPacket(nil, &full); err == nil {
									cur.fixOff, cur.fixLen, cur.fixFull = off, int(end-off), b
								}
							}
						}
					}
				}
				last.Update(p.IPC, p.IP)
				if p.Type == ptpkt.PktTIPPGD {
					cut(end, false)
				}
			}
			if inBlock {
				tmAt = end // nothing pending inside a block
			}
		}
	}
	// The queue is walked in segments between its gaps; at a gap the
	// walk ends (a packet cut by it is left out) and starts afresh at
	// the next PSB, without the time and last IP of before.
	from := uint64(0)
	for i := 0; i <= len(gaps); i++ {
		to := uint64(tr.Size())
		if i < len(gaps) {
			to = gaps[i].at
		}
		var err error
		resumed, walked = from, from
		*buf, err = decode.ForEachWindowBuf(decode.TraceSection(tr, int64(from), int64(to-from)), splitWindow, *buf,
			func(pt []byte, stop, base uint64) { walk(pt, stop, from+base) })
		if err != nil {
			return nil, err
		}
		if i > 0 {
			gaps[i-1].resume = resumed
		}
		if i == len(gaps) {
			break
		}
		g := gaps[i]
		g.end = max(walked, cur.from)
		t, _, _, err := tm.TSC() // the window's end caught up with the MTCs
		g.tsc, g.haveTSC = t, err == nil
		if g.end > cur.from {
			cut(g.end, false)
			out[len(out)-1].gap = g
		}
		cur = piece{q: q, from: to}
		tm, tmAt, from = ptpkt.Time{}, to, to
		last.Reset()
	}
	cut(uint64(tr.Size()), false)
	return out, nil
}

// auxGaps returns the gaps of q's AUX data, in queue order: where an
// AUXTRACE buffer does not continue the previous one, and where an AUX
// record of q's CPU says the data was truncated after it (and more
// follows).
func (r *Recording) auxGaps(q *perf.PerfAuxQueue) []*auxGap {
	var gaps []*auxGap
	for i, b := range q.Buffers {
		if b.Gap && b.Size > 0 {
			p := q.Buffers[i-1]
			gaps = append(gaps, &auxGap{at: uint64(b.StreamPos), why: fmt.Sprintf("AUX data lost: the AUXTRACE buffer at %#x starts at AUX offset %#x, the one before ends at %#x",
				b.RecordOffset, b.AuxOffset, p.AuxOffset+p.Size)})
		}
	}
	for i := range r.Trace.Sideband {
		rec := &r.Trace.Sideband[i]
		if rec.Type != perf.RecAux || rec.Aux.Flags&perf.AuxFlagTruncated == 0 || rec.ID.Valid&perf.SampleCPU == 0 || int32(rec.ID.CPU) != q.CPU {
			continue
		}
		end := rec.Aux.Offset + rec.Aux.Size
		for _, b := range q.Buffers {
			if end >= b.AuxOffset && end < b.AuxOffset+b.Size {
				gaps = append(gaps, &auxGap{at: uint64(b.StreamPos) + end - b.AuxOffset,
					why: fmt.Sprintf("AUX data lost: the AUX record at %#x is flagged truncated", rec.Offset)})
				break
			}
		}
	}
	sort.SliceStable(gaps, func(i, j int) bool { return gaps[i].at < gaps[j].at })
	// One gap per place (a truncation where a buffer also jumps).
	out := gaps[:0]
	for _, g := range gaps {
		if len(out) > 0 && out[len(out)-1].at == g.at {
			continue
		}
		out = append(out, g)
	}
	return out
}

// ovf is an OVF packet, what the joined stream of a thread holds where
// its trace has a gap.
var ovf = []byte{0x02, 0xf3}

// splitWindow is the most bytes of a CPU queue pass 1 holds at once (a
// variable for tests).
var splitWindow = 256 << 10

// skipQuiet returns the offset of the first packet at or after i (a
// packet boundary outside a BBP block) that pass 1 must decode: it steps
// over short TNTs (even bytes but 0x02, the extended opcode), PADs (0x00)
// and MTCs (0x59 and one byte).
func skipQuiet(buf []byte, i uint64) uint64 {
	for n := uint64(len(buf)); i < n; {
		switch b := buf[i]; {
		case b&1 == 0 && b != 2:
			i++
		case b == 0x59 && i+1 < n:
			i += 2
		default:
			return i
		}
	}
	return i
}

// replayMTC applies to tm the MTC packets of buf[from:to), walked as
// splitQueue walks them (from is a packet boundary outside a BBP block,
// and so is every packet up to to).
func replayMTC(tm *ptpkt.Time, buf []byte, from, to uint64, cfg *ptpkt.Config) {
	d := ptpkt.NewPacketDecoder(buf[:to], cfg)
	if d.SyncSet(from) != nil {
		return
	}
	var p ptpkt.Packet
	for {
		i := d.Offset()
		for i < to {
			if b := buf[i]; b&1 == 0 && b != 2 {
				i++
			} else if b == 0x59 && i+1 < to {
				p = ptpkt.Packet{Type: ptpkt.PktMTC, Size: 2, MTC: buf[i+1]}
				tm.UpdateMTC(&p, cfg)
				i += 2
			} else {
				break
			}
		}
		if i != d.Offset() {
			d.SyncSet(i)
		}
		if err := d.Next(&p); err != nil {
			if ptpkt.IsEOS(err) || d.SyncForward() != nil {
				return
			}
			continue
		}
		if p.Type == ptpkt.PktMTC {
			tm.UpdateMTC(&p, cfg)
		}
	}
}

// demuxed is one thread's trace joined from the CPU queues.
type demuxed struct {
	pid, tid int
	cpus     []int
	stream   *threadStream
}

// demux is pass 2: it attributes each piece of every CPU queue to the
// thread the sideband says ran on that CPU at the piece's time, and joins
// each thread's pieces, in time order, into one stream. Pieces it cannot
// attribute are returned as DemuxErrors.
func (r *Recording) demux(cfg *ptpkt.Config) ([]*demuxed, []*DemuxError, error) {
	runs := newCPURuns(r.Trace.TimeConv)
	var problems []*DemuxError
	for i := range r.Trace.Sideband {
		rec := &r.Trace.Sideband[i]
		runs.add(rec)
		if rec.Type == perf.RecLost {
			problems = append(problems, &DemuxError{CPU: int(rec.ID.CPU), TSC: runs.conv.PerfToTSC(rec.ID.Time),
				Reason: fmt.Sprintf("perf.data record at %#x: %d records lost: the threads of the CPU are unknown until its next switch record", rec.Offset, rec.Lost)})
		}
	}
	type attributed struct {
		piece
		cpu, seq int
	}
	byTid := map[int][]attributed{}
	pidOf := map[int]int{}
	seq := 0
	var buf []byte
	for _, q := range r.Trace.Queues {
		if q.Size() == 0 {
			continue
		}
		tr := q.Reader(r.pd)
		gaps := r.auxGaps(q)
		pieces, err := splitQueue(q, tr, cfg, &buf, gaps)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %v", r.PerfPath, q, err)
		}
		for _, g := range gaps {
			problems = append(problems, &DemuxError{CPU: int(q.CPU), Offset: g.end, End: g.resume, TSC: g.tsc,
				Reason: fmt.Sprintf("%s (queue offset %#x); decoding goes on at the next PSB", g.why, g.at)})
		}
		for _, p := range pieces {
			if !p.ipPacket {
				continue // timing and PSB+ with tracing off: no instruction
			}
			cpu := int(q.CPU)
			bad := func(reason string) {
				problems = append(problems, &DemuxError{CPU: cpu, Offset: p.from, End: p.to, TSC: p.tsc, Reason: reason})
			}
			if !p.haveTSC {
				bad("no timing packet before it: its time, and so its thread, is unknown")
				continue
			}
			if runs.switches == 0 {
				bad("the recording has no context-switch records (perf record --switch-events): the threads sharing the CPU cannot be told apart")
				continue
			}
			e := runs.at(cpu, p.tsc)
			switch {
			case e.Unknown != "":
				bad(e.Unknown)
				continue
			case e.TID <= 0:
				bad(fmt.Sprintf("the sideband (record at %#x) says no traced thread runs on the CPU then", e.Offset))
				continue
			}
			pid := e.PID
			if p, ok := r.pidOf[e.TID]; ok {
				pid = p
			}
			pidOf[e.TID] = pid
			byTid[e.TID] = append(byTid[e.TID], attributed{p, cpu, seq})
			seq++
		}
	}
	var out []*demuxed
	blocks := &queueBlocks{slab: buf[:cap(buf)]} // pass 1's window, walked
	for tid, ps := range byTid {
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].tsc != ps[j].tsc {
				return ps[i].tsc < ps[j].tsc
			}
			return ps[i].seq < ps[j].seq
		})
		d := &demuxed{pid: pidOf[tid], tid: tid, stream: &threadStream{blocks: blocks}}
		seen := map[int]bool{}
		var prev *attributed
		for i := range ps {
			p := &ps[i]
			if !seen[p.cpu] {
				seen[p.cpu] = true
				d.cpus = append(d.cpus, p.cpu)
			}
			// The piece continues the previous one in its CPU's
			// stream: the decoder's packet state is the CPU's.
			contiguous := prev != nil && prev.cpu == p.cpu && prev.to == p.from
			src := p.q.Reader(r.pd)
			if p.fixFull != nil && !contiguous {
				d.stream.add(p.cpu, src, p.from, p.fixOff)
				d.stream.addBytes(p.cpu, p.fixFull, p.fixOff)
				d.stream.add(p.cpu, src, p.fixOff+uint64(p.fixLen), p.to)
			} else {
				d.stream.add(p.cpu, src, p.from, p.to)
			}
			if p.gap != nil {
				// the trace lost after the piece: an overflow
				d.stream.addBytes(p.cpu, ovf, p.gap.at)
			}
			prev = p
		}
		sort.Ints(d.cpus)
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tid < out[j].tid })
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].TSC < problems[j].TSC })
	return out, problems, nil
}

// threadStream is a thread's PT stream joined from stretches of CPU
// queues (and the few bytes that replace an IP packet compressed against
// another thread's IP): a decode.TraceReader whose offsets Origin maps
// back to the CPU queues'.
type threadStream struct {
	parts  []streamPart
	size   int64
	blocks *queueBlocks // shared by the threads of a recording
}

// queueBlocks reads CPU queues for the thread streams of a recording
// through one block of streamBlock bytes per CPU. A thread's stretches of
// a CPU queue come in increasing queue order with other threads'
// stretches between them (a per-cpu recording has thousands of
// stretches): one pread per block, not per stretch. The blocks are
// small, shared by all the streams and cut from the memory pass 1 walked
// the queues in (slab) while it lasts, since touching fresh memory costs
// about as much as reading it.
type queueBlocks struct {
	mu     sync.Mutex
	blocks map[int]*queueBlock // by CPU
	slab   []byte
}

// streamBlock is the size of a queueBlocks block.
const streamBlock = 64 << 10

// queueBlock is the bytes [at, at+len(b)) of a CPU queue.
type queueBlock struct {
	at int64
	b  []byte
}

// read reads b at off of p's CPU queue, through the CPU's block.
func (qs *queueBlocks) read(p *streamPart, b []byte, off int64) (int, error) {
	if len(b) >= streamBlock {
		return p.src.ReadAt(b, off)
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if qs.blocks == nil {
		qs.blocks = map[int]*queueBlock{}
	}
	qb := qs.blocks[p.cpu]
	if qb == nil {
		qb = &queueBlock{}
		if len(qs.slab) >= streamBlock {
			qb.b, qs.slab = qs.slab[:0:streamBlock], qs.slab[streamBlock:]
		} else {
			qb.b = make([]byte, 0, streamBlock)
		}
		qs.blocks[p.cpu] = qb
	}
	n := 0
	for n < len(b) {
		pos := off + int64(n)
		if pos < qb.at || pos >= qb.at+int64(len(qb.b)) {
			qb.at, qb.b = pos, qb.b[:cap(qb.b)]
			k, err := p.src.ReadAt(qb.b, pos)
			qb.b = qb.b[:k]
			if k == 0 {
				return n, err
			}
		}
		n += copy(b[n:], qb.b[pos-qb.at:])
	}
	return n, nil
}

// streamPart is [virt, virt+n) of the stream: bytes [off, off+n) of src,
// or syn.
type streamPart struct {
	virt, n int64
	cpu     int
	src     decode.TraceReader
	off     int64
	syn     []byte
}

func (s *threadStream) add(cpu int, src decode.TraceReader, from, to uint64) {
	if to <= from {
		return
	}
	if n := len(s.parts); n > 0 {
		l := &s.parts[n-1]
		if l.syn == nil && l.cpu == cpu && l.off+l.n == int64(from) {
			l.n += int64(to - from)
			s.size += int64(to - from)
			return
		}
	}
	s.parts = append(s.parts, streamPart{virt: s.size, n: int64(to - from), cpu: cpu, src: src, off: int64(from)})
	s.size += int64(to - from)
}

func (s *threadStream) addBytes(cpu int, b []byte, at uint64) {
	s.parts = append(s.parts, streamPart{virt: s.size, n: int64(len(b)), cpu: cpu, off: int64(at), syn: b})
	s.size += int64(len(b))
}

// Size implements decode.TraceReader.
func (s *threadStream) Size() int64 { return s.size }

// ReadAt implements decode.TraceReader.
func (s *threadStream) ReadAt(b []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	i := sort.Search(len(s.parts), func(i int) bool { return s.parts[i].virt+s.parts[i].n > off })
	n := 0
	for ; i < len(s.parts) && n < len(b); i++ {
		p := &s.parts[i]
		in := off + int64(n) - p.virt
		m := int(min(int64(len(b)-n), p.n-in))
		if p.syn != nil {
			copy(b[n:n+m], p.syn[in:])
		} else if k, err := s.blocks.read(p, b[n:n+m], p.off+in); k < m {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return n + k, err
		}
		n += m
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// Origin returns the stretch of the stream around off that came, in one
// piece, from one CPU's queue (the end of the stream maps to the end of
// its last stretch).
func (s *threadStream) Origin(off uint64) (ptfmt.OriginSpan, bool) {
	i := sort.Search(len(s.parts), func(i int) bool { return s.parts[i].virt+s.parts[i].n > int64(off) })
	if i == len(s.parts) {
		if len(s.parts) == 0 {
			return ptfmt.OriginSpan{}, false
		}
		p := &s.parts[i-1] // the end of the stream
		return ptfmt.OriginSpan{From: uint64(p.virt), To: ^uint64(0), CPU: p.cpu, QOff: uint64(p.off), Fixed: p.syn != nil}, true
	}
	p := &s.parts[i]
	return ptfmt.OriginSpan{From: uint64(p.virt), To: uint64(p.virt + p.n), CPU: p.cpu, QOff: uint64(p.off), Fixed: p.syn != nil}, true
}
