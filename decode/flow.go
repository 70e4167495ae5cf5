package decode

import "github.com/ptjit/ptjit/x86"

// The instruction-flow layer (libipt's pt_insn_decoder): it walks the code
// in the Image instruction by instruction, asks the query layer for the
// outcome of every conditional branch, the target of every indirect branch
// and far transfer, resolves compressed returns with the return stack, and
// binds events to the instructions or addresses where they happened.

// FlowInsn is one instruction of the decoded flow.
type FlowInsn struct {
	IP          uint64
	Size        uint8
	Mode        x86.ExecMode
	Class       x86.InsnClass
	Speculative bool     // executed inside a TSX transaction
	Section     *Section // where the bytes came from
	Target      uint64   // direct branch target
	TSC         uint64   // time of the last timing update before it (0: none)
	flags       uint8
}

// FlowDecoder decodes the instruction flow of a trace.
type FlowDecoder struct {
	q   *QueryDecoder
	img *Image
	cfg *FlowConfig

	mode         x86.ExecMode
	ip           uint64
	status       int
	enabled      bool
	processEvent bool
	speculative  bool
	processInsn  bool
	boundPaging  bool
	boundVMCS    bool
	boundPTWrite bool

	event    Event
	insn     FlowInsn // the postponed instruction
	retstack retStack
	sec      *Section // section of the last instruction
	pageSec  *Section // d.page is page pageIdx of pageSec's cache
	pageIdx  uint64
	page     *[1 << cachePageBits]insnEntry
	bpageSec *Section // d.bpage is page bpageIdx of bpageSec's block cache
	bpageIdx uint64
	bpage    *[1 << cachePageBits]blockEntry
	icnt     uint64 // instructions since the last IP packet or trigger

	steps          uint64 // instructions since the last query or event
	maxSteps       uint64
	eventFromQuery bool // d.event is the query layer's pending event
	resyncing      bool // skipping to the next IP after an error
}

// NewFlowDecoder returns a decoder for the PT bytes in buf reading code
// from img.
func NewFlowDecoder(buf []byte, img *Image, cfg *FlowConfig) *FlowDecoder {
	if cfg == nil {
		cfg = &FlowConfig{}
	}
	max := cfg.MaxSteps
	if max == 0 {
		max = 1 << 24
	}
	return &FlowDecoder{q: NewQueryDecoder(buf, cfg), img: img, cfg: cfg, maxSteps: max}
}

// Query returns the underlying query decoder.
func (d *FlowDecoder) Query() *QueryDecoder { return d.q }

// EventOffset returns the trace offset of the packet that produced the
// pending event (where an error processing it is reported).
func (d *FlowDecoder) EventOffset() uint64 {
	if d.processEvent && d.eventFromQuery {
		return d.event.Offset
	}
	return d.q.Offset()
}

// Offset returns the trace offset of the packet being processed.
func (d *FlowDecoder) Offset() uint64 { return d.q.Offset() }

// IP returns the address of the next instruction.
func (d *FlowDecoder) IP() uint64 { return d.ip }

// Resync recovers from a decode error without a PSB: it drops the cached
// conditional branch outcomes and the events and skips to the next packet
// that gives an IP (a TIP, an asynchronous branch, an event with an IP, the
// next PSB+), reporting the events without IP it passes (libipt's ptxed
// --resync-on-error). An error is a *FlowError at the current offset and
// IP; CodeEOS means the trace ended on the way.
func (d *FlowDecoder) Resync() (Status, error) {
	d.processEvent = false
	d.eventFromQuery = false
	d.clearPostponed()
	d.q.tnt.Reset()
	d.resyncing = true
	st := d.resyncScan()
	if st < 0 {
		return 0, &FlowError{Code: Code(-st), Offset: d.Offset(), IP: d.IP()}
	}
	return Status(st), nil
}

func (d *FlowDecoder) resyncScan() int {
	q := d.q
	for {
		if q.qstatus < 0 {
			d.resyncing = false
			if q.qstatus == -int(CodeEOS) {
				d.status = stEOS
				return d.flowStatus(0)
			}
			return q.qstatus
		}
		cur := &q.cur
		pendingAt := func(ip uint64) int {
			d.ip = ip
			d.enabled = true
			d.resyncing = false
			d.status = stEventPending
			return d.checkIPEvent(nil)
		}
		switch cur.Type {
		case EvTNT:
			q.fetchQEvent()
			continue
		case EvTIP:
			if cur.IPSuppressed {
				q.fetchQEvent()
				continue
			}
			d.ip = cur.IP
			d.enabled = true
			d.resyncing = false
			st := q.consumeEvent()
			if st < 0 {
				return st
			}
			d.status = st
			return d.checkIPEvent(nil)
		case EvEnabled:
			if cur.StatusUpdate {
				return pendingAt(cur.IP)
			}
			if d.enabled {
				// Close the section we lost before reporting the
				// new enable.
				d.event = Event{Type: EvDisabled, IPSuppressed: true}
				d.processEvent = true
				d.eventFromQuery = false
				return d.flowStatus(stEventPending)
			}
			d.resyncing = false
			d.status = stEventPending
			return d.checkIPEvent(nil)
		case EvAsyncBranch, EvAsyncDisabled:
			return pendingAt(cur.From)
		case EvOverflow:
			d.resyncing = false
			d.status = stEventPending
			return d.checkIPEvent(nil)
		case EvDisabled:
			d.enabled = true
			d.resyncing = false
			d.event = *cur
			d.processEvent = true
			d.eventFromQuery = true
			return d.flowStatus(stEventPending)
		}
		if !cur.IPSuppressed {
			return pendingAt(cur.IP)
		}
		// Report events without IP on the way.
		d.event = *cur
		d.processEvent = true
		d.eventFromQuery = true
		return d.flowStatus(stEventPending)
	}
}

func (d *FlowDecoder) reset() {
	d.resyncing = false
	d.eventFromQuery = false
	d.icnt = 0
	d.mode = x86.ModeUnknown
	d.ip = 0
	d.status = 0
	d.enabled = false
	d.processEvent = false
	d.speculative = false
	d.processInsn = false
	d.boundPaging, d.boundVMCS, d.boundPTWrite = false, false, false
	d.retstack.reset()
	d.sec = nil
	d.pageSec, d.page = nil, nil
	d.bpageSec, d.bpage = nil, nil
}

func (d *FlowDecoder) flowStatus(flags int) int {
	if !d.enabled {
		flags |= stIPSuppressed
	}
	if d.status&stEOS != 0 && !d.processEvent {
		flags |= stEOS
	}
	return flags
}

// tick synthesizes a tick event if time changed since the last event.
func (d *FlowDecoder) tick(ip uint64) int {
	if !d.enabled {
		return -int(CodeInternal)
	}
	if d.processEvent {
		return 0
	}
	tsc, lostMTC, lostCYC, ok := d.q.timeNow()
	ev := &d.event
	if tsc == ev.TSC {
		return 0
	}
	*ev = Event{Type: EvTick, IP: ip, HasTSC: ok, TSC: tsc, LostMTC: lostMTC, LostCYC: lostCYC}
	d.processEvent = true
	d.eventFromQuery = false
	return 1
}

func (d *FlowDecoder) indirectBranch() (uint64, int) {
	evip := d.ip
	d.steps = 0
	ip, st := d.q.indirectBranch()
	if st >= 0 {
		st = d.queried(evip, st)
	}
	if st < 0 {
		return 0, st
	}
	return ip, st
}

func (d *FlowDecoder) condBranch() (bool, int) {
	taken, st := d.askCond()
	if st >= 0 {
		st = d.queried(d.ip, st)
	}
	return taken, st
}

// askCond asks the trace for the outcome of the conditional branch (or
// compressed return) just passed.
func (d *FlowDecoder) askCond() (taken bool, st int) {
	d.steps = 0
	return d.q.condBranch()
}

// queried is what follows a query that answered at ip (status flags st):
// the instructions count from there, and a tick event is due if time
// moved. It returns st or an error.
func (d *FlowDecoder) queried(ip uint64, st int) int {
	d.icnt = 0
	if d.cfg.TickEvents {
		if e := d.tick(ip); e < 0 {
			return e
		}
	}
	return st
}

func (d *FlowDecoder) start(ip uint64, st int) int {
	if st < 0 {
		return st
	}
	d.ip = ip
	d.status = st
	if st&stIPSuppressed == 0 {
		d.enabled = true
	}
	return d.checkIPEvent(nil)
}

// SyncForward synchronizes at the next PSB. An error is a *FlowError at the
// offset where synchronizing stopped (its IP is zero); CodeEOS means there
// is no further PSB.
func (d *FlowDecoder) SyncForward() (Status, error) {
	d.reset()
	ip, st := d.q.syncForward()
	if st = d.start(ip, st); st < 0 {
		return 0, &FlowError{Code: Code(-st), Offset: d.Offset()}
	}
	return Status(st), nil
}

func (d *FlowDecoder) eventPending() int {
	if d.processEvent {
		return 1
	}
	if d.status&stEventPending == 0 {
		return 0
	}
	st := d.q.peekEvent(&d.event)
	if st < 0 {
		return st
	}
	d.processEvent = true
	d.eventFromQuery = true
	return 1
}

// decodeAt decodes the instruction at d.ip into in.
func (d *FlowDecoder) decodeAt(in *FlowInsn) int {
	var tsc uint64
	versions := d.img.nver != 0
	if versions {
		// Only versioned images depend on the time.
		tsc = d.q.lastTime.tscOrZero()
	}
	s := d.sec
	if s == nil || d.ip-s.Vaddr >= uint64(len(s.Data)) || (versions && (s.shadowed || !s.validAt(tsc))) {
		s = d.img.Lookup(d.ip, tsc)
		if s == nil && versions {
			s = d.img.LookupNext(d.ip, tsc)
		}
		if s == nil {
			return -int(CodeNomap)
		}
		d.sec = s
	}
	off := d.ip - s.Vaddr
	var e *insnEntry
	if pg := off >> cachePageBits; s == d.pageSec && pg == d.pageIdx {
		e = &d.page[off&(1<<cachePageBits-1)]
	} else {
		e = s.cache.entry(off, len(s.Data))
		if e != nil {
			d.pageSec, d.pageIdx, d.page = s, pg, s.cache.pages[pg]
		}
	}
	if e != nil && e.size != 0 && e.mode == d.mode {
		in.Size, in.Class, in.flags, in.Section = e.size, e.class, e.flags, s
		in.Target = 0
		if e.class.IsDirect() {
			in.Target = d.ip + uint64(int64(e.disp))
		}
		return 0
	}
	var raw [x86.MaxInsnLen]byte
	n := copy(raw[:], s.Data[off:])
	if n < len(raw) {
		// The instruction may continue in the next section.
		n, _ = d.img.Read(raw[:], d.ip, max(tsc, s.FromTSC))
	}
	var x x86.Insn
	if err := x86.DecodeInsn(raw[:n], d.ip, d.mode, &x); err != nil {
		if !FixupInsn(raw[:n], d.ip, d.mode, &x) {
			return -int(CodeBadInsn)
		}
	} else {
		FixupInsn(raw[:n], d.ip, d.mode, &x)
	}
	in.Size, in.Class, in.Target, in.Section = x.Len, x.Class, x.Target, s
	in.flags = insnFlags(&x)
	var disp int64
	if x.Class.IsDirect() {
		disp = int64(x.Target - d.ip)
	}
	if e != nil && off+uint64(x.Len) <= uint64(len(s.Data)) && disp == int64(int32(disp)) {
		*e = insnEntry{size: x.Len, class: x.Class, mode: d.mode, flags: in.flags, disp: int32(disp)}
	}
	return 0
}

func (d *FlowDecoder) checkErratumSKD022() bool {
	var in FlowInsn
	if d.decodeAt(&in) < 0 {
		return false
	}
	return in.Class == x86.ClassVMEntry
}

func (d *FlowDecoder) handleErratumSKD022() int {
	if !d.checkErratumSKD022() {
		return 0
	}
	// Turn the async disable into a sync disable, processed after the
	// instruction.
	ev := &d.event
	ev.Type = EvDisabled
	return 1
}

// proceed moves d.ip past in.
func (d *FlowDecoder) proceed(in *FlowInsn) int {
	return d.follow(in.Class, in.Size, in.Target)
}

// follow moves d.ip past the instruction at d.ip, of class c, size bytes
// long and with the direct branch target target, asking the trace where
// the class needs it: the one rule for every kind of instruction, for Next
// (proceed) and for the instruction that ends a block (nextBlock, which
// puts the usual kinds together from the same inlined helpers itself:
// pass, call, askCond, queried and takeCond).
func (d *FlowDecoder) follow(c x86.InsnClass, size uint8, target uint64) int {
	d.pass(size)
	switch c {
	case x86.ClassPTWrite, x86.ClassOther, x86.ClassMovCR3:
		return 0
	case x86.ClassCondJump:
		taken, st := d.askCond()
		if st >= 0 {
			st = d.queried(d.ip, st)
		}
		return d.takeCond(taken, st, target)
	case x86.ClassCall:
		d.call(target)
		return 0
	case x86.ClassJump:
		d.ip = target
		return 0
	case x86.ClassIndCall:
		d.retstack.push(d.ip)
	case x86.ClassRet:
		taken, st := d.condBranch()
		if st >= 0 {
			d.status = st
			if !taken {
				return -int(CodeBadRetcomp)
			}
			ip, ok := d.retstack.pop()
			if !ok {
				return -int(CodeRetstackEmpty)
			}
			d.ip = ip
			return 0
		}
	}
	// Indirect branches and far transfers.
	ip, st := d.indirectBranch()
	if st < 0 {
		return st
	}
	d.status = st
	if st&stIPSuppressed != 0 {
		return -int(CodeNoIP)
	}
	d.ip = ip
	return 0
}

// pass moves d.ip past an instruction of size bytes at d.ip, counting it.
func (d *FlowDecoder) pass(size uint8) {
	d.ip += uint64(size)
	d.icnt++
}

// call follows a direct call to target, d.ip past it: a call to the next
// instruction (position-independent code) is not a call for return
// compression.
func (d *FlowDecoder) call(target uint64) {
	if target != d.ip {
		d.retstack.push(d.ip)
	}
	d.ip = target
}

// takeCond follows a conditional branch to target, d.ip past it, by the
// answer (taken, st) of askCond and queried: status flags or an error.
func (d *FlowDecoder) takeCond(taken bool, st int, target uint64) int {
	if st < 0 {
		return st
	}
	d.status = st
	if taken {
		d.ip = target
	}
	return 0
}

func isFarBranch(in *FlowInsn) bool { return in.Class.IsFar() }

func changesCPL(in *FlowInsn) bool {
	switch in.Class {
	case x86.ClassSyscall, x86.ClassSysret:
		return true
	case x86.ClassFarRet:
		return in.flags&insnFlagIret != 0
	}
	return false
}

func changesCR3(in *FlowInsn) bool { return in.Class == x86.ClassMovCR3 }

func bindsToPIP(in *FlowInsn) bool {
	switch in.Class {
	case x86.ClassMovCR3, x86.ClassVMEntry:
		return true
	}
	return isFarBranch(in)
}

func bindsToVMCS(in *FlowInsn) bool {
	if in.Class == x86.ClassVMEntry || in.flags&insnFlagVMPtrld != 0 {
		return true
	}
	return isFarBranch(in)
}

// cfeBindsTo reports whether a synchronous event-trace event without IP
// belongs to instruction in.
func cfeBindsTo(t EventType, in *FlowInsn) bool {
	switch t {
	case EvIret, EvUiret:
		return in.Class == x86.ClassFarRet
	case EvVMEntry:
		return in.Class == x86.ClassVMEntry
	case EvSyscall:
		return in.Class == x86.ClassSyscall
	}
	return false
}

func isBranch(in *FlowInsn) bool { return in.Class.IsBranch() }

// nextIP returns the address after in when it does not depend on the trace.
func nextIP(in *FlowInsn) (uint64, int) {
	switch in.Class {
	case x86.ClassOther, x86.ClassPTWrite, x86.ClassMovCR3:
		return in.IP + uint64(in.Size), 0
	case x86.ClassCall, x86.ClassJump:
		return in.Target, 0
	}
	return 0, -int(CodeBadQuery)
}

func (d *FlowDecoder) atSKL014(ev *Event, in *FlowInsn) bool {
	if !ev.IPSuppressed {
		return false
	}
	switch in.Class {
	case x86.ClassCall, x86.ClassJump:
		return !d.cfg.Filter.check(in.Target)
	}
	return false
}

func (d *FlowDecoder) atDisabledEvent(ev *Event, in *FlowInsn) bool {
	if ev.IPSuppressed {
		if isFarBranch(in) || changesCPL(in) || changesCR3(in) {
			return true
		}
		// An indirect branch whose TIP.PGD has no IP.
		if in.Class.IsIndirectNear() {
			return true
		}
		if d.cfg.Filter.any() && d.cfg.Packet.Errata.SKL014 && d.atSKL014(ev, in) {
			return true
		}
		return false
	}
	switch in.Class {
	case x86.ClassOther, x86.ClassPTWrite, x86.ClassMovCR3:
		return false
	case x86.ClassCall, x86.ClassJump:
		// With an IP, a direct branch elsewhere is not where tracing
		// got disabled.
		return in.Target == ev.IP
	}
	return true
}

func (d *FlowDecoder) postpone(in *FlowInsn) int {
	if !d.processInsn {
		d.processInsn = true
		d.insn = *in
	}
	return d.flowStatus(stEventPending)
}

func (d *FlowDecoder) clearPostponed() {
	d.processInsn = false
	d.boundPaging, d.boundVMCS, d.boundPTWrite = false, false, false
}

func (d *FlowDecoder) proceedPostponed() int {
	if !d.processInsn {
		return -int(CodeInternal)
	}
	if !d.enabled {
		d.clearPostponed()
		return 0
	}
	if st := d.proceed(&d.insn); st < 0 {
		return st
	}
	d.clearPostponed()
	return 0
}

// checkInsnEvent checks for events binding to the instruction in.
func (d *FlowDecoder) checkInsnEvent(in *FlowInsn) int {
	st := d.eventPending()
	if st <= 0 {
		return st
	}
	ev := &d.event
	switch ev.Type {
	case EvTIP, EvTNT:
		return -int(CodeInternal)
	case EvDisabled:
		if ev.StatusUpdate {
			return 0
		}
		if !d.atDisabledEvent(ev, in) {
			return 0
		}
		ip, e := nextIP(in)
		if e < 0 {
			ip = 0
			switch in.Class {
			case x86.ClassIndCall, x86.ClassFarCall, x86.ClassSyscall, x86.ClassVMExit:
				ip = in.IP + uint64(in.Size)
			}
		}
		d.ip = ip
	case EvPaging:
		if d.boundPaging || !bindsToPIP(in) {
			return 0
		}
		d.boundPaging = true
		return d.postpone(in)
	case EvVMCS:
		if d.boundVMCS || !bindsToVMCS(in) {
			return 0
		}
		d.boundVMCS = true
		return d.postpone(in)
	case EvIret, EvUiret, EvVMEntry, EvSyscall:
		if ev.IPSuppressed {
			if !cfeBindsTo(ev.Type, in) {
				return 0
			}
		} else if in.IP != ev.IP {
			return 0
		}
		return d.postpone(in)
	case EvPTWrite:
		if d.boundPTWrite {
			return 0
		}
		if ev.IPSuppressed {
			// The event binds to the next ptwrite; like libipt's
			// current event decoder, its IP stays unknown.
			if in.Class != x86.ClassPTWrite {
				return 0
			}
		} else if d.ip != ev.IP {
			return 0
		}
		d.boundPTWrite = true
		return d.postpone(in)
	default:
		return 0
	}
	return d.flowStatus(stEventPending)
}

const bdm64MaxSteps = 0x100

// rangeIsContiguous reports whether the flow can get from begin to end
// without branching, in at most steps instructions.
func (d *FlowDecoder) rangeIsContiguous(begin, end uint64, steps int) bool {
	saveIP, saveSec := d.ip, d.sec
	defer func() { d.ip, d.sec = saveIP, saveSec }()
	d.ip = begin
	for ; steps > 0; steps-- {
		if d.ip == end {
			return true
		}
		var in FlowInsn
		in.IP = d.ip
		if d.decodeAt(&in) < 0 {
			return false
		}
		ip, e := nextIP(&in)
		if e < 0 {
			return false
		}
		d.ip = ip
	}
	return false
}

func (d *FlowDecoder) handleErratumBDM64(ev *Event, in *FlowInsn) bool {
	if !ev.Aborted || !isBranch(in) {
		return false
	}
	if d.rangeIsContiguous(d.ip, ev.IP, bdm64MaxSteps) {
		return false
	}
	d.ip = ev.IP
	return true
}

func (d *FlowDecoder) postponeTSX(in *FlowInsn, ev *Event) bool {
	if ev.IPSuppressed {
		return false
	}
	if in != nil && d.cfg.Packet.Errata.BDM64 {
		d.handleErratumBDM64(ev, in)
	}
	return d.ip != ev.IP
}

// checkIPEvent checks for events binding to d.ip.
func (d *FlowDecoder) checkIPEvent(in *FlowInsn) int {
	st := d.eventPending()
	if st <= 0 {
		if st < 0 {
			return st
		}
		return d.flowStatus(0)
	}
	ev := &d.event
	pending := d.flowStatus(stEventPending)
	switch ev.Type {
	case EvDisabled:
		if ev.StatusUpdate {
			return pending
		}
	case EvEnabled:
		return pending
	case EvAsyncDisabled:
		if ev.From != d.ip {
			break
		}
		if d.cfg.Packet.Errata.SKD022 {
			if d.handleErratumSKD022() != 0 {
				break
			}
		}
		return pending
	case EvTSX:
		if d.postponeTSX(in, ev) {
			break
		}
		return pending
	case EvAsyncBranch:
		if ev.From != d.ip {
			break
		}
		return pending
	case EvOverflow:
		return pending
	case EvExecMode, EvIflags:
		if !ev.IPSuppressed && d.enabled && ev.IP != d.ip {
			break
		}
		return pending
	case EvPaging:
		if d.enabled {
			break
		}
		return pending
	case EvAsyncPaging, EvAsyncVMCS:
		if !ev.IPSuppressed && ev.IP != d.ip {
			break
		}
		return pending
	case EvVMCS:
		if d.enabled {
			break
		}
		return pending
	case EvStop:
		return pending
	case EvExStop, EvMWait:
		if !ev.IPSuppressed && d.enabled && d.ip != ev.IP {
			break
		}
		return pending
	case EvPwrE, EvPwrX:
		return pending
	case EvPTWrite:
		if d.enabled {
			break
		}
		return pending
	case EvTick, EvCBR, EvMNT:
		return pending
	case EvTIP, EvTNT:
		return -int(CodeInternal)
	case EvIret, EvUiret, EvVMEntry, EvSyscall:
		// Synchronous event-trace events bind to their instruction
		// (checkInsnEvent) while tracing is enabled.
		if d.enabled {
			break
		}
		return pending
	case EvTrig:
		if ev.IPSuppressed && ev.HasICNT && d.enabled {
			// A trigger with an instruction count binds to the
			// instruction that many instructions after the last IP
			// packet or trigger.
			if d.icnt < uint64(ev.ICNT) {
				break
			}
			ev.IP = d.ip
			ev.IPSuppressed = false
		} else if !ev.IPSuppressed && d.enabled && d.ip != ev.IP {
			break
		}
		return pending
	default:
		// Event-trace events bind to their IP when they have one.
		if !ev.IPSuppressed && d.enabled && d.ip != ev.IP {
			break
		}
		return pending
	}
	return d.flowStatus(0)
}

// Next decodes the next instruction into in. An error is a *FlowError at
// the current offset with the IP of in; in.IP (and, if in.Size is not zero,
// the rest of in) describe the instruction at which the error happened.
// CodeEOS means the trace ended; CodeNoEnable that tracing is disabled.
func (d *FlowDecoder) Next(in *FlowInsn) (Status, error) {
	*in = FlowInsn{}
	if !d.enabled {
		if d.status&stEOS != 0 {
			return 0, d.nextError(-int(CodeEOS), in)
		}
		return 0, d.nextError(-int(CodeNoEnable), in)
	}
	in.Speculative = d.speculative
	in.IP = d.ip
	in.Mode = d.mode
	in.TSC = d.q.lastTime.tscOrZero()
	d.steps++
	if d.steps > d.maxSteps {
		d.steps = 0
		return 0, d.nextError(-int(CodeNoProgress), in)
	}
	if st := d.decodeAt(in); st < 0 {
		in.Size = 0
		return 0, d.nextError(st, in)
	}
	quiet := !d.processEvent && d.status&stEventPending == 0
	if !quiet {
		st := d.checkInsnEvent(in)
		if st < 0 {
			return 0, d.nextError(st, in)
		}
		if st&stEventPending != 0 {
			return Status(st), nil
		}
	} else if in.Class == x86.ClassOther {
		// The common case: nothing to bind, nothing to ask the trace
		// (follow's rule for this class).
		d.pass(in.Size)
		return Status(d.flowStatus(0)), nil
	}
	if st := d.proceed(in); st < 0 {
		return 0, d.nextError(st, in)
	}
	if !d.processEvent && d.status&stEventPending == 0 {
		return Status(d.flowStatus(0)), nil
	}
	st := d.checkIPEvent(in)
	if st < 0 {
		return 0, d.nextError(st, in)
	}
	return Status(st), nil
}

// nextError is Next's error for the negative status st at instruction in.
func (d *FlowDecoder) nextError(st int, in *FlowInsn) error {
	return &FlowError{Code: Code(-st), Offset: d.Offset(), IP: in.IP}
}

func (d *FlowDecoder) processEnabled() int {
	ev := &d.event
	if ev.StatusUpdate {
		if !d.enabled {
			return -int(CodeBadStatusUpdate)
		}
		return 0
	}
	if ev.IPSuppressed {
		return -int(CodeNoIP)
	}
	if d.enabled {
		return -int(CodeBadContext)
	}
	d.ip = ev.IP
	d.enabled = true
	return 0
}

func (d *FlowDecoder) processDisabled() int {
	ev := &d.event
	if ev.StatusUpdate {
		if d.enabled {
			return -int(CodeBadStatusUpdate)
		}
		return 0
	}
	if !d.enabled {
		return -int(CodeBadContext)
	}
	d.enabled = false
	return 0
}

// Event returns the pending event into *ev; call it while SyncForward,
// Next, Resync or Event report StatusEventPending. An error is a *FlowError
// at the offset of the packet that produced the event (EventOffset) and the
// current IP.
func (d *FlowDecoder) Event(ev *Event) (Status, error) {
	st := d.nextEvent(ev)
	if st < 0 {
		return 0, &FlowError{Code: Code(-st), Offset: d.EventOffset(), IP: d.IP()}
	}
	return Status(st), nil
}

// nextEvent is Event with libipt's convention: status flags or a negative
// Code.
func (d *FlowDecoder) nextEvent(ev *Event) int {
	if !d.processEvent {
		return -int(CodeBadQuery)
	}
	e := &d.event
	switch e.Type {
	case EvEnabled:
		if d.ip == e.IP {
			e.Resumed = true
		}
		if st := d.processEnabled(); st < 0 {
			return st
		}
	case EvAsyncDisabled:
		if !e.IPSuppressed && d.ip != e.From {
			return -int(CodeBadQuery)
		}
		if st := d.processDisabled(); st < 0 {
			return st
		}
	case EvDisabled:
		if st := d.processDisabled(); st < 0 {
			return st
		}
	case EvAsyncBranch:
		if d.ip != e.From {
			return -int(CodeBadQuery)
		}
		if e.StatusUpdate || !d.enabled {
			return -int(CodeBadContext)
		}
		d.ip = e.IP
	case EvAsyncPaging, EvAsyncVMCS:
		if !e.IPSuppressed && d.ip != e.IP {
			return -int(CodeBadQuery)
		}
	case EvPaging, EvVMCS:
	case EvOverflow:
		if e.StatusUpdate {
			return -int(CodeBadContext)
		}
		if e.IPSuppressed {
			d.enabled = false
			d.ip = 0
		} else {
			d.ip = e.IP
			d.enabled = true
		}
		d.speculative = false
	case EvExecMode:
		if e.StatusUpdate && d.enabled && d.mode != x86.ModeUnknown && d.mode != e.Mode {
			return -int(CodeBadStatusUpdate)
		}
		d.mode = e.Mode
	case EvTSX:
		d.speculative = e.Speculative
	case EvStop:
		if e.StatusUpdate || d.enabled {
			return -int(CodeBadContext)
		}
	case EvExStop, EvMWait:
		if !e.IPSuppressed && d.enabled && d.ip != e.IP {
			return -int(CodeBadQuery)
		}
	case EvTIP, EvTNT, EvInvalid:
		return -int(CodeBadQuery)
	}
	if !e.IPSuppressed {
		d.icnt = 0
	}
	d.steps = 0
	*ev = *e
	d.processEvent = false
	if d.eventFromQuery {
		d.eventFromQuery = false
		st := d.q.consumeEvent()
		if st < 0 {
			return st
		}
		d.status = st
	}
	if d.resyncing {
		return d.resyncScan()
	}
	if d.processInsn {
		st := d.checkInsnEvent(&d.insn)
		if st != 0 {
			if st < 0 || st&stEventPending != 0 {
				return st
			}
		}
		if st := d.proceedPostponed(); st < 0 {
			return st
		}
	}
	return d.checkIPEvent(nil)
}

// Time returns the time of the last query (the timestamp of the current
// instruction).
func (d *FlowDecoder) Time() (tsc uint64, ok bool) {
	tsc, _, _, ok = d.q.timeNow()
	return tsc, ok
}
