package decode

// FlowSink receives the decoded flow: instructions, events and decode
// errors, in trace order.
type FlowSink interface {
	// Insn reports an instruction; off is the trace offset of the packet
	// being processed, tsc the time of the last event or query.
	Insn(in *FlowInsn, off, tsc uint64)
	// Event reports an event (status updates from PSB+ included; check
	// ev.StatusUpdate).
	Event(ev *Event, off uint64)
	// Error reports a decode error; kind is "error" or, for an error
	// right after --resync-on-error recovery, "resync error". Decoding
	// goes on at the next PSB (or the next IP when resyncing).
	Error(e *FlowError, kind string)
}

// RunFlow decodes the whole trace of d into sink, the way libipt's ptxed
// drives its instruction decoder: synchronize at each PSB, drain events,
// decode instructions; after an error, resynchronize at the next PSB (or, if
// resync is set, at the next packet giving an IP).
func RunFlow(d *FlowDecoder, sink FlowSink, resync bool) {
	var sync, tsc uint64
	st := 0
	needSync := true
	afterResync := false
	// resyncAt is the offset of the error that the last resync followed
	// (noOffset: none): the same error again right after resyncing means
	// resyncing makes no progress, and decoding moves on to the next PSB.
	const noOffset = ^uint64(0)
	resyncAt := noOffset
	for {
		if needSync {
			st = d.SyncForward()
			if st < 0 {
				if st == -int(CodeEOS) {
					return
				}
				sink.Error(&FlowError{Code: Code(-st), Offset: d.Offset()}, "error")
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
		var errIP, errOff uint64
		inDrain := false
		for {
			for st >= 0 && st&stEventPending != 0 {
				off := d.Offset()
				var ev Event
				st = d.Event(&ev)
				if st < 0 {
					break
				}
				tsc = ev.TSC
				sink.Event(&ev, off)
			}
			if st < 0 {
				errIP = d.IP()
				errOff = d.EventOffset()
				inDrain = true
				break
			}
			if st&stEOS != 0 {
				if st&stIPSuppressed == 0 {
					sink.Event(&Event{Type: EvEndOfTrace}, d.Offset())
				}
				st = -int(CodeEOS)
				break
			}
			off := d.Offset()
			st = d.Next(&in)
			if st < 0 {
				if in.Size != 0 {
					sink.Insn(&in, off, tsc)
				}
				errIP = in.IP
				errOff = d.Offset()
				break
			}
			afterResync = false
			sink.Insn(&in, off, tsc)
		}
		if st == 0 {
			st = -int(CodeInternal)
		}
		if st == -int(CodeEOS) {
			return
		}
		if afterResync && inDrain {
			sink.Error(&FlowError{Code: Code(-st), Offset: errOff, IP: errIP}, "resync error")
			afterResync = false
			needSync = true
			continue
		}
		sink.Error(&FlowError{Code: Code(-st), Offset: errOff, IP: errIP}, "error")
		if resync && errOff != resyncAt {
			resyncAt = errOff
			st = d.Resync()
			afterResync = true
			if st < 0 {
				if st == -int(CodeEOS) {
					return
				}
				sink.Error(&FlowError{Code: Code(-st), Offset: d.Offset(), IP: d.IP()}, "resync error")
				afterResync = false
				needSync = true
			}
			continue
		}
		needSync = true
	}
}
