package softpt

import (
	"github.com/ptjit/ptjit/ptpkt"
	"github.com/ptjit/ptjit/x86"
)

// Config is the trace configuration the software trace claims to have been
// recorded with; it mirrors the intel_pt//u config bits a perf.data
// AUXTRACE_INFO carries, so that a decoder reading the trace uses the same
// rules the generator used.
type Config struct {
	// RetCompression: a ret whose target is the address its matching call
	// pushed is a taken TNT bit instead of a TIP (intel_pt//u without
	// noretcomp). The compression stack is cleared at every PSB, as perf's
	// decoder expects.
	RetCompression bool
	// PSBPeriod is the number of trace bytes after which a PSB+ is
	// inserted at the next instruction boundary (0: 4096).
	PSBPeriod int
	// MTC enables MTC packets every 2^MTCFreq crystal-clock ticks, and TMA
	// in PSB+.
	MTC     bool
	MTCFreq uint8
	// CTCRatio is TSC ticks per crystal-clock (CTC) tick: CPUID.15H
	// EBX/EAX. 0 means 1.
	CTCRatio uint64
}

// DefaultConfig is what `ptjit run --pt=soft` records with: perf's
// intel_pt//u defaults (return compression on, TSC, MTC every 2^3 ticks).
var DefaultConfig = Config{RetCompression: true, PSBPeriod: 4096, MTC: true, MTCFreq: 3, CTCRatio: 100}

// maxRetStack bounds the return-compression stack (hardware keeps a small
// one too; an overflowing entry is simply forgotten, so that ret becomes a
// TIP).
const maxRetStack = 64

// Thread generates the packets of one thread. It is not safe for
// concurrent use; the tracker drives one per traced thread.
type Thread struct {
	cfg     Config
	buf     []byte
	enabled bool
	started bool   // the first PSB+ was written
	lastIP  uint64 // for IP compression; cleared at PSB
	psbAt   int    // len(buf) + drained at which the next PSB+ is due
	drained int    // bytes handed out by Take

	tnt     uint64 // pending TNT bits, oldest first (bit tntN-1)
	tntN    uint8
	ret     []uint64
	lastMTC uint64 // CTC >> MTCFreq at the last MTC or TMA
	insns   uint64
	mtc     uint64 // bytes of MTC packets written
	pkt     ptpkt.Packet
}

// NewThread returns a generator with tracing disabled.
func NewThread(cfg Config) *Thread {
	if cfg.PSBPeriod <= 0 {
		cfg.PSBPeriod = 4096
	}
	if cfg.CTCRatio == 0 {
		cfg.CTCRatio = 1
	}
	return &Thread{cfg: cfg, ret: make([]uint64, 0, maxRetStack)}
}

// Enabled reports whether the thread is currently traced (between Enable
// and Disable).
func (t *Thread) Enabled() bool { return t.enabled }

// MTCBytes returns the bytes of MTC packets written so far. Stepping is
// slow, so a soft trace spans far more crystal-clock periods per
// instruction than the same flow on hardware: these bytes are the part of
// the trace that does not compare.
func (t *Thread) MTCBytes() uint64 { return t.mtc }

// Instructions returns the number of instructions stepped so far.
func (t *Thread) Instructions() uint64 { return t.insns }

// Take returns the trace bytes generated since the last call. The bytes end
// at a packet boundary (perf cannot rejoin a packet split across two
// AUXTRACE buffers). The returned slice is valid until the next call.
func (t *Thread) Take() []byte {
	t.flushTNT()
	b := t.buf
	t.drained += len(b)
	t.buf = t.buf[len(b):]
	if cap(t.buf) == 0 {
		t.buf = nil
	}
	return b
}

// TakeCopy is Take for callers that keep the bytes.
func (t *Thread) TakeCopy() []byte {
	return append([]byte(nil), t.Take()...)
}

func (t *Thread) emit(p *ptpkt.Packet) {
	var err error
	if t.buf, err = ptpkt.AppendPacket(t.buf, p); err != nil {
		// The generator builds packets from fields it validated; an
		// encoding error is a bug in this package.
		panic("softpt: " + err.Error())
	}
}

func (t *Thread) ctc(tsc uint64) uint64 { return tsc / t.cfg.CTCRatio }

// psbPlus writes a PSB+ header: PSB, TSC, TMA, MODE.Exec, FUP (when tracing
// is enabled) and PSBEND. The last IP and the return stack are reset, as a
// decoder that syncs here knows neither.
func (t *Thread) psbPlus(ip uint64, tsc uint64) {
	t.flushTNT()
	t.pkt = ptpkt.Packet{Type: ptpkt.PktPSB}
	t.emit(&t.pkt)
	t.timestamp(tsc)
	t.lastIP = 0
	t.ret = t.ret[:0]
	if t.enabled {
		t.pkt = ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true}
		t.emit(&t.pkt)
		t.ipPacket(ptpkt.PktFUP, ip)
	}
	t.pkt = ptpkt.Packet{Type: ptpkt.PktPSBEnd}
	t.emit(&t.pkt)
	t.psbAt = t.drained + len(t.buf) + t.cfg.PSBPeriod
	t.started = true
}

// timestamp writes a TSC packet and, when MTC is on, the TMA that relates
// the crystal clock to it. The SDM's TMA packet definition: "Sent with any
// TSC packet" (IA32_RTIT_CTL.MTCEn && TSCEn), "always sent immediately
// following a TSC packet". Decoders depend on it: libipt's pt_time (and
// ptpkt.Time, which follows it) and perf's decoder drop every MTC between a
// TSC and its TMA, so a TSC alone at an enable would freeze the time until
// the next PSB.
func (t *Thread) timestamp(tsc uint64) {
	t.pkt = ptpkt.Packet{Type: ptpkt.PktTSC, Payload: tsc & (1<<56 - 1)}
	t.emit(&t.pkt)
	if t.cfg.MTC {
		// FC is the TSC ticks since the last crystal-clock tick; it has
		// 9 bits, enough for every CTC ratio seen in CPUID.15H.
		ctc, fc := t.ctc(tsc), tsc%t.cfg.CTCRatio
		if fc > 0x1ff {
			fc = 0
		}
		t.pkt = ptpkt.Packet{Type: ptpkt.PktTMA, CTC: uint16(ctc), FC: uint16(fc)}
		t.emit(&t.pkt)
		t.lastMTC = ctc >> t.cfg.MTCFreq
	}
}

// ipPacket writes an IP packet with the smallest compression the last IP
// allows, as the hardware does, and updates the last IP.
func (t *Thread) ipPacket(typ ptpkt.PacketType, ip uint64) {
	t.pkt = ptpkt.Packet{Type: typ}
	last := t.lastIP
	switch {
	case ip>>16 == last>>16:
		t.pkt.IPC, t.pkt.IP = ptpkt.IPUpdate16, ip&0xffff
	case ip>>32 == last>>32:
		t.pkt.IPC, t.pkt.IP = ptpkt.IPUpdate32, ip&0xffffffff
	case uint64(int64(ip<<16)>>16) == ip:
		t.pkt.IPC, t.pkt.IP = ptpkt.IPSext48, ip&(1<<48-1)
	case ip>>48 == last>>48:
		t.pkt.IPC, t.pkt.IP = ptpkt.IPUpdate48, ip&(1<<48-1)
	default:
		t.pkt.IPC, t.pkt.IP = ptpkt.IPFull, ip
	}
	t.lastIP = ip
	t.emit(&t.pkt)
}

// suppressed writes an IP packet without payload (TIP.PGD into the kernel:
// CPL filtering hides the kernel target).
func (t *Thread) suppressed(typ ptpkt.PacketType) {
	t.pkt = ptpkt.Packet{Type: typ, IPC: ptpkt.IPSuppressed}
	t.emit(&t.pkt)
}

// tick writes an MTC when the crystal clock crossed an MTC period since the
// last one. Only the low 8 bits of the period count travel; a decoder
// tolerates missed periods because TSC packets re-anchor the time at every
// enable and PSB.
func (t *Thread) tick(tsc uint64) {
	if !t.cfg.MTC {
		return
	}
	now := t.ctc(tsc) >> t.cfg.MTCFreq
	if now == t.lastMTC {
		return
	}
	t.flushTNT()
	t.lastMTC = now
	t.pkt = ptpkt.Packet{Type: ptpkt.PktMTC, MTC: uint8(now)}
	t.emit(&t.pkt)
	t.mtc += 2
}

func (t *Thread) addTNT(taken bool) {
	t.tnt <<= 1
	if taken {
		t.tnt |= 1
	}
	t.tntN++
	if t.tntN == 6 {
		t.flushTNT()
	}
}

// flushTNT writes the pending TNT bits as one short TNT packet. Every
// packet that carries an IP must follow the TNT bits of the branches before
// it.
func (t *Thread) flushTNT() {
	if t.tntN == 0 {
		return
	}
	t.pkt = ptpkt.Packet{Type: ptpkt.PktTNT8, TNTBits: t.tntN, TNTPayload: t.tnt}
	t.emit(&t.pkt)
	t.tnt, t.tntN = 0, 0
}

// Enable starts tracing at ip (the first user-mode instruction after exec,
// a return from the kernel, a signal handler's first instruction): TSC (and
// TMA), MODE.Exec and TIP.PGE, preceded by the first PSB+ of the thread.
func (t *Thread) Enable(ip uint64, tsc uint64) {
	if t.enabled {
		return
	}
	if !t.started {
		t.psbPlus(ip, tsc)
	}
	t.flushTNT()
	t.timestamp(tsc)
	t.pkt = ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true}
	t.emit(&t.pkt)
	t.ipPacket(ptpkt.PktTIPPGE, ip)
	t.enabled = true
}

// Interrupt records an asynchronous exit to the kernel before the
// instruction at ip executed (a fault, a signal, a ptrace stop that ptjit
// acts on): FUP(ip) and TIP.PGD without IP. The thread resumes with Enable.
func (t *Thread) Interrupt(ip uint64, tsc uint64) {
	if !t.enabled {
		return
	}
	t.tick(tsc)
	t.flushTNT()
	t.ipPacket(ptpkt.PktFUP, ip)
	t.suppressed(ptpkt.PktTIPPGD)
	t.disabled()
}

// disabled ends an enabled stretch. The return-compression stack does not
// survive it: decoders disagree on whether theirs does, and a ret written
// as a TIP decodes under either rule.
func (t *Thread) disabled() {
	t.enabled = false
	t.ret = t.ret[:0]
}

// Disable ends tracing after a kernel entry instruction that does not
// return (exit, exit_group, a fatal signal) or at the end of the recording.
func (t *Thread) Disable(tsc uint64) {
	if !t.enabled {
		return
	}
	t.tick(tsc)
	t.flushTNT()
	t.suppressed(ptpkt.PktTIPPGD)
	t.disabled()
}

// Step records that the instruction in retired and execution continued at
// next, at time tsc. A syscall (or int) that returned is a TIP.PGD into the
// kernel and a TIP.PGE back at next. Precondition: Enabled.
func (t *Thread) Step(in *x86.Insn, next uint64, tsc uint64) {
	t.insns++
	t.tick(tsc)
	fall := in.IP + uint64(in.Len)
	switch in.Class {
	case x86.ClassCondJump:
		t.addTNT(next != fall)
	case x86.ClassCall:
		if in.Target != fall { // a zero-length call is no call for decoders
			t.push(fall)
		}
	case x86.ClassIndCall:
		t.push(fall)
		t.flushTNT()
		t.ipPacket(ptpkt.PktTIP, next)
	case x86.ClassIndJump:
		t.flushTNT()
		t.ipPacket(ptpkt.PktTIP, next)
	case x86.ClassRet:
		if n := len(t.ret); t.cfg.RetCompression && n > 0 && t.ret[n-1] == next {
			t.ret = t.ret[:n-1]
			t.addTNT(true)
			break
		}
		// Not compressed: decoders disagree on whether this ret pops
		// their stack, so ours is emptied (package doc, "Return
		// compression").
		t.ret = t.ret[:0]
		t.flushTNT()
		t.ipPacket(ptpkt.PktTIP, next)
	case x86.ClassSyscall, x86.ClassSysret, x86.ClassFarCall, x86.ClassFarRet, x86.ClassFarJump:
		// From user mode these enter the kernel (syscall, int, far
		// transfers through gates): tracing stops at the branch and
		// resumes where the kernel returns to.
		t.flushTNT()
		t.suppressed(ptpkt.PktTIPPGD)
		t.disabled()
		t.Enable(next, tsc)
	default:
		// Direct jumps and every non-branch: nothing to say.
	}
	if t.enabled && t.drained+len(t.buf) >= t.psbAt {
		t.psbPlus(next, tsc)
	}
}

// Leave records that in retired and execution went on at next, outside
// the traced address range (ptjit run --soft-filter): a TIP.PGD ends the
// stretch, as a CPU's IP filter makes it. For a conditional branch the
// payload is suppressed (the decoder knows the target from the
// instruction); for every other instruction it is the IP execution
// continued at. A ret leaves uncompressed: its target is the PGD's IP.
// Precondition: Enabled.
func (t *Thread) Leave(in *x86.Insn, next uint64, tsc uint64) {
	t.insns++
	t.tick(tsc)
	fall := in.IP + uint64(in.Len)
	if in.Class == x86.ClassCondJump && next != fall {
		t.flushTNT()
		t.suppressed(ptpkt.PktTIPPGD)
		t.disabled()
		return
	}
	if in.Class == x86.ClassCondJump {
		t.addTNT(false) // not taken, and the fall-through is outside
	}
	t.flushTNT()
	t.ipPacket(ptpkt.PktTIPPGD, next)
	t.disabled()
}

// StepExit records that in, a syscall that never returns (exit,
// exit_group, an execve that replaced the image), retired into the kernel:
// tracing ends there with TIP.PGD.
func (t *Thread) StepExit(in *x86.Insn, tsc uint64) {
	if !t.enabled {
		return
	}
	t.insns++
	t.tick(tsc)
	t.flushTNT()
	t.suppressed(ptpkt.PktTIPPGD)
	t.disabled()
}

func (t *Thread) push(ret uint64) {
	if !t.cfg.RetCompression {
		return
	}
	if len(t.ret) == maxRetStack {
		copy(t.ret, t.ret[1:])
		t.ret = t.ret[:maxRetStack-1]
	}
	t.ret = append(t.ret, ret)
}

// Resync writes a PSB+ where the thread's bytes continue on another
// stream (a CPU's queue after a context switch): the decoder there knows
// neither the last IP nor the return stack. Per-cpu layout.
func (t *Thread) Resync(ip, tsc uint64) { t.psbPlus(ip, tsc) }

// Preempt records that an interrupt took the thread off its CPU before the
// instruction at ip: FUP(ip) and TIP.PGD, with no timing packet, so the
// instructions before it keep their times before the context switch.
func (t *Thread) Preempt(ip uint64) {
	if !t.enabled {
		return
	}
	t.flushTNT()
	t.ipPacket(ptpkt.PktFUP, ip)
	t.suppressed(ptpkt.PktTIPPGD)
	t.disabled()
}
