package decode

import "github.com/ptjit/ptjit/ptpkt"

// Event trace (CFE and EVD packets) and TRIG packets.

// evdState collects the EVD payloads that precede their CFE packet.
type evdState struct {
	cr2, vmxq, vmxr             uint64
	haveCR2, haveVMXQ, haveVMXR bool
}

func (d *QueryDecoder) decodeEVD(p *ptpkt.Packet) int {
	// EVD packets precede their CFE: CR2 only an INTR, VMXQ/VMXR only a
	// VMEXIT (possibly after more VMX EVDs).
	if d.evd.haveCR2 {
		return -int(CodeBadContext)
	}
	switch p.EvType {
	case ptpkt.EVDCR2:
		if d.evd.haveVMXQ || d.evd.haveVMXR {
			return -int(CodeBadContext)
		}
		d.evd.cr2, d.evd.haveCR2 = p.Payload, true
	case ptpkt.EVDVMXQ:
		d.evd.vmxq, d.evd.haveVMXQ = p.Payload, true
	case ptpkt.EVDVMXR:
		d.evd.vmxr, d.evd.haveVMXR = p.Payload, true
	}
	return 1
}

// checkEVD verifies that the collected EVD payloads fit a CFE of type t.
func (d *QueryDecoder) checkEVD(t uint8) int {
	if d.evd.haveCR2 && t != ptpkt.CFEIntr {
		return -int(CodeBadContext)
	}
	if (d.evd.haveVMXQ || d.evd.haveVMXR) && t != ptpkt.CFEVMExit && t != ptpkt.CFEVMExitIntr {
		return -int(CodeBadContext)
	}
	return 0
}

// cfeIsSync reports event-trace events caused by an instruction (their IP,
// if given, is that instruction's); the others are asynchronous (their IP is
// where execution was interrupted).
func cfeIsSync(t EventType) bool {
	switch t {
	case EvIret, EvUiret, EvVMEntry, EvSyscall:
		return true
	}
	return false
}

// cfeEventType maps a CFE type to an event type.
func cfeEventType(t uint8) (EventType, bool) {
	switch t {
	case ptpkt.CFEIntr:
		return EvInterrupt, true
	case ptpkt.CFEIRet:
		return EvIret, true
	case ptpkt.CFESMI:
		return EvSMI, true
	case ptpkt.CFERSM:
		return EvRSM, true
	case ptpkt.CFESIPI:
		return EvSIPI, true
	case ptpkt.CFEInit:
		return EvInit, true
	case ptpkt.CFEVMEntry:
		return EvVMEntry, true
	case ptpkt.CFEVMExit, ptpkt.CFEVMExitIntr:
		return EvVMExit, true
	case ptpkt.CFEShutdown:
		return EvShutdown, true
	case ptpkt.CFEUIntr:
		return EvUintr, true
	case ptpkt.CFEUIRet:
		return EvUiret, true
	case ptpkt.CFESWIntr:
		return EvSwIntr, true
	case ptpkt.CFESyscall:
		return EvSyscall, true
	}
	return EvInvalid, false
}

func (d *QueryDecoder) fillCFE(ev *Event, p *ptpkt.Packet) {
	ev.Vector = p.Vector
	switch p.EvType {
	case ptpkt.CFEIntr:
		ev.CR2, ev.HasCR2 = d.evd.cr2, d.evd.haveCR2
	case ptpkt.CFEVMExitIntr:
		ev.HasVec = true
		fallthrough
	case ptpkt.CFEVMExit:
		ev.VMXR, ev.HasVMXR = d.evd.vmxr, d.evd.haveVMXR
		ev.VMXQ, ev.HasVMXQ = d.evd.vmxq, d.evd.haveVMXQ
	}
	d.evd = evdState{}
}

func (d *QueryDecoder) decodeCFE(p *ptpkt.Packet) int {
	if st := d.checkEVD(p.EvType); st < 0 {
		return st
	}
	t, ok := cfeEventType(p.EvType)
	if !ok {
		// Unknown CFE types are skipped, like unknown packets.
		d.evd = evdState{}
		return 1
	}
	// A CFE with IP binds to the FUP that follows. So does an
	// asynchronous one without IP while tracing is enabled (the FUP of
	// the interrupted instruction); synchronous ones without IP bind to
	// the next instruction of their kind (see the flow layer).
	if p.IPBit || (d.enabled && !cfeIsSync(t) && d.nextIsFUP()) {
		ev := d.evq.enqueue(bindFUP)
		if ev == nil {
			return -int(CodeNomem)
		}
		ev.Type = t
		d.fillCFE(ev, p)
		ev.bindsToIP = !p.IPBit
		return 1
	}
	ev := d.standalone(t)
	d.fillCFE(ev, p)
	ev.IPSuppressed = true
	d.eventTime(ev)
	return d.fetchPacket()
}

func (d *QueryDecoder) decodeTrig(p *ptpkt.Packet) int {
	fill := func(ev *Event) {
		ev.Type = EvTrig
		ev.TRBV = p.TRBV
		ev.Mult = p.Mult
		ev.ICNT, ev.HasICNT = p.ICNT, p.ICNTValid
	}
	if p.IPBit {
		ev := d.evq.enqueue(bindFUP)
		if ev == nil {
			return -int(CodeNomem)
		}
		fill(ev)
		return 1
	}
	ev := d.evq.newStandalone()
	d.event = ev
	fill(ev)
	ev.IPSuppressed = true
	d.eventTime(ev)
	return d.fetchPacket()
}
