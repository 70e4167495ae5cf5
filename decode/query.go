package decode

import (
	"github.com/ptjit/ptjit/ptpkt"
	"github.com/ptjit/ptjit/x86"
)

// The query layer (libipt's pt_evt_* event decoder and pt_qry_* query
// decoder folded into one type): it turns packets into events, binding
// packets that belong together (FUP+TIP, MODE.Exec+TIP, OVF+FUP, PSB+
// headers at PSBEND) and answers the instruction flow's questions: the next
// conditional branch outcome (TNT), the next indirect branch target (TIP), the
// next event.
//
// Internal functions return 0 or a positive value on success and a negative
// Code on failure, like libipt, which keeps the port of its binding rules
// easy to check against the reference.

// QueryDecoder decodes PT packets into branch outcomes and events.
type QueryDecoder struct {
	cfg *FlowConfig
	pd  ptpkt.PacketDecoder

	// Event-decoder state.
	pkt     ptpkt.Packet // the current packet, not yet processed
	status  int          // deferred packet decode error (negative) or 0
	event   *Event       // the event produced by the current decode step
	enabled bool
	bound   bool
	ip      ptpkt.LastIP
	time    timeState
	evq     eventQueue
	// event trace state: EVD payloads wait for their CFE
	evd evdState
	// the last execution mode and RFLAGS.IF, to report only changes
	mode           x86.ExecMode
	modeKnown      bool
	iflag, ifKnown bool

	// Query-layer state.
	tnt      ptpkt.TNTCache
	cur      Event // the next event, read ahead (libipt: qry->event)
	qstatus  int   // deferred error of the read-ahead (negative) or 0
	lastTime timeSnap

	// fast: take the hot packets through fetchQEvent's and fetchEvent's
	// fast paths (always, but where a test compares them with the
	// general dispatch: FlowConfig.noFastPaths).
	fast bool
}

// NewQueryDecoder returns a query decoder over the PT bytes in buf.
func NewQueryDecoder(buf []byte, cfg *FlowConfig) *QueryDecoder {
	if cfg == nil {
		cfg = &FlowConfig{}
	}
	d := &QueryDecoder{cfg: cfg, fast: !cfg.noFastPaths}
	d.pd = *ptpkt.NewPacketDecoder(buf, &cfg.Packet)
	d.evtReset()
	d.qryReset()
	return d
}

func (d *QueryDecoder) evtReset() {
	d.pkt = ptpkt.Packet{}
	d.status = -int(CodeNosync)
	d.event = nil
	d.enabled = false
	d.bound = false
	d.ip.Reset()
	d.time.init(d.cfg)
	d.evq.reset()
	d.evd = evdState{}
	d.modeKnown, d.ifKnown = false, false
}

func (d *QueryDecoder) qryReset() {
	d.qstatus = -int(CodeNosync)
	d.tnt.Reset()
	d.lastTime = d.time.snap()
}

// Offset returns the trace offset of the packet being processed, as libipt's
// pt_evt_get_offset (the offset printed with decode errors).
func (d *QueryDecoder) Offset() uint64 {
	return d.pd.Offset() - uint64(d.pkt.Size)
}

// SyncOffset returns the offset of the PSB the decoder last synchronized to.
func (d *QueryDecoder) SyncOffset() uint64 { return d.pd.SyncOffset() }

// fetchPacket reads the next non-PAD packet into d.pkt, storing any error for
// later.
func (d *QueryDecoder) fetchPacket() int {
	for {
		err := d.pd.Next(&d.pkt)
		if err != nil {
			d.pkt = ptpkt.Packet{}
			d.status = packetErrCode(err)
			return 0
		}
		if d.pkt.Type != ptpkt.PktPad {
			return 0
		}
	}
}

// packetErrCode maps a packet decoder error to a negative Code.
func packetErrCode(err error) int {
	switch {
	case ptpkt.IsEOS(err):
		return -int(CodeEOS)
	case errorsIs(err, ptpkt.ErrBadOpcode):
		return -int(CodeBadOpc)
	case errorsIs(err, ptpkt.ErrBadPacket):
		return -int(CodeBadPacket)
	case errorsIs(err, ptpkt.ErrNoSync):
		return -int(CodeNosync)
	}
	return -int(CodeBadPacket)
}

func (d *QueryDecoder) eventTime(ev *Event) {
	tsc, lostMTC, lostCYC, ok := d.time.query()
	ev.TSC, ev.LostMTC, ev.LostCYC = tsc, lostMTC, lostCYC
	ev.HasTSC = ok
}

// eventIP sets *ip from the last IP, or marks ev's IP suppressed.
func (d *QueryDecoder) eventIP(ip *uint64, ev *Event) int {
	v, st := lastIPQuery(&d.ip)
	switch st {
	case 0:
		*ip = v
	case CodeNoIP, CodeIPSuppressed:
		ev.IPSuppressed = true
	default:
		return -int(st)
	}
	return 0
}

func (d *QueryDecoder) updateIP(p *ptpkt.Packet) int {
	if err := d.ip.Update(p.IPC, p.IP); err != nil {
		return -int(CodeBadPacket)
	}
	return 0
}

// lastIPQuery returns the last IP or why there is none.
func lastIPQuery(l *ptpkt.LastIP) (uint64, Code) {
	ip, err := l.IP()
	switch {
	case err == nil:
		return ip, 0
	case errorsIs(err, ptpkt.ErrIPSuppressed):
		return 0, CodeIPSuppressed
	}
	return 0, CodeNoIP
}

// findHeaderFUP looks ahead, from inside a PSB+, for its FUP. It returns 1
// and the FUP in *fup when there is one, 0 when the header has none.
func findHeaderFUP(pd ptpkt.PacketDecoder, fup *ptpkt.Packet) int {
	for {
		if err := pd.Next(fup); err != nil {
			return packetErrCode(err)
		}
		switch fup.Type {
		case ptpkt.PktFUP:
			return 1
		case ptpkt.PktModeExec, ptpkt.PktModeTSX, ptpkt.PktPIP, ptpkt.PktVMCS, ptpkt.PktMNT, ptpkt.PktTSC, ptpkt.PktCBR, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC, ptpkt.PktPad:
		case ptpkt.PktPSBEnd, ptpkt.PktOVF:
			return 0
		default:
			return -int(CodeBadContext)
		}
	}
}

func (d *QueryDecoder) checkBDM70() int {
	pd := d.pd
	var p ptpkt.Packet
	for {
		if err := pd.Next(&p); err != nil {
			if ptpkt.IsEOS(err) {
				return 0
			}
			return packetErrCode(err)
		}
		switch p.Type {
		case ptpkt.PktTIPPGE:
			return 1
		case ptpkt.PktPad, ptpkt.PktTSC, ptpkt.PktCBR, ptpkt.PktPSBEnd, ptpkt.PktPIP, ptpkt.PktModeExec, ptpkt.PktModeTSX, ptpkt.PktVMCS, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC, ptpkt.PktMNT:
		default:
			return 0
		}
	}
}

func (d *QueryDecoder) headerFUP(p *ptpkt.Packet) int {
	enabled := p.IPC != ptpkt.IPSuppressed
	if d.cfg.Packet.Errata.BDM70 {
		st := d.checkBDM70()
		if st < 0 {
			return st
		}
		if st > 0 {
			enabled = false
		}
	}
	d.enabled = enabled
	if !enabled {
		return 0
	}
	return d.updateIP(p)
}

func execModeOf(p *ptpkt.Packet) x86.ExecMode {
	switch {
	case p.CSL:
		return x86.Mode64
	case p.CSD:
		return x86.Mode32
	}
	return x86.Mode16
}

func (d *QueryDecoder) headerMode(p *ptpkt.Packet) int {
	ev := d.evq.enqueue(bindPSBEnd)
	if ev == nil {
		return -int(CodeNomem)
	}
	ev.StatusUpdate = true
	ev.Offset = d.Offset()
	switch p.Type {
	case ptpkt.PktModeExec:
		ev.Type = EvExecMode
		ev.Mode = execModeOf(p)
		ev.IF = p.IF
		d.mode, d.modeKnown, d.iflag, d.ifKnown = ev.Mode, true, p.IF, true
	case ptpkt.PktModeTSX:
		ev.Type = EvTSX
		ev.Speculative = p.InTX
		ev.Aborted = p.Abort
	}
	return 0
}

// decodePSB processes a PSB+ header: its packets become status updates bound
// to PSBEND (or to an OVF ending the header).
func (d *QueryDecoder) decodePSB() int {
	if !d.evq.empty(bindPSBEnd) || !d.evq.empty(bindTIP) || !d.evq.empty(bindFUP) {
		return -int(CodeBadContext)
	}
	d.ip.Reset()
	d.enabled = false
	d.evd = evdState{}

	// The enabled/disabled status comes first; we fill it in at PSBEND.
	ev := d.evq.enqueue(bindPSBEnd)
	if ev == nil {
		return -int(CodeNomem)
	}
	ev.StatusUpdate = true
	for {
		d.fetchPacket()
		p := &d.pkt
		var st int
		switch p.Type {
		case ptpkt.PktFUP:
			st = d.headerFUP(p)
		case ptpkt.PktModeExec, ptpkt.PktModeTSX:
			st = d.headerMode(p)
		case ptpkt.PktPIP:
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(CodeNomem)
			}
			e.StatusUpdate = true
			e.Type = EvAsyncPaging
			e.CR3 = p.Payload
			e.NonRoot = p.NR
		case ptpkt.PktVMCS:
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(CodeNomem)
			}
			e.StatusUpdate = true
			e.Type = EvAsyncVMCS
			e.Base = p.Payload
		case ptpkt.PktMNT:
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(CodeNomem)
			}
			e.Type = EvMNT
			e.Payload = p.Payload
		case ptpkt.PktTSC:
			d.time.headerTSC(p)
		case ptpkt.PktCBR:
			d.time.headerCBR(p)
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(CodeNomem)
			}
			e.StatusUpdate = true
			e.Type = EvCBR
			e.Ratio = p.CBR
		case ptpkt.PktTMA:
			d.time.tma(p)
		case ptpkt.PktMTC:
			d.time.mtc(p)
		case ptpkt.PktCYC:
			d.time.cyc(p)
		case ptpkt.PktPSBEnd:
			if d.enabled {
				ev.Type = EvEnabled
			} else {
				ev.Type = EvDisabled
				ev.IPSuppressed = true
			}
			return 1
		case ptpkt.PktOVF:
			if d.enabled {
				ev.Type = EvEnabled
			} else {
				// Drop the status event we created first.
				if head := d.evq.dequeue(bindPSBEnd); head != ev {
					return -int(CodeInternal)
				}
			}
			return 1
		case ptpkt.PktPad:
		case ptpkt.PktInvalid:
			st = d.status
		default:
			st = -int(CodeBadContext)
		}
		if st < 0 {
			return st
		}
	}
}

func (d *QueryDecoder) evtStart() int {
	d.status = 0
	d.fetchPacket()
	switch d.pkt.Type {
	case ptpkt.PktPSB:
		if st := d.decodePSB(); st < 0 {
			return st
		}
		return 0
	case ptpkt.PktInvalid:
		if d.status < 0 {
			return d.status
		}
		return -int(CodeInternal)
	}
	return -int(CodeNosync)
}

func (d *QueryDecoder) decodePSBEnd() int {
	ev := d.evq.dequeue(bindPSBEnd)
	if ev == nil {
		return 1
	}
	d.event = ev
	var st int
	switch ev.Type {
	case EvEnabled, EvExecMode, EvTSX, EvAsyncPaging, EvAsyncVMCS:
		st = d.eventIP(&ev.IP, ev)
	case EvDisabled, EvCBR, EvMNT:
	default:
		st = -int(CodeBadContext)
	}
	if st < 0 {
		return st
	}
	d.eventTime(ev)
	return 0
}

func (d *QueryDecoder) decodeFUP(p *ptpkt.Packet) int {
	if st := d.updateIP(p); st < 0 {
		return st
	}
	ev := d.evq.dequeue(bindFUP)
	if ev == nil {
		if d.bound {
			return 1
		}
		// An unbound FUP starts an asynchronous branch; we must have its
		// source address.
		from, st := lastIPQuery(&d.ip)
		if st != 0 {
			return -int(st)
		}
		e := d.evq.enqueue(bindTIP)
		if e == nil {
			return -int(CodeNomem)
		}
		e.Type = EvAsyncBranch
		e.From = from
		return 1
	}
	d.event = ev
	var st int
	switch ev.Type {
	case EvOverflow:
		st = d.eventIP(&ev.IP, ev)
		d.enabled = true
		d.bound = true
	case EvTSX:
		d.eventTime(ev)
		st = d.eventIP(&ev.IP, ev)
		if !ev.Aborted {
			d.bound = true
		}
	case EvExStop, EvMWait, EvPTWrite, EvTrig, EvPwrE:
		d.eventTime(ev)
		st = d.eventIP(&ev.IP, ev)
		d.bound = true
	case EvIflags, EvExecMode:
		d.eventTime(ev)
		st = d.eventIP(&ev.IP, ev)
		d.bound = true
	case EvInterrupt, EvIret, EvSMI, EvRSM, EvSIPI, EvInit, EvVMEntry, EvVMExit,
		EvShutdown, EvUintr, EvUiret, EvSwIntr, EvSyscall:
		d.eventTime(ev)
		st = d.eventIP(&ev.IP, ev)
		// A synchronous event's FUP gives the instruction; an
		// asynchronous one's also starts the asynchronous branch.
		if cfeIsSync(ev.Type) || !d.enabled {
			d.bound = true
		}
	case evFUPOnly:
		// A MODE.Exec without change consumed this FUP.
		d.event = nil
		d.bound = true
		return 1
	default:
		st = -int(CodeBadContext)
	}
	if st < 0 {
		return st
	}
	return 0
}

// findOVFFUP searches for the FUP an OVF binds to. It returns the number of
// bytes from the current position to just after that FUP, 0 if a packet
// shows the overflow resolved with tracing disabled, or a negative error.
func findOVFFUP(pd ptpkt.PacketDecoder) int {
	off := 0
	var p ptpkt.Packet
	for {
		if err := pd.Next(&p); err != nil {
			return packetErrCode(err)
		}
		if p.Size == 0 {
			return -int(CodeBadPacket)
		}
		off += int(p.Size)
		switch p.Type {
		case ptpkt.PktFUP:
			return off
		case ptpkt.PktPad, ptpkt.PktMNT, ptpkt.PktCBR, ptpkt.PktTSC, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC:
		case ptpkt.PktPSB, ptpkt.PktTIPPGE, ptpkt.PktModeExec, ptpkt.PktModeTSX, ptpkt.PktPIP, ptpkt.PktVMCS, ptpkt.PktTraceStop, ptpkt.PktOVF,
			ptpkt.PktExStop, ptpkt.PktMWait, ptpkt.PktPwrE, ptpkt.PktPwrX, ptpkt.PktPTW, ptpkt.PktCFE, ptpkt.PktEVD, ptpkt.PktTrig,
			ptpkt.PktBBP, ptpkt.PktBIP, ptpkt.PktBEP:
			return 0
		case ptpkt.PktPSBEnd, ptpkt.PktTIP, ptpkt.PktTIPPGD, ptpkt.PktTNT8, ptpkt.PktTNT64:
			return -int(CodeBadContext)
		}
	}
}

func (d *QueryDecoder) applyTimingPacket(ts *timeState, p *ptpkt.Packet) {
	switch p.Type {
	case ptpkt.PktTSC:
		ts.tsc(p)
	case ptpkt.PktCBR:
		ts.cbr(p)
	case ptpkt.PktTMA:
		ts.tma(p)
	case ptpkt.PktMTC:
		ts.mtc(p)
	case ptpkt.PktCYC:
		ts.cyc(p)
	}
}

func (d *QueryDecoder) recoverOVFAtIP(pd *ptpkt.PacketDecoder, p *ptpkt.Packet, ipp *ptpkt.Packet, ts *timeState) int {
	if st := d.updateIP(ipp); st < 0 {
		return st
	}
	ev := d.standalone(EvOverflow)
	d.eventTime(ev) // the decoder's original time
	d.pd = *pd
	d.pkt = *p
	d.time = *ts
	d.enabled = true
	return d.eventIP(&ev.IP, ev)
}

func (d *QueryDecoder) recoverOVFDisabled(pd *ptpkt.PacketDecoder, p *ptpkt.Packet, ts *timeState) int {
	ev := d.standalone(EvOverflow)
	ev.IPSuppressed = true
	d.eventTime(ev)
	d.pd = *pd
	d.pkt = *p
	d.time = *ts
	return 0
}

func (d *QueryDecoder) recoverOVFAtOffset(off int) int {
	for {
		if err := d.pd.Next(&d.pkt); err != nil {
			return packetErrCode(err)
		}
		sz := int(d.pkt.Size)
		if off <= sz {
			if off < sz {
				return -int(CodeInternal)
			}
			break
		}
		off -= sz
		switch d.pkt.Type {
		case ptpkt.PktTSC, ptpkt.PktCBR, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC:
			d.applyTimingPacket(&d.time, &d.pkt)
		case ptpkt.PktModeExec, ptpkt.PktModeTSX, ptpkt.PktPIP, ptpkt.PktVMCS, ptpkt.PktInvalid:
			return -int(CodeInternal)
		}
	}
	ev := d.standalone(EvOverflow)
	ev.IPSuppressed = true
	d.eventTime(ev)
	return d.fetchPacket()
}

// handleSKD010 looks for signs that an OVF without FUP nevertheless resolved
// with tracing enabled (the FUP got lost). Returns 0 if it generated the
// overflow event, 1 if the overflow is not handled yet.
func (d *QueryDecoder) handleSKD010() int {
	pd := d.pd
	ts := d.time
	var modeTSX struct{ found, intx, abrt bool }
	var p ptpkt.Packet
	for {
		if err := pd.Next(&p); err != nil {
			if ptpkt.IsEOS(err) {
				return 1
			}
			return packetErrCode(err)
		}
		switch p.Type {
		case ptpkt.PktTIPPGE:
			return 1
		case ptpkt.PktTIPPGD:
			if st := d.recoverOVFDisabled(&pd, &p, &ts); st < 0 {
				return st
			}
			return d.fetchPacket()
		case ptpkt.PktTNT8, ptpkt.PktTNT64:
			return 1
		case ptpkt.PktPIP, ptpkt.PktVMCS, ptpkt.PktModeExec:
		case ptpkt.PktModeTSX:
			if modeTSX.found {
				return 1
			}
			modeTSX.found, modeTSX.intx, modeTSX.abrt = true, p.InTX, p.Abort
		case ptpkt.PktFUP:
			d.pkt = p
			if modeTSX.found {
				ev := d.evq.enqueue(bindFUP)
				if ev == nil {
					return -int(CodeNomem)
				}
				ev.Type = EvTSX
				ev.Speculative = modeTSX.intx
				ev.Aborted = modeTSX.abrt
			}
			return d.recoverOVFAtIP(&pd, &p, &p, &ts)
		case ptpkt.PktTIP:
			if st := d.recoverOVFAtIP(&pd, &p, &p, &ts); st < 0 {
				return st
			}
			return d.fetchPacket()
		case ptpkt.PktPSB:
			var fup ptpkt.Packet
			st := findHeaderFUP(pd, &fup)
			if st < 0 {
				if st == -int(CodeEOS) {
					return 1
				}
				return st
			}
			if st == 0 {
				return 1
			}
			return d.recoverOVFAtIP(&pd, &p, &fup, &ts)
		case ptpkt.PktPSBEnd:
			return -int(CodeBadContext)
		case ptpkt.PktOVF, ptpkt.PktTraceStop:
			return 1
		case ptpkt.PktPad, ptpkt.PktMNT, ptpkt.PktPwrE, ptpkt.PktPwrX:
		case ptpkt.PktExStop:
			if !p.IPBit {
				break
			}
			return 1
		case ptpkt.PktMWait:
			return 1
		case ptpkt.PktPTW:
			if !p.IPBit {
				break
			}
			return 1
		case ptpkt.PktTSC, ptpkt.PktCBR, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC:
			d.applyTimingPacket(&ts, &p)
		default:
			return 1
		}
	}
}

// handleAPL11 looks for a TIP.PGD after an OVF without FUP.
func (d *QueryDecoder) handleAPL11() int {
	pd := d.pd
	ts := d.time
	var p ptpkt.Packet
	for {
		if err := pd.Next(&p); err != nil {
			return packetErrCode(err)
		}
		switch p.Type {
		case ptpkt.PktTIPPGD:
			d.recoverOVFDisabled(&pd, &p, &ts)
			return d.fetchPacket()
		case ptpkt.PktFUP, ptpkt.PktPSB, ptpkt.PktTIPPGE, ptpkt.PktTraceStop, ptpkt.PktOVF, ptpkt.PktModeExec, ptpkt.PktModeTSX, ptpkt.PktPIP,
			ptpkt.PktVMCS, ptpkt.PktExStop, ptpkt.PktMWait, ptpkt.PktPwrE, ptpkt.PktPwrX, ptpkt.PktPTW:
			return 1
		case ptpkt.PktPSBEnd, ptpkt.PktTIP, ptpkt.PktTNT8, ptpkt.PktTNT64:
			return 1
		case ptpkt.PktTSC, ptpkt.PktCBR, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC:
			d.applyTimingPacket(&ts, &p)
		case ptpkt.PktPad, ptpkt.PktMNT:
		default:
			return 1
		}
	}
}

// handleAPL12 checks whether tracing is really enabled after an OVF+FUP.
func (d *QueryDecoder) handleAPL12(off int) int {
	pd := d.pd
	if err := pd.SyncSet(pd.Offset() + uint64(off)); err != nil {
		return -int(CodeInternal)
	}
	var p ptpkt.Packet
	for {
		if err := pd.Next(&p); err != nil {
			if ptpkt.IsEOS(err) {
				return 1
			}
			return packetErrCode(err)
		}
		switch p.Type {
		case ptpkt.PktTNT8, ptpkt.PktTNT64, ptpkt.PktTIP, ptpkt.PktTIPPGD:
			return 1
		case ptpkt.PktPSB:
			var fup ptpkt.Packet
			st := findHeaderFUP(pd, &fup)
			if st != 0 {
				if st == -int(CodeEOS) {
					return 1
				}
				return st
			}
			return d.recoverOVFAtOffset(off)
		case ptpkt.PktTraceStop, ptpkt.PktTIPPGE:
			return d.recoverOVFAtOffset(off)
		case ptpkt.PktPSBEnd, ptpkt.PktOVF:
			return 1
		case ptpkt.PktPad, ptpkt.PktFUP, ptpkt.PktTSC, ptpkt.PktCBR, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC, ptpkt.PktExStop, ptpkt.PktMWait,
			ptpkt.PktPwrE, ptpkt.PktPwrX, ptpkt.PktPTW, ptpkt.PktMNT, ptpkt.PktPIP, ptpkt.PktVMCS, ptpkt.PktModeExec, ptpkt.PktModeTSX:
		default:
			return 1
		}
	}
}

func (d *QueryDecoder) decodeOVF() int {
	// An OVF ends a PSB+ just like PSBEND.
	if st := d.decodePSBEnd(); st <= 0 {
		return st
	}
	ts := d.time
	d.evtResetKeepTime(ts)

	off := findOVFFUP(d.pd)
	if off <= 0 {
		if d.cfg.Packet.Errata.SKD010 {
			if st := d.handleSKD010(); st <= 0 {
				return st
			}
		}
		if d.cfg.Packet.Errata.APL11 && off == -int(CodeBadContext) {
			if st := d.handleAPL11(); st <= 0 {
				return st
			}
		}
		if off < 0 && off != -int(CodeEOS) {
			return off
		}
		ev := d.standalone(EvOverflow)
		ev.IPSuppressed = true
		d.eventTime(ev)
		return d.fetchPacket()
	}
	if d.cfg.Packet.Errata.APL12 {
		if st := d.handleAPL12(off); st <= 0 {
			return st
		}
	}
	ev := d.evq.enqueue(bindFUP)
	if ev == nil {
		return -int(CodeNomem)
	}
	ev.Type = EvOverflow
	d.eventTime(ev)
	return 1
}

// evtResetKeepTime resets the event state after an overflow but preserves
// timing (and, with --keep-tcal-on-ovf, the calibration).
func (d *QueryDecoder) evtResetKeepTime(ts timeState) {
	pkt := d.pkt
	status := d.status
	d.evtReset()
	d.pkt = pkt
	d.status = status
	d.time.restoreAfterOVF(&ts, d.cfg.Packet.KeepTcalOnOVF)
}

// atIP makes ev the current event, with the IP just decoded and the
// current time.
func (d *QueryDecoder) atIP(ev *Event) int {
	d.event = ev
	if st := d.eventIP(&ev.IP, ev); st < 0 {
		return st
	}
	d.eventTime(ev)
	return 0
}

// boundAtTIP takes the next event bound to a TIP: one of types gets the
// TIP's IP; any other type is out of context. It returns 1 when none is
// pending.
func (d *QueryDecoder) boundAtTIP(types ...EventType) int {
	ev := d.evq.dequeue(bindTIP)
	if ev == nil {
		return 1
	}
	for _, t := range types {
		if ev.Type == t {
			return d.atIP(ev)
		}
	}
	d.event = ev
	return -int(CodeBadContext)
}

func (d *QueryDecoder) decodeTIPEvent() int {
	d.bound = true
	if async := d.evq.find(bindTIP, EvAsyncBranch); async != nil {
		ev := d.evq.dequeue(bindTIP)
		if ev == nil {
			return -int(CodeInternal)
		}
		if ev != async {
			*ev, *async = *async, *ev
		}
		if ev.Type != EvAsyncBranch {
			return -int(CodeInternal)
		}
		return d.atIP(ev)
	}
	return d.atIP(d.standalone(EvTIP))
}

func (d *QueryDecoder) decodeTIP(p *ptpkt.Packet) int {
	if !d.enabled {
		return -int(CodeBadContext)
	}
	if st := d.updateIP(p); st < 0 {
		return st
	}
	if !d.bound {
		return d.decodeTIPEvent()
	}
	return d.boundAtTIP(EvExecMode, EvIflags, EvAsyncPaging, EvAsyncVMCS)
}

func (d *QueryDecoder) decodeTIPPGE(p *ptpkt.Packet) int {
	if st := d.updateIP(p); st < 0 {
		return st
	}
	if !d.bound {
		if st := d.atIP(d.standalone(EvEnabled)); st < 0 {
			return st
		}
		d.enabled = true
		d.bound = true
		return 0
	}
	return d.boundAtTIP(EvExecMode, EvIflags)
}

func (d *QueryDecoder) decodeTIPPGD(p *ptpkt.Packet) int {
	if st := d.updateIP(p); st < 0 {
		return st
	}
	ev := d.evq.dequeue(bindTIP)
	if ev == nil {
		if d.bound {
			return 1
		}
		if st := d.atIP(d.standalone(EvDisabled)); st < 0 {
			return st
		}
		d.enabled = false
		return d.fetchPacket()
	}
	d.event = ev
	var st int
	switch ev.Type {
	case EvAsyncBranch:
		ev.Type = EvAsyncDisabled // From stays: where the branch was
		st = d.eventIP(&ev.IP, ev)
		d.enabled = false
		d.bound = true
	case EvAsyncPaging, EvAsyncVMCS:
		if !d.bound {
			return -int(CodeInternal)
		}
		ev.IPSuppressed = true
	case EvExecMode, EvIflags:
		ev.IPSuppressed = true
	default:
		st = -int(CodeBadContext)
	}
	if st < 0 {
		return st
	}
	d.eventTime(ev)
	return 0
}

func (d *QueryDecoder) decodeTNT() int {
	if !d.enabled {
		return -int(CodeBadContext)
	}
	ev := d.standalone(EvTNT)
	d.eventTime(ev)
	d.takeTNT(ev)
	return 0
}

// takeTNT copies the outcomes of the TNT packet d.pkt into ev and moves to
// the next packet: for decodeTNT and fetchQEvent's quiet TNT. What follows
// a TNT in a soft-PT trace (an MTC, a TNT-8) is read without Next's
// general dispatch (ptpkt's NextMTC and NextTNT8, tested against Next).
func (d *QueryDecoder) takeTNT(ev *Event) {
	p := &d.pkt
	ev.TNTBits, ev.TNTSize = p.TNTPayload, p.TNTBits
	if d.fast && (d.pd.NextMTC(p) || d.pd.NextTNT8(p)) {
		return
	}
	d.fetchPacket()
}

// standalone publishes a standalone event of type t and moves on.
func (d *QueryDecoder) standalone(t EventType) *Event {
	ev := d.evq.newStandalone()
	d.event = ev
	ev.Type = t
	return ev
}

func (d *QueryDecoder) decodeModeExec(p *ptpkt.Packet) int {
	// MODE.Exec binds to a directly following FUP (an event-trace mode or
	// RFLAGS.IF change at an instruction boundary), else to the next TIP.
	// Only changes are reported.
	b := bindTIP
	if d.nextIsFUP() {
		b = bindFUP
	}
	mode := execModeOf(p)
	if !d.modeKnown || d.mode != mode {
		ev := d.evq.enqueue(b)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvExecMode
		ev.Mode = mode
	}
	if !d.ifKnown || d.iflag != p.IF {
		ev := d.evq.enqueue(b)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvIflags
		ev.IF = p.IF
	}
	if b == bindFUP && d.modeKnown && d.mode == mode && d.ifKnown && d.iflag == p.IF {
		ev := d.evq.enqueue(b)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = evFUPOnly
	}
	d.mode, d.modeKnown, d.iflag, d.ifKnown = mode, true, p.IF, true
	return 1
}

// nextIsFUP reports whether the packet after the current one, skipping
// timing packets, is a FUP.
func (d *QueryDecoder) nextIsFUP() bool {
	pd := d.pd
	var p ptpkt.Packet
	for {
		if pd.Next(&p) != nil {
			return false
		}
		switch p.Type {
		case ptpkt.PktPad, ptpkt.PktTSC, ptpkt.PktMTC, ptpkt.PktCYC, ptpkt.PktTMA, ptpkt.PktCBR:
			continue
		}
		return p.Type == ptpkt.PktFUP
	}
}

func (d *QueryDecoder) decodeModeTSX(p *ptpkt.Packet) int {
	if d.enabled {
		ev := d.evq.enqueue(bindFUP)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvTSX
		ev.Speculative = p.InTX
		ev.Aborted = p.Abort
		return 1
	}
	ev := d.standalone(EvTSX)
	ev.Speculative = p.InTX
	ev.Aborted = p.Abort
	ev.IPSuppressed = true
	d.eventTime(ev)
	return d.fetchPacket()
}

func (d *QueryDecoder) decodePIP(p *ptpkt.Packet) int {
	if d.evq.find(bindTIP, EvAsyncBranch) != nil {
		ev := d.evq.enqueue(bindTIP)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvAsyncPaging
		ev.CR3 = p.Payload
		ev.NonRoot = p.NR
		return 1
	}
	ev := d.standalone(EvPaging)
	ev.CR3 = p.Payload
	ev.NonRoot = p.NR
	d.eventTime(ev)
	return d.fetchPacket()
}

func (d *QueryDecoder) decodeVMCS(p *ptpkt.Packet) int {
	if ev := d.evq.find(bindTIP, EvAsyncPaging); ev != nil {
		paging := d.evq.enqueue(bindTIP)
		if paging == nil {
			return -int(CodeNomem)
		}
		*paging = *ev
		*ev = Event{Type: EvAsyncVMCS, Base: p.Payload}
		return 1
	}
	if d.evq.find(bindTIP, EvAsyncBranch) != nil {
		ev := d.evq.enqueue(bindTIP)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvAsyncVMCS
		ev.Base = p.Payload
		return 1
	}
	ev := d.standalone(EvVMCS)
	ev.Base = p.Payload
	d.eventTime(ev)
	return d.fetchPacket()
}

func (d *QueryDecoder) decodeExStop(p *ptpkt.Packet) int {
	// MWAIT and PWRE wait for the EXSTOP: MWAIT is reported before the
	// EXSTOP, PWRE after it; all bind to the FUP when EXSTOP.IP is set.
	target := bindNow
	if p.IPBit {
		target = bindFUP
	}
	// With an IP, PWRE keeps waiting (it is reported after the FUP's
	// events, when the next packet flushes it).
	var later [evqSize]Event
	nlater := 0
	for {
		ev := d.evq.dequeue(bindExStop)
		if ev == nil {
			break
		}
		if ev.Type != EvMWait {
			later[nlater] = *ev
			nlater++
			continue
		}
		if st := d.moveEvent(ev, target); st < 0 {
			return st
		}
	}
	ex := Event{Type: EvExStop}
	if st := d.moveEvent(&ex, target); st < 0 {
		return st
	}
	laterTarget := target
	if p.IPBit {
		laterTarget = bindExStop
	}
	for i := 0; i < nlater; i++ {
		if st := d.moveEvent(&later[i], laterTarget); st < 0 {
			return st
		}
	}
	if p.IPBit {
		return 1
	}
	d.fetchPacket()
	return d.deliverNow()
}

// moveEvent queues a copy of ev at binding b; events delivered now have no
// IP.
func (d *QueryDecoder) moveEvent(ev *Event, b int) int {
	e := d.evq.enqueue(b)
	if e == nil {
		return -int(CodeNomem)
	}
	*e = *ev
	if b == bindNow {
		e.IP = 0
		e.IPSuppressed = true
		d.eventTime(e)
	}
	return 0
}

// deliverNow publishes the next event queued for immediate delivery. It
// returns 0 if there was one, 1 otherwise.
func (d *QueryDecoder) deliverNow() int {
	ev := d.evq.dequeue(bindNow)
	if ev == nil {
		return 1
	}
	d.event = ev
	return 0
}

// flushExStop turns events waiting for an EXSTOP that will not come into
// standalone events.
func (d *QueryDecoder) flushExStop() {
	for {
		ev := d.evq.dequeue(bindExStop)
		if ev == nil {
			return
		}
		d.moveEvent(ev, bindNow)
	}
}

func (d *QueryDecoder) decodeMWait(p *ptpkt.Packet) int {
	ev := d.evq.enqueue(bindExStop)
	if ev == nil {
		return -int(CodeNomem)
	}
	ev.Type = EvMWait
	ev.Hints = p.Hints
	ev.Ext = p.Ext
	return 1
}

func (d *QueryDecoder) decodePTW(p *ptpkt.Packet) int {
	size := 4
	switch p.PLC {
	case 0:
	case 1:
		size = 8
	default:
		return -int(CodeBadPacket)
	}
	if p.IPBit {
		ev := d.evq.enqueue(bindFUP)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvPTWrite
		ev.Size = uint8(size)
		ev.Payload = p.Payload
		return 1
	}
	ev := d.standalone(EvPTWrite)
	ev.Size = uint8(size)
	ev.Payload = p.Payload
	ev.IPSuppressed = true
	d.eventTime(ev)
	return d.fetchPacket()
}

// decodePacket processes d.pkt. It returns 0 when it produced an event
// (d.event), a positive value when more packets are needed, or an error.
func (d *QueryDecoder) decodePacket() int {
	p := &d.pkt
	if st := d.deliverNow(); st == 0 {
		return 0
	}
	if !d.evq.empty(bindExStop) && !(p.Type == ptpkt.PktFUP && !d.evq.empty(bindFUP)) {
		switch p.Type {
		case ptpkt.PktExStop, ptpkt.PktPad, ptpkt.PktTSC, ptpkt.PktMTC, ptpkt.PktCYC, ptpkt.PktTMA, ptpkt.PktPwrE, ptpkt.PktMWait:
		default:
			d.flushExStop()
			return d.deliverNow()
		}
	}
	switch p.Type {
	case ptpkt.PktTNT8, ptpkt.PktTNT64:
		return d.decodeTNT()
	case ptpkt.PktCYC:
		d.time.cyc(p)
		return 1
	case ptpkt.PktPad:
		return 1
	case ptpkt.PktFUP:
		return d.decodeFUP(p)
	case ptpkt.PktTIP:
		return d.decodeTIP(p)
	case ptpkt.PktMTC:
		d.time.mtc(p)
		return 1
	case ptpkt.PktTSC:
		d.time.tsc(p)
		return 1
	case ptpkt.PktCBR:
		d.time.cbr(p)
		ev := d.standalone(EvCBR)
		ev.Ratio = p.CBR
		d.eventTime(ev)
		return d.fetchPacket()
	case ptpkt.PktTMA:
		d.time.tma(p)
		return 1
	case ptpkt.PktModeExec:
		return d.decodeModeExec(p)
	case ptpkt.PktModeTSX:
		return d.decodeModeTSX(p)
	case ptpkt.PktPIP:
		return d.decodePIP(p)
	case ptpkt.PktPTW:
		return d.decodePTW(p)
	case ptpkt.PktPSB:
		if st := d.decodePSB(); st <= 0 {
			return st
		}
		return d.decodePacket()
	case ptpkt.PktPSBEnd:
		return d.decodePSBEnd()
	case ptpkt.PktTIPPGE:
		return d.decodeTIPPGE(p)
	case ptpkt.PktTIPPGD:
		return d.decodeTIPPGD(p)
	case ptpkt.PktExStop:
		return d.decodeExStop(p)
	case ptpkt.PktPwrE:
		ev := d.evq.enqueue(bindExStop)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = EvPwrE
		ev.State, ev.SubState, ev.HW = p.State, p.SubState, p.HW
		return 1
	case ptpkt.PktPwrX:
		ev := d.standalone(EvPwrX)
		ev.Last, ev.Deepest = p.LastCState, p.DeepestCState
		ev.WakeIntr, ev.WakeStore, ev.WakeAuto = p.WakeInterrupt, p.WakeStore, p.WakeAutonomous
		d.eventTime(ev)
		return d.fetchPacket()
	case ptpkt.PktMWait:
		return d.decodeMWait(p)
	case ptpkt.PktVMCS:
		return d.decodeVMCS(p)
	case ptpkt.PktOVF:
		if !d.evq.empty(bindFUP) {
			// Events waiting for a FUP the overflow lost.
			for {
				ev := d.evq.dequeue(bindFUP)
				if ev == nil {
					break
				}
				if ev.Type == EvOverflow {
					continue
				}
				d.moveEvent(ev, bindNow)
			}
			if d.deliverNow() == 0 {
				return 0
			}
		}
		return d.decodeOVF()
	case ptpkt.PktTraceStop:
		ev := d.standalone(EvStop)
		d.eventTime(ev)
		return d.fetchPacket()
	case ptpkt.PktMNT:
		ev := d.standalone(EvMNT)
		ev.Payload = p.Payload
		d.eventTime(ev)
		return d.fetchPacket()
	case ptpkt.PktCFE:
		return d.decodeCFE(p)
	case ptpkt.PktEVD:
		return d.decodeEVD(p)
	case ptpkt.PktTrig:
		return d.decodeTrig(p)
	case ptpkt.PktBBP, ptpkt.PktBIP, ptpkt.PktBEP:
		// PEBS-via-PT block packets carry no control flow.
		return 1
	case ptpkt.PktInvalid:
		if d.status < 0 {
			return d.status
		}
		return 1
	}
	return -int(CodeBadOpc)
}

// fetchEvent decodes packets until one produces an event.
func (d *QueryDecoder) fetchEvent() int {
	for {
		if d.fast && d.pkt.Type == ptpkt.PktMTC && !d.eventWaits() {
			d.mtcRun()
		}
		if st := d.decodeStep(); st <= 0 {
			return st
		}
	}
}

// decodeStep decodes d.pkt (decodePacket) and, where that asks for more
// packets without delivering an event, moves to the next packet, which
// isn't bound. It returns 0 when d.event is ready, 1 to go on, or a
// negative Code.
func (d *QueryDecoder) decodeStep() int {
	st := d.decodePacket()
	if st <= 0 {
		return st
	}
	if d.event != nil {
		return -int(CodeInternal)
	}
	d.nextUnbound()
	return 1
}

// nextUnbound moves to the next packet after one that produced no event:
// that packet isn't bound.
func (d *QueryDecoder) nextUnbound() {
	d.bound = false
	d.fetchPacket()
}

// eventWaits reports whether an event waits to be delivered: decodePacket
// delivers it before it looks at the packet.
func (d *QueryDecoder) eventWaits() bool {
	return d.event != nil || !d.evq.empty(bindNow)
}

// mtcRun takes a run of MTC packets at d.pkt: what decodePacket and
// decodeStep do with each MTC when no event waits (the timing updated, the
// next packet not bound), in one loop over the bytes instead of a dispatch
// per packet (ptpkt.MTCRun, tested against UpdateMTC packet by packet; soft
// PT writes about one MTC an instruction). MTCRun also reads a TNT-8 after
// the run: d.pkt is then that packet.
//
// Precondition: !d.eventWaits().
func (d *QueryDecoder) mtcRun() {
	for d.pkt.Type == ptpkt.PktMTC {
		tnt8 := d.time.mtcRun(&d.pd, &d.pkt)
		d.bound = false
		if !tnt8 {
			d.fetchPacket()
		}
	}
}

// evtNext returns the next event into *ev.
func (d *QueryDecoder) evtNext(ev *Event) int {
	if st := d.fetchEvent(); st < 0 {
		return st
	}
	if d.event == nil {
		return -int(CodeInternal)
	}
	*ev = *d.event
	if ev.Offset == 0 {
		ev.Offset = d.Offset()
	}
	d.event = nil
	return 0
}

func (d *QueryDecoder) statusFlags() int {
	flags := 0
	// Have the user consume cached TNT bits before indicating events read
	// ahead.
	if d.tnt.Empty() {
		if d.qstatus < 0 {
			if d.qstatus == -int(CodeEOS) {
				flags |= stEOS
			} else {
				return d.qstatus
			}
		} else if d.cur.Type != EvTNT && d.cur.Type != EvTIP {
			flags |= stEventPending
		}
	}
	return flags
}

// fetchQEvent reads the next event ahead into d.cur (or the read-ahead's
// error into d.qstatus): fetchEvent, with soft PT's and a hot loop's
// packets taken first where decodePacket would take them with no event
// waiting, bound or to be flushed, through the same helpers but without
// building the standalone Event (a zeroed Event a packet) and copying it:
// runs of MTCs (mtcRun), then a TNT (decodeTNT: takeTNT) or a TIP with no
// event bound to it (decodeTIP's two visits: the TIP event, then, bound,
// the move to the next packet). With d.fast off (tests) it is fetchEvent
// and the copy alone: TestQueryFastPaths requires the same events.
func (d *QueryDecoder) fetchQEvent() {
	st := 0
loop:
	for {
		if d.fast && !d.eventWaits() {
			if d.pkt.Type == ptpkt.PktMTC {
				d.mtcRun()
			}
			if p := &d.pkt; d.enabled && d.evq.empty(bindExStop) {
				switch {
				case p.Type == ptpkt.PktTNT8 || p.Type == ptpkt.PktTNT64:
					d.cur.Type = EvTNT
					d.cur.IPSuppressed, d.cur.IP = false, 0
					d.takeTNT(&d.cur)
					d.cur.Offset = d.Offset()
					return
				case p.Type == ptpkt.PktTIP && d.evq.empty(bindTIP):
					if st = d.updateIP(p); st < 0 {
						break loop
					}
					if d.bound {
						d.nextUnbound()
						continue
					}
					d.bound = true
					d.cur.Type = EvTIP
					d.cur.IPSuppressed, d.cur.IP = false, 0
					d.cur.TNTBits, d.cur.TNTSize = 0, 0
					if st = d.eventIP(&d.cur.IP, &d.cur); st < 0 {
						break loop
					}
					d.cur.Offset = d.Offset()
					return
				}
			}
		}
		if st = d.decodeStep(); st <= 0 {
			break
		}
	}
	if st < 0 {
		d.qstatus = st
		d.cur = Event{Type: EvInvalid}
		return
	}
	e := d.event
	if e == nil {
		d.qstatus = -int(CodeInternal)
		d.cur = Event{Type: EvInvalid}
		return
	}
	d.event = nil
	switch e.Type {
	case EvTNT, EvTIP:
		// Of these the flow and query layers read only the fields
		// copied here (cacheTNT, indirectBranch, resyncScan;
		// peekEvent never hands them out), so the rest of the large
		// Event is not copied.
		d.cur.Type, d.cur.IPSuppressed, d.cur.IP = e.Type, e.IPSuppressed, e.IP
		d.cur.TNTBits, d.cur.TNTSize = e.TNTBits, e.TNTSize
		d.cur.Offset = e.Offset
	default:
		d.cur = *e
	}
	if d.cur.Offset == 0 {
		d.cur.Offset = d.Offset()
	}
}

// start initializes the query layer after synchronizing: it reads the PSB+
// status updates ahead (without consuming them) to find the start IP.
func (d *QueryDecoder) start() (ip uint64, status int) {
	saved := *d
	status = stIPSuppressed
	startPos := d.Offset()
	for {
		if d.Offset() != startPos {
			break
		}
		var ev Event
		st := d.evtNext(&ev)
		if st < 0 {
			if st != -int(CodeEOS) {
				*d = saved
				return 0, st
			}
			break
		}
		if !ev.StatusUpdate {
			break
		}
		if ev.Type == EvEnabled {
			status &^= stIPSuppressed
			ip = ev.IP
			break
		}
	}
	*d = saved
	// A trace that is broken right after the PSB+ fails to sync.
	probe := *d
	for {
		var ev Event
		st := probe.evtNext(&ev)
		if st < 0 {
			if st != -int(CodeEOS) {
				*d = probe // report the error where it is
				return 0, st
			}
			break
		}
		if !ev.StatusUpdate {
			break
		}
	}
	d.qstatus = 0
	d.fetchQEvent()
	flags := d.statusFlags()
	if flags < 0 {
		return 0, flags
	}
	return ip, status | flags
}

// SyncForward synchronizes at the next PSB. It returns the start IP and
// status flags, or a negative Code.
func (d *QueryDecoder) syncForward() (uint64, int) {
	d.qryReset()
	d.evtReset()
	if err := d.pd.SyncForward(); err != nil {
		return 0, packetErrCode(err)
	}
	if st := d.evtStart(); st < 0 {
		return 0, st
	}
	return d.start()
}

func (d *QueryDecoder) cacheTNT() int {
	if d.qstatus < 0 {
		return d.qstatus
	}
	if d.cur.Type != EvTNT {
		return 0
	}
	if err := d.tnt.Add(d.cur.TNTBits, int(d.cur.TNTSize)); err != nil {
		return tntErrCode(err)
	}
	d.fetchQEvent()
	return 0
}

// condBranch returns the next conditional branch outcome.
func (d *QueryDecoder) condBranch() (taken bool, status int) {
	// (The TNT cache's only error is ErrBadQuery, when it is empty:
	// tested as Empty, not by comparing errors.)
	if d.tnt.Empty() {
		d.lastTime = d.time.snap()
		// cacheTNT, inline: the read-ahead TNT's bits, then the next
		// event. (A one-bit TNT per branch is soft PT's usual trace.)
		if d.qstatus < 0 {
			return false, d.qstatus
		}
		if d.cur.Type != EvTNT {
			return false, -int(CodeBadQuery)
		}
		if err := d.tnt.Add(d.cur.TNTBits, int(d.cur.TNTSize)); err != nil {
			return false, tntErrCode(err)
		}
		d.fetchQEvent()
	}
	t, _ := d.tnt.Query()
	return t, d.statusFlags()
}

// tntErrCode maps a TNT cache error to a negative Code.
func tntErrCode(err error) int {
	switch err {
	case ptpkt.ErrBadContext:
		return -int(CodeBadContext)
	case ptpkt.ErrBadQuery:
		return -int(CodeBadQuery)
	}
	return -int(CodeBadPacket)
}

// indirectBranch returns the next indirect branch target.
func (d *QueryDecoder) indirectBranch() (ip uint64, status int) {
	if d.qstatus < 0 {
		return 0, d.qstatus
	}
	if d.cur.Type != EvTIP {
		if e := d.cacheTNT(); e < 0 {
			return 0, e
		}
		if d.cur.Type != EvTIP {
			if d.qstatus < 0 {
				return 0, d.qstatus
			}
			return 0, -int(CodeBadQuery)
		}
	}
	st := 0
	if d.cur.IPSuppressed {
		st |= stIPSuppressed
	} else {
		ip = d.cur.IP
	}
	d.lastTime = d.time.snap()
	d.fetchQEvent()
	return ip, st | d.statusFlags()
}

// peekEvent copies the pending event into *ev without consuming it.
func (d *QueryDecoder) peekEvent(ev *Event) int {
	if !d.tnt.Empty() {
		return -int(CodeBadQuery)
	}
	if d.qstatus < 0 {
		return d.qstatus
	}
	if d.cur.Type == EvTNT || d.cur.Type == EvTIP || d.cur.Type == EvInvalid {
		return -int(CodeBadQuery)
	}
	*ev = d.cur
	return 0
}

// consumeEvent moves past the pending event and returns the status flags
// for the next one.
func (d *QueryDecoder) consumeEvent() int {
	d.lastTime = d.time.snap()
	d.fetchQEvent()
	return d.statusFlags()
}

// timeNow returns the time at the last query.
func (d *QueryDecoder) timeNow() (tsc uint64, lostMTC, lostCYC uint32, ok bool) {
	return d.lastTime.query()
}
