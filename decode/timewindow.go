package decode

import (
	"bytes"
	"io"

	"github.com/ptjit/ptjit/ptpkt"
)

// TimeRange returns the part [lo, hi) of trace r that holds the time
// [from, to) (TSC): lo is the last PSB whose PSB+ header's TSC is at or
// before from (0 when none is), hi the first PSB whose TSC is at or after
// to (the trace's size when none is). A trace's TSC only grows (one AUX
// queue is written in time order), so a binary search over the offsets
// finds both with O(log size) reads of a PSB+ header each: a window of a
// long trace is decoded without reading, let alone decoding, the rest.
// A PSB+ without a TSC packet counts as later than any time (it is not
// cut at).
func TimeRange(r TraceReader, cfg *ptpkt.Config, from, to uint64) (lo, hi int64, err error) {
	size := r.Size()
	p := psbProber{r: r, cfg: cfg}
	best := int64(-1)
	for a, b := int64(0), size; a < b; {
		mid := a + (b-a)/2
		off, tsc, ok, err := p.next(mid, b)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			b = mid
			continue
		}
		if tsc <= from {
			best, a = off, off+1
		} else {
			b = mid
		}
	}
	lo = max(best, 0)
	hi = size
	for a, b := lo+1, size; a < b; {
		mid := a + (b-a)/2
		off, tsc, ok, err := p.next(mid, b)
		if err != nil {
			return 0, 0, err
		}
		if !ok {
			b = mid
			continue
		}
		if tsc >= to {
			hi, b = min(hi, off), mid
		} else {
			a = off + 1
		}
	}
	return lo, hi, nil
}

// psbProber finds PSBs and their TSC in a TraceReader.
type psbProber struct {
	r     TraceReader
	cfg   *ptpkt.Config
	buf   []byte
	Reads int64 // bytes read, for tests
}

// probeChunk is how much is read at once while looking for a PSB (soft
// PT and perf's hardware traces have one every 4 KiB or so).
const probeChunk = 4 << 10

// next returns the first PSB at or after off and before end, and the TSC
// of its PSB+ header (ok false: none, or it has no TSC).
func (p *psbProber) next(off, end int64) (psb int64, tsc uint64, ok bool, err error) {
	pat := ptpkt.PSBPattern[:]
	for pos := off; pos < end; {
		n := min(int64(probeChunk), p.r.Size()-pos)
		if n < int64(len(pat)) {
			return 0, 0, false, nil
		}
		if int64(cap(p.buf)) < n+256 {
			p.buf = make([]byte, n+256)
		}
		// with room for the PSB+ header after a PSB near the end
		b := p.buf[:min(n+256, p.r.Size()-pos)]
		k, rerr := p.r.ReadAt(b, pos)
		p.Reads += int64(k)
		if k < len(b) && rerr != nil {
			return 0, 0, false, rerr
		}
		i := bytes.Index(b[:min(int64(k), n+int64(len(pat))-1)], pat)
		if i < 0 {
			pos += n - int64(len(pat)) + 1
			continue
		}
		psb = pos + int64(i)
		if psb >= end {
			return 0, 0, false, nil
		}
		hdr := b[i:]
		if len(hdr) < 256 {
			hdr = make([]byte, 256)
			m, _ := p.r.ReadAt(hdr, psb)
			p.Reads += int64(m)
			hdr = hdr[:m]
		}
		tsc, ok = psbTSC(hdr, p.cfg)
		return psb, tsc, ok, nil
	}
	return 0, 0, false, nil
}

// psbTSC returns the TSC packet's value in the PSB+ header at the start
// of b.
func psbTSC(b []byte, cfg *ptpkt.Config) (uint64, bool) {
	pd := ptpkt.NewPacketDecoder(b, cfg)
	if pd.SyncSet(0) != nil {
		return 0, false
	}
	var pk ptpkt.Packet
	for pd.Next(&pk) == nil {
		switch pk.Type {
		case ptpkt.PktTSC:
			return pk.Payload, true
		case ptpkt.PktPSBEnd, ptpkt.PktOVF:
			return 0, false
		}
	}
	return 0, false
}

// TraceSection returns the part [off, off+n) of trace r (a sub-slice of a
// BytesTrace).
func TraceSection(r TraceReader, off, n int64) TraceReader {
	if b, ok := r.(BytesTrace); ok {
		return b[off : off+n]
	}
	return SectionTrace{r, off, n}
}

// SectionTrace is the part [Off, Off+N) of a trace.
type SectionTrace struct {
	R      TraceReader
	Off, N int64
}

func (s SectionTrace) Size() int64 { return s.N }

func (s SectionTrace) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.N {
		return 0, io.EOF
	}
	if rest := s.N - off; int64(len(p)) > rest {
		n, err := s.R.ReadAt(p[:rest], s.Off+off)
		if err == nil && n == int(rest) {
			err = io.EOF
		}
		return n, err
	}
	return s.R.ReadAt(p, s.Off+off)
}

// FirstTSC returns the TSC of the first PSB+ header in r that has one
// (of its first 16 PSBs): when the trace starts. ok is false when there is
// none.
func FirstTSC(r TraceReader, cfg *ptpkt.Config) (tsc uint64, ok bool, err error) {
	p := psbProber{r: r, cfg: cfg}
	for off, tries := int64(0), 0; off < r.Size() && tries < 16; tries++ {
		psb, tsc, ok, err := p.next(off, r.Size())
		if err != nil || ok {
			return tsc, ok, err
		}
		if psb < off {
			break // no PSB at or after off (next says 0)
		}
		off = psb + int64(len(ptpkt.PSBPattern))
	}
	return 0, false, nil
}
