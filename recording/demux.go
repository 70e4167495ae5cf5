package recording

import (
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/perf"
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
}

// splitQueue is pass 1: it walks the packets of a CPU queue (no
// instruction decoding) and cuts it into pieces, keeping the packet-layer
// state a piece needs (last IP, time).
func splitQueue(q *perf.PerfAuxQueue, tr decode.TraceReader, cfg *ptpkt.Config) ([]piece, error) {
	var out []piece
	var last ptpkt.LastIP
	var tm ptpkt.Time
	cur := piece{q: q}
	cut := func(at uint64, psb bool) {
		if at > cur.from {
			cur.to = at
			out = append(out, cur)
		}
		cur = piece{q: q, from: at, psb: psb}
	}
	err := decode.ForEachWindow(tr, decode.DefaultWindow, func(pt []byte, stop, base uint64) {
		buf := pt[:stop]
		d := ptpkt.NewPacketDecoder(buf, cfg)
		var p ptpkt.Packet
		if err := d.SyncForward(); err != nil {
			return
		}
		inBlock := false // between BBP and BEP: even bytes are BIPs, not TNT
		for {
			if !inBlock {
				// Most of a trace is short TNTs (even bytes but 0x02,
				// the extended opcode) and PADs (0x00): nothing pass 1
				// needs; skip them without decoding.
				i := d.Offset()
				for i < uint64(len(buf)) && buf[i]&1 == 0 && buf[i] != 2 {
					i++
				}
				if i != d.Offset() {
					d.SyncSet(i)
				}
			}
			off := base + d.Offset()
			if err := d.Next(&p); err != nil {
				if ptpkt.IsEOS(err) || d.SyncForward() != nil {
					return
				}
				continue
			}
			switch p.Type {
			case ptpkt.PktBBP:
				inBlock = true
			case ptpkt.PktBEP, ptpkt.PktOVF:
				inBlock = false
			case ptpkt.PktPSB:
				inBlock = false
				cut(off, true)
				last.Reset()
			case ptpkt.PktTSC:
				tm.UpdateTSC(&p, cfg)
			case ptpkt.PktTMA:
				tm.UpdateTMA(&p, cfg)
			case ptpkt.PktMTC:
				tm.UpdateMTC(&p, cfg)
			case ptpkt.PktCBR:
				tm.UpdateCBR(&p, cfg)
			case ptpkt.PktTIP, ptpkt.PktTIPPGE, ptpkt.PktTIPPGD, ptpkt.PktFUP:
				if p.Type != ptpkt.PktTIPPGD && !cur.ipPacket {
					cur.ipPacket = true
					t, _, _, err := tm.TSC()
					cur.tsc, cur.haveTSC = t, err == nil
					if !cur.psb && (p.IPC == ptpkt.IPUpdate16 || p.IPC == ptpkt.IPUpdate32 || p.IPC == ptpkt.IPUpdate48) {
						prev := last
						if prev.Update(p.IPC, p.IP) == nil {
							ip, err := prev.IP()
							if err == nil {
								full := ptpkt.Packet{Type: p.Type, IPC: ptpkt.IPFull, IP: ip}
								if b, err := ptpkt.AppendPacket(nil, &full); err == nil {
									cur.fixOff, cur.fixLen, cur.fixFull = off, int(base+d.Offset()-off), b
								}
							}
						}
					}
				}
				last.Update(p.IPC, p.IP)
				if p.Type == ptpkt.PktTIPPGD {
					cut(base+d.Offset(), false)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	cut(uint64(tr.Size()), false)
	return out, nil
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
	for _, q := range r.Trace.Queues {
		if q.Size() == 0 {
			continue
		}
		tr := q.Reader(r.pd)
		pieces, err := splitQueue(q, tr, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %s: %v", r.PerfPath, q, err)
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
	for tid, ps := range byTid {
		sort.SliceStable(ps, func(i, j int) bool {
			if ps[i].tsc != ps[j].tsc {
				return ps[i].tsc < ps[j].tsc
			}
			return ps[i].seq < ps[j].seq
		})
		d := &demuxed{pid: pidOf[tid], tid: tid, stream: &threadStream{}}
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
	parts []streamPart
	size  int64

	// A thread's stretches of one CPU queue come in increasing queue
	// order with other threads' stretches between them: read each CPU
	// queue through a block of streamBlock bytes, not one pread per
	// stretch (a per-cpu recording has thousands of stretches).
	mu     sync.Mutex
	blocks map[int]*queueBlock // by CPU
}

// streamBlock is the size of threadStream's read block per CPU queue.
const streamBlock = 1 << 20

// queueBlock is the bytes [at, at+len(b)) of a CPU queue.
type queueBlock struct {
	at int64
	b  []byte
}

// readQueue reads b at off of p's CPU queue, through the CPU's block.
func (s *threadStream) readQueue(p *streamPart, b []byte, off int64) (int, error) {
	if len(b) >= streamBlock {
		return p.src.ReadAt(b, off)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.blocks == nil {
		s.blocks = map[int]*queueBlock{}
	}
	qb := s.blocks[p.cpu]
	if qb == nil {
		qb = &queueBlock{b: make([]byte, 0, streamBlock)}
		s.blocks[p.cpu] = qb
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
		} else if k, err := s.readQueue(p, b[n:n+m], p.off+in); k < m {
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

// Origin returns the CPU and the offset in that CPU's queue of the
// stream's byte at off.
func (s *threadStream) Origin(off uint64) (cpu int, qoff uint64, ok bool) {
	i := sort.Search(len(s.parts), func(i int) bool { return s.parts[i].virt+s.parts[i].n > int64(off) })
	if i == len(s.parts) {
		if len(s.parts) == 0 {
			return 0, 0, false
		}
		i-- // the end of the stream
	}
	p := &s.parts[i]
	if p.syn != nil {
		return p.cpu, uint64(p.off), true
	}
	return p.cpu, uint64(p.off + int64(off) - p.virt), true
}
