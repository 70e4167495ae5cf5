package decode

import (
	"bytes"
	"fmt"
	"io"

	"github.com/ptjit/ptjit/ptpkt"
)

// TraceReader is a PT stream that may be larger than memory: a raw trace
// file (mapped), or one AUXTRACE queue of a perf.data read buffer by buffer
// (PerfAuxQueue.Reader).
type TraceReader interface {
	io.ReaderAt
	Size() int64
}

// BytesTrace is a TraceReader over bytes already in memory.
type BytesTrace []byte

// ReadAt implements io.ReaderAt.
func (b BytesTrace) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Size returns the length of the trace.
func (b BytesTrace) Size() int64 { return int64(len(b)) }

// DefaultWindow is the window size ptjit decode uses unless told otherwise
// (--window): the most trace bytes it holds at once per stream, so that
// decoding memory stays bounded whatever the trace size.
const DefaultWindow = 64 << 20

// ForEachWindow calls fn for consecutive windows of the trace, each at most
// max bytes, with the window's offset in the trace. A window is decoded up
// to stop (ParallelFlowWindow, ParallelFlowChunksWindow): the offset in pt
// of the PSB where the next window starts, with the PSB's header still in
// pt; for the last window stop == len(pt). Cutting at PSBs gives the same
// flow as decoding the trace in one piece, except that state a decoder keeps
// across a PSB (a return compressed against a call before it) is lost, as
// at any parallel chunk boundary. A window with no usable PSB is cut at
// max bytes. Windows of a BytesTrace are sub-slices, never copies.
func ForEachWindow(r TraceReader, max int, fn func(pt []byte, stop uint64, base uint64)) error {
	var buf []byte
	if _, ok := r.(BytesTrace); !ok && r.Size() > 0 {
		// The window mapping (window_linux.go), if it is free.
		n := int64(max)
		if n < 4*windowMargin {
			n = 4 * windowMargin
		}
		if buf = takeWindow(int(min(n, r.Size()))); buf != nil {
			defer releaseWindow()
		}
	}
	_, err := ForEachWindowBuf(r, max, buf, fn)
	return err
}

// windowMargin is the room for a PSB+ header after a window's cut.
const windowMargin = 4096

// ForEachWindowBuf is ForEachWindow reading into buf (grown as needed),
// which it returns for the next call: a caller that walks many traces
// one after the other touches the memory of one window only.
func ForEachWindowBuf(r TraceReader, max int, buf []byte, fn func(pt []byte, stop uint64, base uint64)) ([]byte, error) {
	size := r.Size()
	const margin = windowMargin
	if max < 4*margin {
		max = 4 * margin
	}
	if b, ok := r.(BytesTrace); ok && int64(len(b)) <= int64(max) {
		fn(b, uint64(len(b)), 0)
		return buf, nil
	}
	for pos := int64(0); pos < size; {
		n := int(min(int64(max), size-pos))
		var win []byte
		if b, ok := r.(BytesTrace); ok {
			win = b[pos : pos+int64(n)]
		} else {
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			win = buf[:n]
			if m, err := r.ReadAt(win, pos); m < n {
				return buf, fmt.Errorf("trace offset %#x: reading %d bytes: %v", pos, n, err)
			}
		}
		stop := n
		if pos+int64(n) < size {
			// The last PSB after the window's first byte that leaves
			// room for its header.
			if i := bytes.LastIndex(win[1:n-margin], ptpkt.PSBPattern[:]); i >= 0 {
				stop = i + 1
			} else {
				stop = n - margin
			}
		}
		fn(win, uint64(stop), uint64(pos))
		pos += int64(stop)
	}
	return buf, nil
}

// OffsetSink passes a window's flow on to Next with every trace offset
// moved by Base, the window's offset in the whole trace.
type OffsetSink struct {
	Next  FlowSink
	Base  uint64
	relay BlockRelay
}

// Insn implements FlowSink.
func (s *OffsetSink) Insn(in *FlowInsn, off, tsc uint64) { s.Next.Insn(in, off+s.Base, tsc) }

// Block implements BlockSink.
func (s *OffsetSink) Block(b *FlowBlock, off, tsc uint64) { s.relay.Send(s.Next, b, off+s.Base, tsc) }

// TakesBlocks implements BlockTaker: s takes blocks if Next does.
func (s *OffsetSink) TakesBlocks() bool { return s.relay.Takes(s.Next) }

// Event implements FlowSink.
func (s *OffsetSink) Event(ev *Event, off uint64) {
	c := *ev
	c.Offset += s.Base
	s.Next.Event(&c, off+s.Base)
}

// Error implements FlowSink.
func (s *OffsetSink) Error(e *FlowError, kind ErrorKind) {
	c := *e
	c.Offset += s.Base
	s.Next.Error(&c, kind)
}
