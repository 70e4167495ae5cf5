package decode

import "github.com/ptjit/ptjit/x86"

// The query layer (libipt's pt_evt_* event decoder and pt_qry_* query
// decoder folded into one type): it turns packets into events, binding
// packets that belong together (FUP+TIP, MODE.Exec+TIP, OVF+FUP, PSB+
// headers at PSBEND) and answers the instruction flow's questions: the next
// conditional branch outcome (TNT), the next indirect branch target (TIP), the
// next event.
//
// Internal functions return 0 or a positive value on success and a negative
// errCode on failure, like libipt, which keeps the port of its binding rules
// easy to check against the reference.

// QueryDecoder decodes PT packets into branch outcomes and events.
type QueryDecoder struct {
	cfg *FlowConfig
	pd  PacketDecoder

	// Event-decoder state.
	pkt     Packet // the current packet, not yet processed
	status  int    // deferred packet decode error (negative) or 0
	event   *Event // the event produced by the current decode step
	enabled bool
	bound   bool
	ip      LastIP
	time    timeState
	evq     eventQueue
	// event trace state: EVD payloads wait for their CFE
	evd evdState
	// the last execution mode and RFLAGS.IF, to report only changes
	mode           x86.ExecMode
	modeKnown      bool
	iflag, ifKnown bool

	// Query-layer state.
	tnt      tntCache
	cur      Event // the next event, read ahead (libipt: qry->event)
	curValid bool
	qstatus  int // deferred error of the read-ahead (negative) or 0
	lastTime timeState
}

// NewQueryDecoder returns a query decoder over the PT bytes in buf.
func NewQueryDecoder(buf []byte, cfg *FlowConfig) *QueryDecoder {
	if cfg == nil {
		cfg = &FlowConfig{}
	}
	d := &QueryDecoder{cfg: cfg}
	d.pd = *NewPacketDecoder(buf, &cfg.Packet)
	d.evtReset()
	d.qryReset()
	return d
}

func (d *QueryDecoder) evtReset() {
	d.pkt = Packet{}
	d.status = -int(feNosync)
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
	d.qstatus = -int(feNosync)
	d.tnt.reset()
	d.lastTime = d.time
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
			d.pkt = Packet{}
			d.status = packetErrCode(err)
			return 0
		}
		if d.pkt.Type != PktPad {
			return 0
		}
	}
}

// packetErrCode maps a packet decoder error to a negative errCode.
func packetErrCode(err error) int {
	switch {
	case IsEOS(err):
		return -int(feEOS)
	case errorsIs(err, ErrBadOpcode):
		return -int(feBadOpc)
	case errorsIs(err, ErrBadPacket):
		return -int(feBadPacket)
	case errorsIs(err, ErrNoSync):
		return -int(feNosync)
	}
	return -int(feBadPacket)
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
	case feNoIP, feIPSuppressed:
		ev.IPSuppressed = true
	default:
		return -int(st)
	}
	return 0
}

func (d *QueryDecoder) updateIP(p *Packet) int {
	if err := d.ip.Update(p.IPC, p.IP); err != nil {
		return -int(feBadPacket)
	}
	return 0
}

// lastIPQuery returns the last IP or why there is none.
func lastIPQuery(l *LastIP) (uint64, errCode) {
	ip, err := l.IP()
	switch {
	case err == nil:
		return ip, 0
	case errorsIs(err, ErrIPSuppressed):
		return 0, feIPSuppressed
	}
	return 0, feNoIP
}

// findHeaderFUP looks ahead, from inside a PSB+, for its FUP. It returns 1
// and the FUP in *fup when there is one, 0 when the header has none.
func findHeaderFUP(pd PacketDecoder, fup *Packet) int {
	for {
		if err := pd.Next(fup); err != nil {
			return packetErrCode(err)
		}
		switch fup.Type {
		case PktFUP:
			return 1
		case PktModeExec, PktModeTSX, PktPIP, PktVMCS, PktMNT, PktTSC, PktCBR, PktTMA, PktMTC, PktCYC, PktPad:
		case PktPSBEnd, PktOVF:
			return 0
		default:
			return -int(feBadContext)
		}
	}
}

func (d *QueryDecoder) checkBDM70() int {
	pd := d.pd
	var p Packet
	for {
		if err := pd.Next(&p); err != nil {
			if IsEOS(err) {
				return 0
			}
			return packetErrCode(err)
		}
		switch p.Type {
		case PktTIPPGE:
			return 1
		case PktPad, PktTSC, PktCBR, PktPSBEnd, PktPIP, PktModeExec, PktModeTSX, PktVMCS, PktTMA, PktMTC, PktCYC, PktMNT:
		default:
			return 0
		}
	}
}

func (d *QueryDecoder) headerFUP(p *Packet) int {
	enabled := p.IPC != IPSuppressed
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

func execModeOf(p *Packet) x86.ExecMode {
	switch {
	case p.CSL:
		return x86.Mode64
	case p.CSD:
		return x86.Mode32
	}
	return x86.Mode16
}

func (d *QueryDecoder) headerMode(p *Packet) int {
	ev := d.evq.enqueue(bindPSBEnd)
	if ev == nil {
		return -int(feNomem)
	}
	ev.StatusUpdate = true
	ev.Offset = d.Offset()
	switch p.Type {
	case PktModeExec:
		ev.Type = EvExecMode
		ev.Mode = execModeOf(p)
		ev.IF = p.IF
		d.mode, d.modeKnown, d.iflag, d.ifKnown = ev.Mode, true, p.IF, true
	case PktModeTSX:
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
		return -int(feBadContext)
	}
	d.ip.Reset()
	d.enabled = false
	d.evd = evdState{}

	// The enabled/disabled status comes first; we fill it in at PSBEND.
	ev := d.evq.enqueue(bindPSBEnd)
	if ev == nil {
		return -int(feNomem)
	}
	ev.StatusUpdate = true
	for {
		d.fetchPacket()
		p := &d.pkt
		var st int
		switch p.Type {
		case PktFUP:
			st = d.headerFUP(p)
		case PktModeExec, PktModeTSX:
			st = d.headerMode(p)
		case PktPIP:
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(feNomem)
			}
			e.StatusUpdate = true
			e.Type = EvAsyncPaging
			e.CR3 = p.Payload
			e.NonRoot = p.NR
		case PktVMCS:
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(feNomem)
			}
			e.StatusUpdate = true
			e.Type = EvAsyncVMCS
			e.Base = p.Payload
		case PktMNT:
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(feNomem)
			}
			e.Type = EvMNT
			e.Payload = p.Payload
		case PktTSC:
			d.time.headerTSC(p)
		case PktCBR:
			d.time.headerCBR(p)
			e := d.evq.enqueue(bindPSBEnd)
			if e == nil {
				return -int(feNomem)
			}
			e.StatusUpdate = true
			e.Type = EvCBR
			e.Ratio = p.CBR
		case PktTMA:
			d.time.tma(p)
		case PktMTC:
			d.time.mtc(p)
		case PktCYC:
			d.time.cyc(p)
		case PktPSBEnd:
			if d.enabled {
				ev.Type = EvEnabled
			} else {
				ev.Type = EvDisabled
				ev.IPSuppressed = true
			}
			return 1
		case PktOVF:
			if d.enabled {
				ev.Type = EvEnabled
			} else {
				// Drop the status event we created first.
				if head := d.evq.dequeue(bindPSBEnd); head != ev {
					return -int(feInternal)
				}
			}
			return 1
		case PktPad:
		case PktInvalid:
			st = d.status
		default:
			st = -int(feBadContext)
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
	case PktPSB:
		if st := d.decodePSB(); st < 0 {
			return st
		}
		return 0
	case PktInvalid:
		if d.status < 0 {
			return d.status
		}
		return -int(feInternal)
	}
	return -int(feNosync)
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
		st = -int(feBadContext)
	}
	if st < 0 {
		return st
	}
	d.eventTime(ev)
	return 0
}

func (d *QueryDecoder) decodeFUP(p *Packet) int {
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
			return -int(feNomem)
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
		st = -int(feBadContext)
	}
	if st < 0 {
		return st
	}
	return 0
}

// findOVFFUP searches for the FUP an OVF binds to. It returns the number of
// bytes from the current position to just after that FUP, 0 if a packet
// shows the overflow resolved with tracing disabled, or a negative error.
func findOVFFUP(pd PacketDecoder) int {
	off := 0
	var p Packet
	for {
		if err := pd.Next(&p); err != nil {
			return packetErrCode(err)
		}
		if p.Size == 0 {
			return -int(feBadPacket)
		}
		off += int(p.Size)
		switch p.Type {
		case PktFUP:
			return off
		case PktPad, PktMNT, PktCBR, PktTSC, PktTMA, PktMTC, PktCYC:
		case PktPSB, PktTIPPGE, PktModeExec, PktModeTSX, PktPIP, PktVMCS, PktTraceStop, PktOVF,
			PktExStop, PktMWait, PktPwrE, PktPwrX, PktPTW, PktCFE, PktEVD, PktTrig,
			PktBBP, PktBIP, PktBEP:
			return 0
		case PktPSBEnd, PktTIP, PktTIPPGD, PktTNT8, PktTNT64:
			return -int(feBadContext)
		}
	}
}

func (d *QueryDecoder) applyTimingPacket(ts *timeState, p *Packet) {
	switch p.Type {
	case PktTSC:
		ts.tsc(p)
	case PktCBR:
		ts.cbr(p)
	case PktTMA:
		ts.tma(p)
	case PktMTC:
		ts.mtc(p)
	case PktCYC:
		ts.cyc(p)
	}
}

func (d *QueryDecoder) recoverOVFAtIP(pd *PacketDecoder, p *Packet, ipp *Packet, ts *timeState) int {
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

func (d *QueryDecoder) recoverOVFDisabled(pd *PacketDecoder, p *Packet, ts *timeState) int {
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
				return -int(feInternal)
			}
			break
		}
		off -= sz
		switch d.pkt.Type {
		case PktTSC, PktCBR, PktTMA, PktMTC, PktCYC:
			d.applyTimingPacket(&d.time, &d.pkt)
		case PktModeExec, PktModeTSX, PktPIP, PktVMCS, PktInvalid:
			return -int(feInternal)
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
	var p Packet
	for {
		if err := pd.Next(&p); err != nil {
			if IsEOS(err) {
				return 1
			}
			return packetErrCode(err)
		}
		switch p.Type {
		case PktTIPPGE:
			return 1
		case PktTIPPGD:
			if st := d.recoverOVFDisabled(&pd, &p, &ts); st < 0 {
				return st
			}
			return d.fetchPacket()
		case PktTNT8, PktTNT64:
			return 1
		case PktPIP, PktVMCS, PktModeExec:
		case PktModeTSX:
			if modeTSX.found {
				return 1
			}
			modeTSX.found, modeTSX.intx, modeTSX.abrt = true, p.InTX, p.Abort
		case PktFUP:
			d.pkt = p
			if modeTSX.found {
				ev := d.evq.enqueue(bindFUP)
				if ev == nil {
					return -int(feNomem)
				}
				ev.Type = EvTSX
				ev.Speculative = modeTSX.intx
				ev.Aborted = modeTSX.abrt
			}
			return d.recoverOVFAtIP(&pd, &p, &p, &ts)
		case PktTIP:
			if st := d.recoverOVFAtIP(&pd, &p, &p, &ts); st < 0 {
				return st
			}
			return d.fetchPacket()
		case PktPSB:
			var fup Packet
			st := findHeaderFUP(pd, &fup)
			if st < 0 {
				if st == -int(feEOS) {
					return 1
				}
				return st
			}
			if st == 0 {
				return 1
			}
			return d.recoverOVFAtIP(&pd, &p, &fup, &ts)
		case PktPSBEnd:
			return -int(feBadContext)
		case PktOVF, PktTraceStop:
			return 1
		case PktPad, PktMNT, PktPwrE, PktPwrX:
		case PktExStop:
			if !p.IPBit {
				break
			}
			return 1
		case PktMWait:
			return 1
		case PktPTW:
			if !p.IPBit {
				break
			}
			return 1
		case PktTSC, PktCBR, PktTMA, PktMTC, PktCYC:
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
	var p Packet
	for {
		if err := pd.Next(&p); err != nil {
			return packetErrCode(err)
		}
		switch p.Type {
		case PktTIPPGD:
			d.recoverOVFDisabled(&pd, &p, &ts)
			return d.fetchPacket()
		case PktFUP, PktPSB, PktTIPPGE, PktTraceStop, PktOVF, PktModeExec, PktModeTSX, PktPIP,
			PktVMCS, PktExStop, PktMWait, PktPwrE, PktPwrX, PktPTW:
			return 1
		case PktPSBEnd, PktTIP, PktTNT8, PktTNT64:
			return 1
		case PktTSC, PktCBR, PktTMA, PktMTC, PktCYC:
			d.applyTimingPacket(&ts, &p)
		case PktPad, PktMNT:
		default:
			return 1
		}
	}
}

// handleAPL12 checks whether tracing is really enabled after an OVF+FUP.
func (d *QueryDecoder) handleAPL12(off int) int {
	pd := d.pd
	if err := pd.SyncSet(pd.Offset() + uint64(off)); err != nil {
		return -int(feInternal)
	}
	var p Packet
	for {
		if err := pd.Next(&p); err != nil {
			if IsEOS(err) {
				return 1
			}
			return packetErrCode(err)
		}
		switch p.Type {
		case PktTNT8, PktTNT64, PktTIP, PktTIPPGD:
			return 1
		case PktPSB:
			var fup Packet
			st := findHeaderFUP(pd, &fup)
			if st != 0 {
				if st == -int(feEOS) {
					return 1
				}
				return st
			}
			return d.recoverOVFAtOffset(off)
		case PktTraceStop, PktTIPPGE:
			return d.recoverOVFAtOffset(off)
		case PktPSBEnd, PktOVF:
			return 1
		case PktPad, PktFUP, PktTSC, PktCBR, PktTMA, PktMTC, PktCYC, PktExStop, PktMWait,
			PktPwrE, PktPwrX, PktPTW, PktMNT, PktPIP, PktVMCS, PktModeExec, PktModeTSX:
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
		if d.cfg.Packet.Errata.APL11 && off == -int(feBadContext) {
			if st := d.handleAPL11(); st <= 0 {
				return st
			}
		}
		if off < 0 && off != -int(feEOS) {
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
		return -int(feNomem)
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
	return -int(feBadContext)
}

func (d *QueryDecoder) decodeTIPEvent() int {
	d.bound = true
	if async := d.evq.find(bindTIP, EvAsyncBranch); async != nil {
		ev := d.evq.dequeue(bindTIP)
		if ev == nil {
			return -int(feInternal)
		}
		if ev != async {
			*ev, *async = *async, *ev
		}
		if ev.Type != EvAsyncBranch {
			return -int(feInternal)
		}
		return d.atIP(ev)
	}
	return d.atIP(d.standalone(EvTIP))
}

func (d *QueryDecoder) decodeTIP(p *Packet) int {
	if !d.enabled {
		return -int(feBadContext)
	}
	if st := d.updateIP(p); st < 0 {
		return st
	}
	if !d.bound {
		return d.decodeTIPEvent()
	}
	return d.boundAtTIP(EvExecMode, EvIflags, EvAsyncPaging, EvAsyncVMCS)
}

func (d *QueryDecoder) decodeTIPPGE(p *Packet) int {
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

func (d *QueryDecoder) decodeTIPPGD(p *Packet) int {
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
			return -int(feInternal)
		}
		ev.IPSuppressed = true
	case EvExecMode, EvIflags:
		ev.IPSuppressed = true
	default:
		st = -int(feBadContext)
	}
	if st < 0 {
		return st
	}
	d.eventTime(ev)
	return 0
}

func (d *QueryDecoder) decodeTNT(p *Packet) int {
	if !d.enabled {
		return -int(feBadContext)
	}
	ev := d.evq.newStandalone()
	d.event = ev
	ev.Type = EvTNT
	ev.TNTBits = p.TNTPayload
	ev.TNTSize = p.TNTBits
	d.eventTime(ev)
	return d.fetchPacket()
}

// standalone publishes a standalone event of type t and moves on.
func (d *QueryDecoder) standalone(t EventType) *Event {
	ev := d.evq.newStandalone()
	d.event = ev
	ev.Type = t
	return ev
}

func (d *QueryDecoder) decodeModeExec(p *Packet) int {
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
			return -int(feNomem)
		}
		ev.Type = EvExecMode
		ev.Mode = mode
	}
	if !d.ifKnown || d.iflag != p.IF {
		ev := d.evq.enqueue(b)
		if ev == nil {
			return -int(feNomem)
		}
		ev.Type = EvIflags
		ev.IF = p.IF
	}
	if b == bindFUP && d.modeKnown && d.mode == mode && d.ifKnown && d.iflag == p.IF {
		ev := d.evq.enqueue(b)
		if ev == nil {
			return -int(feNomem)
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
	var p Packet
	for {
		if pd.Next(&p) != nil {
			return false
		}
		switch p.Type {
		case PktPad, PktTSC, PktMTC, PktCYC, PktTMA, PktCBR:
			continue
		}
		return p.Type == PktFUP
	}
}

func (d *QueryDecoder) decodeModeTSX(p *Packet) int {
	if d.enabled {
		ev := d.evq.enqueue(bindFUP)
		if ev == nil {
			return -int(feNomem)
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

func (d *QueryDecoder) decodePIP(p *Packet) int {
	if d.evq.find(bindTIP, EvAsyncBranch) != nil {
		ev := d.evq.enqueue(bindTIP)
		if ev == nil {
			return -int(feNomem)
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

func (d *QueryDecoder) decodeVMCS(p *Packet) int {
	if ev := d.evq.find(bindTIP, EvAsyncPaging); ev != nil {
		paging := d.evq.enqueue(bindTIP)
		if paging == nil {
			return -int(feNomem)
		}
		*paging = *ev
		*ev = Event{Type: EvAsyncVMCS, Base: p.Payload}
		return 1
	}
	if d.evq.find(bindTIP, EvAsyncBranch) != nil {
		ev := d.evq.enqueue(bindTIP)
		if ev == nil {
			return -int(feNomem)
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

func (d *QueryDecoder) decodeExStop(p *Packet) int {
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
		return -int(feNomem)
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

func (d *QueryDecoder) decodeMWait(p *Packet) int {
	ev := d.evq.enqueue(bindExStop)
	if ev == nil {
		return -int(feNomem)
	}
	ev.Type = EvMWait
	ev.Hints = p.Hints
	ev.Ext = p.Ext
	return 1
}

func (d *QueryDecoder) decodePTW(p *Packet) int {
	size := 4
	switch p.PLC {
	case 0:
	case 1:
		size = 8
	default:
		return -int(feBadPacket)
	}
	if p.IPBit {
		ev := d.evq.enqueue(bindFUP)
		if ev == nil {
			return -int(feNomem)
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
	if !d.evq.empty(bindExStop) && !(p.Type == PktFUP && !d.evq.empty(bindFUP)) {
		switch p.Type {
		case PktExStop, PktPad, PktTSC, PktMTC, PktCYC, PktTMA, PktPwrE, PktMWait:
		default:
			d.flushExStop()
			return d.deliverNow()
		}
	}
	switch p.Type {
	case PktTNT8, PktTNT64:
		return d.decodeTNT(p)
	case PktCYC:
		d.time.cyc(p)
		return 1
	case PktPad:
		return 1
	case PktFUP:
		return d.decodeFUP(p)
	case PktTIP:
		return d.decodeTIP(p)
	case PktMTC:
		d.time.mtc(p)
		return 1
	case PktTSC:
		d.time.tsc(p)
		return 1
	case PktCBR:
		d.time.cbr(p)
		ev := d.standalone(EvCBR)
		ev.Ratio = p.CBR
		d.eventTime(ev)
		return d.fetchPacket()
	case PktTMA:
		d.time.tma(p)
		return 1
	case PktModeExec:
		return d.decodeModeExec(p)
	case PktModeTSX:
		return d.decodeModeTSX(p)
	case PktPIP:
		return d.decodePIP(p)
	case PktPTW:
		return d.decodePTW(p)
	case PktPSB:
		if st := d.decodePSB(); st <= 0 {
			return st
		}
		return d.decodePacket()
	case PktPSBEnd:
		return d.decodePSBEnd()
	case PktTIPPGE:
		return d.decodeTIPPGE(p)
	case PktTIPPGD:
		return d.decodeTIPPGD(p)
	case PktExStop:
		return d.decodeExStop(p)
	case PktPwrE:
		ev := d.evq.enqueue(bindExStop)
		if ev == nil {
			return -int(feNomem)
		}
		ev.Type = EvPwrE
		ev.State, ev.SubState, ev.HW = p.State, p.SubState, p.HW
		return 1
	case PktPwrX:
		ev := d.standalone(EvPwrX)
		ev.Last, ev.Deepest = p.LastCState, p.DeepestCState
		ev.WakeIntr, ev.WakeStore, ev.WakeAuto = p.WakeInterrupt, p.WakeStore, p.WakeAutonomous
		d.eventTime(ev)
		return d.fetchPacket()
	case PktMWait:
		return d.decodeMWait(p)
	case PktVMCS:
		return d.decodeVMCS(p)
	case PktOVF:
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
	case PktTraceStop:
		ev := d.standalone(EvStop)
		d.eventTime(ev)
		return d.fetchPacket()
	case PktMNT:
		ev := d.standalone(EvMNT)
		ev.Payload = p.Payload
		d.eventTime(ev)
		return d.fetchPacket()
	case PktCFE:
		return d.decodeCFE(p)
	case PktEVD:
		return d.decodeEVD(p)
	case PktTrig:
		return d.decodeTrig(p)
	case PktBBP, PktBIP, PktBEP:
		// PEBS-via-PT block packets carry no control flow.
		return 1
	case PktInvalid:
		if d.status < 0 {
			return d.status
		}
		return 1
	}
	return -int(feBadOpc)
}

// fetchEvent decodes packets until one produces an event.
func (d *QueryDecoder) fetchEvent() int {
	for {
		st := d.decodePacket()
		if st <= 0 {
			return st
		}
		if d.event != nil {
			return -int(feInternal)
		}
		// The packet decoder asked for a new packet without delivering
		// an event; that new packet isn't bound.
		d.bound = false
		d.fetchPacket()
	}
}

// evtNext returns the next event into *ev.
func (d *QueryDecoder) evtNext(ev *Event) int {
	if st := d.fetchEvent(); st < 0 {
		return st
	}
	if d.event == nil {
		return -int(feInternal)
	}
	*ev = *d.event
	if ev.Offset == 0 {
		ev.Offset = d.Offset()
	}
	d.event = nil
	return 0
}

// Query-layer status flags (libipt's pt_status_flag).
const (
	stEventPending = 1 << 0
	stIPSuppressed = 1 << 1
	stEOS          = 1 << 2
)

func (d *QueryDecoder) statusFlags() int {
	flags := 0
	// Have the user consume cached TNT bits before indicating events read
	// ahead.
	if d.tnt.empty() {
		if d.qstatus < 0 {
			if d.qstatus == -int(feEOS) {
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

func (d *QueryDecoder) fetchQEvent() {
	if st := d.evtNext(&d.cur); st < 0 {
		d.qstatus = st
		d.cur = Event{Type: EvInvalid}
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
			if st != -int(feEOS) {
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
			if st != -int(feEOS) {
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
// status flags, or a negative errCode.
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
	if st := d.tnt.add(d.cur.TNTBits, int(d.cur.TNTSize)); st != 0 {
		return -int(st)
	}
	d.fetchQEvent()
	return 0
}

// condBranch returns the next conditional branch outcome.
func (d *QueryDecoder) condBranch() (taken bool, status int) {
	t, st := d.tnt.query()
	if st != 0 {
		if st != feBadQuery {
			return false, -int(st)
		}
		d.lastTime = d.time
		if e := d.cacheTNT(); e < 0 {
			return false, e
		}
		t, st = d.tnt.query()
		if st != 0 {
			if st != feBadQuery {
				return false, -int(st)
			}
			if d.qstatus < 0 {
				return false, d.qstatus
			}
			return false, -int(st)
		}
	}
	return t, d.statusFlags()
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
			return 0, -int(feBadQuery)
		}
	}
	st := 0
	if d.cur.IPSuppressed {
		st |= stIPSuppressed
	} else {
		ip = d.cur.IP
	}
	d.lastTime = d.time
	d.fetchQEvent()
	return ip, st | d.statusFlags()
}

// peekEvent copies the pending event into *ev without consuming it.
func (d *QueryDecoder) peekEvent(ev *Event) int {
	if !d.tnt.empty() {
		return -int(feBadQuery)
	}
	if d.qstatus < 0 {
		return d.qstatus
	}
	if d.cur.Type == EvTNT || d.cur.Type == EvTIP || d.cur.Type == EvInvalid {
		return -int(feBadQuery)
	}
	*ev = d.cur
	return 0
}

// consumeEvent moves past the pending event and returns the status flags
// for the next one.
func (d *QueryDecoder) consumeEvent() int {
	d.lastTime = d.time
	d.fetchQEvent()
	return d.statusFlags()
}

// timeNow returns the time at the last query.
func (d *QueryDecoder) timeNow() (tsc uint64, lostMTC, lostCYC uint32, ok bool) {
	return d.lastTime.query()
}
