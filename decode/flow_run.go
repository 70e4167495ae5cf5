package decode

import "strconv"

// FlowSink receives the decoded flow: instructions, events and decode
// errors, in trace order.
type FlowSink interface {
	// Insn reports an instruction; off is the trace offset of the packet
	// being processed, tsc the time of the last event or query.
	Insn(in *FlowInsn, off, tsc uint64)
	// Event reports an event (status updates from PSB+ included; check
	// ev.StatusUpdate).
	Event(ev *Event, off uint64)
	// Error reports a decode error; kind is KindError or, for an error
	// right after --resync-on-error recovery, KindResyncError. Decoding
	// goes on at the next PSB (or the next IP when resyncing).
	Error(e *FlowError, kind ErrorKind)
}

// ErrorKind says where in RunFlow's recovery a decode error happened.
type ErrorKind uint8

const (
	// KindError: an error while decoding.
	KindError ErrorKind = iota
	// KindResyncError: an error right after --resync-on-error recovery;
	// decoding goes on at the next PSB.
	KindResyncError
)

// String returns the kind as ptxed prints it: "error" or "resync error".
func (k ErrorKind) String() string {
	switch k {
	case KindError:
		return "error"
	case KindResyncError:
		return "resync error"
	}
	return "error kind " + strconv.Itoa(int(k))
}

// MarshalText makes the kind its String in JSON and other text encodings.
func (k ErrorKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// RunFlow decodes the whole trace of d into sink, the way libipt's ptxed
// drives its instruction decoder: synchronize at each PSB, drain events,
// decode instructions; after an error, resynchronize at the next PSB (or, if
// resync is set, at the next packet giving an IP).
func RunFlow(d *FlowDecoder, sink FlowSink, resync bool) {
	var sync, tsc uint64
	var st Status
	var err error
	needSync := true
	afterResync := false
	// resyncAt is the offset of the error that the last resync followed
	// (noOffset: none): the same error again right after resyncing means
	// resyncing makes no progress, and decoding moves on to the next PSB.
	const noOffset = ^uint64(0)
	resyncAt := noOffset
	// Runs of straight-line code go to a sink that takes them as blocks
	// (see flow_block.go); everything else instruction by instruction.
	bs := AsBlockSink(sink)
	if d.cfg.noFastPaths {
		bs = nil
	}
	var cnt *BlockCounts
	if bs != nil {
		cnt = blockCounts(bs)
	}
	var blk FlowBlock
	for {
		if needSync {
			st, err = d.SyncForward()
			if err != nil {
				fe := err.(*FlowError)
				if fe.Code == CodeEOS {
					return
				}
				timeError(d, fe)
				sink.Error(fe, KindError)
				newSync := d.Offset()
				if newSync <= sync {
					return
				}
				sync = newSync
				continue
			}
			needSync = false
		}
		var in FlowInsn
		inDrain := false
		for {
			for err == nil && st&StatusEventPending != 0 {
				off := d.Offset()
				var ev Event
				st, err = d.Event(&ev)
				if err != nil {
					break
				}
				tsc = ev.TSC
				sink.Event(&ev, off)
			}
			if err != nil {
				inDrain = true
				break
			}
			if st&StatusEOS != 0 {
				if st&StatusIPSuppressed == 0 {
					sink.Event(&Event{Type: EvEndOfTrace}, d.Offset())
				}
				return
			}
			off := d.Offset()
			if bs != nil {
				if ok, bst := d.nextBlock(&blk, &in); ok {
					if bst >= 0 {
						afterResync = false
						if cnt == nil || !cnt.skip(&blk) {
							bs.Block(&blk, off, tsc)
						}
						st = Status(bst)
						continue
					}
					// The block's last instruction failed: the run
					// before it, then the instruction and the error,
					// as from Next.
					if blk.N != 0 {
						afterResync = false
						bs.Block(&blk, off, tsc)
					}
					sink.Insn(&in, off, tsc)
					err = d.nextError(bst, &in)
					break
				}
			}
			st, err = d.Next(&in)
			if err != nil {
				if in.Size != 0 {
					sink.Insn(&in, off, tsc)
				}
				break
			}
			afterResync = false
			sink.Insn(&in, off, tsc)
		}
		// Every error of the decoder is a *FlowError.
		fe := err.(*FlowError)
		if fe.Code == CodeEOS {
			return
		}
		if afterResync && inDrain {
			timeError(d, fe)
			sink.Error(fe, KindResyncError)
			afterResync = false
			needSync = true
			continue
		}
		errOff := fe.Offset // before the sink sees (and might change) fe
		timeError(d, fe)
		sink.Error(fe, KindError)
		if resync && errOff != resyncAt {
			resyncAt = errOff
			st, err = d.Resync()
			afterResync = true
			if err != nil {
				fe := err.(*FlowError)
				if fe.Code == CodeEOS {
					return
				}
				timeError(d, fe)
				sink.Error(fe, KindResyncError)
				afterResync = false
				needSync = true
			}
			continue
		}
		needSync = true
	}
}

// timeError sets the time of e: the decoder's time, if it has one.
func timeError(d *FlowDecoder, e *FlowError) {
	e.TSC, e.HasTSC = d.Time()
}
