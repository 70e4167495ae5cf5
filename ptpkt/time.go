package ptpkt

import (
	"errors"
	"math"
	"math/bits"
)

// Errors of the timing state machines (libipt's pt_errstr texts, which
// ptdump prints).
var (
	ErrNoTime     = errors.New("no timing information")
	ErrNoCBR      = errors.New("no core:bus ratio")
	ErrBadContext = errors.New("unexpected packet context")
	ErrBadConfig  = errors.New("bad configuration")
	ErrInternal   = errors.New("internal error")
)

// FCRShift is the fixed-point shift of the fast-counter-rate (FCR), the
// TSC ticks per CYC cycle times 2^FCRShift.
const FCRShift = 8

// Bit sizes of timing payloads.
const (
	tscBits    = 56 // TSC packet payload
	mtcBits    = 8  // MTC packet payload
	tmaCTCBits = 16 // TMA CTC field
	tmaCTCMask = 1<<tmaCTCBits - 1
)

// Time estimates the TSC at every timing packet (libipt's pt_time): TSC
// packets give the full time; TMA and MTC add crystal-clock (CTC) ticks
// converted with CPUID 0x15; CYC adds core cycles converted with the FCR
// from a TimeCal. The zero value has no time.
type Time struct {
	tsc    uint64 // current estimate
	base   uint64 // TSC at the last TSC/MTC
	fc     uint64 // fast-counter ticks since base
	ctc    uint32 // CTC at the last MTC (or TMA)
	ctcCyc uint32 // CTC at the last reset of fc
	cbr    uint8

	lostMTC, lostCYC uint32

	haveTSC, haveCBR, haveTMA, haveMTC bool
}

// Reset forgets all timing state.
func (t *Time) Reset() { *t = Time{} }

// TSC returns the estimated TSC and the number of MTC and CYC packets
// that could not be used since the last TSC. Without any TSC packet it
// still returns the relative estimate, with ErrNoTime.
func (t *Time) TSC() (tsc uint64, lostMTC, lostCYC uint32, err error) {
	if !t.haveTSC {
		err = ErrNoTime
	}
	return t.tsc, t.lostMTC, t.lostCYC, err
}

// CBR returns the last core:bus ratio, or ErrNoCBR.
func (t *Time) CBR() (uint8, error) {
	if !t.haveCBR {
		return 0, ErrNoCBR
	}
	return t.cbr, nil
}

// ctcDelta returns ctc - last, correcting a single wrap-around of the
// MTC-visible CTC bits.
func ctcDelta(ctc, last uint32, cfg *Config) (uint32, error) {
	if ctc < last {
		ctc += shl32(1, uint(cfg.MTCFreq)+mtcBits)
		if ctc < last {
			return 0, ErrBadPacket
		}
	}
	return ctc - last, nil
}

// shl32 is x << n with C-on-x86 semantics for n >= 32 avoided: it returns 0
// for shifts that would drop every bit.
func shl32(x uint32, n uint) uint32 {
	if n >= 32 {
		return 0
	}
	return x << n
}

// ctcToFC converts CTC ticks to fast-counter (TSC) ticks: ctc * EBX / EAX.
// A power-of-two EAX (1 in software PT's recordings, 2 on many Intel
// parts) divides by a shift: the same quotient, without a 64-bit DIV on
// every MTC (a third of the decoder's time on a soft-PT recording, where
// every instruction has its MTC).
func ctcToFC(ctc uint64, cfg *Config) (uint64, error) {
	d := uint64(cfg.CPUID15EAX)
	if d == 0 || cfg.CPUID15EBX == 0 {
		return 0, ErrBadConfig
	}
	n := ctc * uint64(cfg.CPUID15EBX)
	if d&(d-1) == 0 {
		return n >> uint(bits.TrailingZeros64(d)), nil
	}
	return n / d, nil
}

// UpdateTSC applies a TSC packet.
func (t *Time) UpdateTSC(p *Packet, cfg *Config) error {
	t.haveTSC, t.haveTMA, t.haveMTC = true, false, false
	t.tsc, t.base = p.Payload, p.Payload
	t.ctc, t.fc = 0, 0
	t.lostMTC, t.lostCYC = 0, 0
	return nil
}

// UpdateCBR applies a CBR packet. A zero ratio is ErrBadPacket.
func (t *Time) UpdateCBR(p *Packet, cfg *Config) error {
	if p.CBR == 0 {
		return ErrBadPacket
	}
	t.haveCBR, t.cbr = true, p.CBR
	return nil
}

// UpdateTMA applies a TMA packet, which must follow a TSC.
func (t *Time) UpdateTMA(p *Packet, cfg *Config) error {
	if !t.haveTSC || t.haveTMA {
		return ErrBadContext
	}
	if t.haveMTC {
		return ErrInternal
	}
	mtcHi := uint(cfg.MTCFreq) + mtcBits
	mask := shl32(1, mtcHi) - 1
	fc := uint64(p.FC)
	t.haveTMA = true
	t.base -= fc
	t.fc += fc
	// If TMA provides all the CTC bits MTC does, it serves as an MTC;
	// otherwise the next MTC estimates the missing high bits.
	if mtcHi <= tmaCTCBits {
		t.haveMTC = true
	}
	t.ctc = uint32(p.CTC) & mask
	t.ctcCyc = t.ctc
	return nil
}

// UpdateMTC applies an MTC packet.
func (t *Time) UpdateMTC(p *Packet, cfg *Config) error {
	haveTSC, haveTMA, haveMTC := t.haveTSC, t.haveTMA, t.haveMTC
	// MTCs between TSC and TMA are ignored.
	if haveTSC && !haveTMA {
		return nil
	}
	base, last := t.base, t.ctc
	ctc := shl32(uint32(p.MTC), uint(cfg.MTCFreq))
	if t.fc != 0 || t.lostCYC != 0 || !haveMTC {
		t.ctcCyc = ctc
	}
	t.haveMTC, t.fc, t.ctc = true, 0, ctc
	t.lostCYC = 0

	if !haveMTC {
		// The first MTC: without a TMA there is no reference.
		if !haveTMA {
			return nil
		}
		if last&^tmaCTCMask != 0 {
			return ErrInternal
		}
		// Estimate the CTC bits above the TMA's from this MTC.
		lo, hi := ctc&tmaCTCMask, ctc&^uint32(tmaCTCMask)
		if lo < last {
			hi -= 1 << tmaCTCBits
			hi &= shl32(0xff, uint(cfg.MTCFreq))
		}
		last |= hi
	}
	delta, err := ctcDelta(ctc, last, cfg)
	if err != nil {
		t.lostMTC++
		return err
	}
	tsc, err := ctcToFC(uint64(delta), cfg)
	if err != nil {
		return err
	}
	base += tsc
	t.tsc, t.base = base, base
	return nil
}

// adjustCYC removes from a CYC payload spanning several MTC periods the
// part estimated (with fcr) for the earlier periods.
func (t *Time) adjustCYC(cyc uint64, cfg *Config, fcr uint64) (uint64, error) {
	if fcr == 0 {
		return 0, ErrInternal
	}
	if t.ctc == t.ctcCyc {
		return cyc, nil
	}
	delta, err := ctcDelta(t.ctc, t.ctcCyc, cfg)
	if err != nil {
		return 0, err
	}
	fc, err := ctcToFC(uint64(delta), cfg)
	if err != nil {
		return 0, err
	}
	old := (fc << FCRShift) / fcr
	if cyc < old {
		cyc = old
	}
	return cyc - old, nil
}

// UpdateCYC applies a CYC packet with the calibration fcr (from
// TimeCal.FCR); fcr == 0 counts the CYC as lost.
func (t *Time) UpdateCYC(p *Packet, cfg *Config, fcr uint64) error {
	if fcr == 0 {
		t.lostCYC++
		return nil
	}
	cyc, fc := p.Payload, t.fc
	if fc == 0 {
		var err error
		if cyc, err = t.adjustCYC(cyc, cfg, fcr); err != nil {
			return err
		}
	}
	fc += (cyc * fcr) >> FCRShift
	t.fc = fc
	t.tsc = t.base + fc
	return nil
}

// TimeCal calibrates CYC packets: it computes the fast-counter rate (FCR)
// from the cycles seen between two MTCs, two TSCs in PSB+, or from CBR
// and the nominal frequency (libipt's pt_time_cal). Use NewTimeCal or
// Reset before use.
type TimeCal struct {
	fcr, minFCR, maxFCR uint64
	tsc                 uint64 // last TSC
	cycTSC, cycMTC      uint64 // cycles since the last TSC / MTC
	ctc                 uint32 // CTC at the last MTC
	lostMTC             uint32
	haveMTC             bool
	checkSKL168         bool
}

// NewTimeCal returns an uncalibrated TimeCal.
func NewTimeCal() TimeCal {
	var c TimeCal
	c.Reset()
	return c
}

// Reset forgets the calibration.
func (c *TimeCal) Reset() { *c = TimeCal{minFCR: math.MaxUint64} }

func (c *TimeCal) haveFCR() bool { return c.minFCR <= c.maxFCR }

// FCR returns the current fast-counter rate (<< FCRShift), or ErrNoTime
// before any calibration.
func (c *TimeCal) FCR() (uint64, error) {
	if !c.haveFCR() {
		return 0, ErrNoTime
	}
	return c.fcr, nil
}

// SetFCR sets the fast-counter rate.
func (c *TimeCal) SetFCR(fcr uint64) {
	c.fcr = fcr
	c.minFCR = min(c.minFCR, fcr)
	c.maxFCR = max(c.maxFCR, fcr)
}

// UpdatePSB notes a PSB (for erratum SKL168).
func (c *TimeCal) UpdatePSB(cfg *Config) {
	if cfg.Errata.SKL168 {
		c.checkSKL168 = true
	}
}

// UpdateTSC applies a TSC packet outside PSB+: it is not used for
// calibration (it may follow lost time) but starts a new TSC period.
func (c *TimeCal) UpdateTSC(p *Packet, cfg *Config) error {
	c.tsc, c.cycTSC = p.Payload, 0
	return nil
}

// HeaderTSC applies a TSC packet inside PSB+: it calibrates from the
// cycles since the previous TSC unless MTCs are available.
func (c *TimeCal) HeaderTSC(p *Packet, cfg *Config) error {
	last, cyc := c.tsc, c.cycTSC
	tsc := p.Payload
	c.tsc, c.cycTSC = tsc, 0
	if last == 0 || cyc == 0 || c.haveMTC {
		return nil
	}
	if tsc < last {
		tsc += 1 << tscBits
		if tsc < last {
			return ErrBadPacket
		}
	}
	delta := tsc - last
	if delta&^(math.MaxUint64>>FCRShift) != 0 {
		return ErrInternal
	}
	c.SetFCR((delta << FCRShift) / cyc)
	return nil
}

// UpdateCBR applies a CBR outside PSB+: a frequency change, which resets
// the calibration before calibrating from the CBR.
func (c *TimeCal) UpdateCBR(p *Packet, cfg *Config) error {
	c.Reset()
	return c.HeaderCBR(p, cfg)
}

// HeaderCBR applies a CBR inside PSB+: with a nominal frequency it
// calibrates FCR = nom-freq / CBR.
func (c *TimeCal) HeaderCBR(p *Packet, cfg *Config) error {
	if cfg.NomFreq == 0 {
		return nil
	}
	if p.CBR == 0 {
		return ErrBadPacket
	}
	c.SetFCR((uint64(cfg.NomFreq) << FCRShift) / uint64(p.CBR))
	return nil
}

// UpdateTMA applies a TMA packet (nothing to calibrate).
func (c *TimeCal) UpdateTMA(p *Packet, cfg *Config) error { return nil }

// UpdateMTC applies an MTC packet: it calibrates from the cycles seen
// since the previous MTC.
func (c *TimeCal) UpdateMTC(p *Packet, cfg *Config) error {
	last, haveMTC, cyc, check := c.ctc, c.haveMTC, c.cycMTC, c.checkSKL168
	c.checkSKL168 = false
	ctc := shl32(uint32(p.MTC), uint(cfg.MTCFreq))
	if !haveMTC {
		c.cycMTC, c.ctc, c.haveMTC = 0, ctc, true
		return nil
	}
	// Without cycles, calibrate over the combined period at the next MTC.
	if cyc == 0 {
		return nil
	}
	c.haveMTC, c.cycMTC, c.ctc = true, 0, ctc
	c.lostMTC++
	delta, err := ctcDelta(ctc, last, cfg)
	if err != nil {
		return err
	}
	fc, err := ctcToFC(uint64(delta), cfg)
	if err != nil {
		return err
	}
	if fc&^(math.MaxUint64>>FCRShift) != 0 {
		return ErrInternal
	}
	fcr := (fc << FCRShift) / cyc
	// SKL168: CYC (and MTC) packets right before a PSB may be dropped.
	// Skip the first MTC after a PSB if MTCs were lost or if it looks
	// like a wrap CYC was.
	if check {
		if shl32(1, uint(cfg.MTCFreq)) < delta {
			return nil
		}
		if cfg.MTCFreq < 10 && c.haveFCR() {
			dfc := (c.fcr * (cyc + 0xf00)) >> FCRShift
			if dfc < fc {
				return nil
			}
		}
	}
	c.SetFCR(fcr)
	c.lostMTC = 0
	return nil
}

// UpdateCYC accumulates a CYC packet's cycles.
func (c *TimeCal) UpdateCYC(p *Packet, cfg *Config) error {
	c.cycMTC += p.Payload
	c.cycTSC += p.Payload
	return nil
}

// UpdateOVF applies an overflow when the calibration is kept across it:
// the periods in progress are discarded, the FCR stays.
func (c *TimeCal) UpdateOVF(cfg *Config) {
	c.tsc, c.cycTSC, c.cycMTC, c.ctc, c.haveMTC = 0, 0, 0, 0, false
}

// Timer gives the estimated TSC along a packet stream: it drives a Time
// and a TimeCal with every packet the way libipt's decoders (and ptdump
// --time) do — TSC and CBR calibrate differently inside PSB+, an overflow
// resets the calibration unless Config.KeepTcalOnOVF, and a PSB arms the
// SKL168 workaround. The flow decoder feeds it each packet it consumes and
// stamps instructions with TSC().
type Timer struct {
	Time     Time
	Cal      TimeCal
	cfg      *Config
	inHeader bool
	// NoCal disables calibration (ptdump --no-tcal): CYC packets are
	// then counted as lost.
	NoCal bool
}

// NewTimer returns a Timer for traces recorded with cfg (nil: no timing
// parameters, so only TSC packets give time).
func NewTimer(cfg *Config) *Timer {
	if cfg == nil {
		cfg = &Config{}
	}
	return &Timer{Cal: NewTimeCal(), cfg: cfg}
}

// Reset forgets all state (after a resync).
func (t *Timer) Reset() {
	t.Time.Reset()
	t.Cal.Reset()
	t.inHeader = false
}

// Packet applies one packet; non-timing packets other than PSB, PSBEND and
// OVF are ignored. It returns the first error of the calibration or time
// update (the state is still updated as far as possible, as in libipt).
func (t *Timer) Packet(p *Packet) error {
	var cerr, err error
	cal := !t.NoCal
	switch p.Type {
	case PktPSB:
		t.inHeader = true
		if cal {
			t.Cal.UpdatePSB(t.cfg)
		}
	case PktPSBEnd:
		t.inHeader = false
	case PktOVF:
		if cal {
			if t.cfg.KeepTcalOnOVF {
				t.Cal.UpdateOVF(t.cfg)
			} else {
				t.Cal.Reset()
			}
		}
	case PktTSC:
		if cal {
			if t.inHeader {
				cerr = t.Cal.HeaderTSC(p, t.cfg)
			} else {
				cerr = t.Cal.UpdateTSC(p, t.cfg)
			}
		}
		err = t.Time.UpdateTSC(p, t.cfg)
	case PktCBR:
		if cal {
			if t.inHeader {
				cerr = t.Cal.HeaderCBR(p, t.cfg)
			} else {
				cerr = t.Cal.UpdateCBR(p, t.cfg)
			}
		}
		err = t.Time.UpdateCBR(p, t.cfg)
	case PktTMA:
		err = t.Time.UpdateTMA(p, t.cfg)
	case PktMTC:
		if cal {
			cerr = t.Cal.UpdateMTC(p, t.cfg)
		}
		err = t.Time.UpdateMTC(p, t.cfg)
	case PktCYC:
		var fcr uint64
		if cal {
			fcr, _ = t.Cal.FCR()
			cerr = t.Cal.UpdateCYC(p, t.cfg)
		}
		err = t.Time.UpdateCYC(p, t.cfg, fcr)
	}
	if cerr != nil {
		return cerr
	}
	return err
}

// TSC returns the current estimate (see Time.TSC).
func (t *Timer) TSC() (uint64, error) {
	tsc, _, _, err := t.Time.TSC()
	return tsc, err
}

// MTCClock is what MTCRun needs of a Config, derived once per decoder:
// the configuration, and for its steady loop the MTC shift, the mask of
// the CTC bits an MTC covers, and the CTC-to-TSC ratio as a multiplier
// and a shift or divisor.
type MTCClock struct {
	cfg        *Config
	freq       uint
	mask       uint32
	mul, div   uint64
	shift      uint
	pow2, fast bool
}

// NewMTCClock returns cfg's MTCClock; cfg must not change while it is used.
func NewMTCClock(cfg *Config) MTCClock {
	freq := uint(cfg.MTCFreq)
	wrap := shl32(1, freq+mtcBits)
	div := uint64(cfg.CPUID15EAX)
	return MTCClock{
		cfg: cfg, freq: freq, mask: wrap - 1,
		mul: uint64(cfg.CPUID15EBX), div: div,
		shift: uint(bits.TrailingZeros64(div)), pow2: div&(div-1) == 0,
		// Without a wrap below 2^32 or a valid ratio, UpdateMTC does it.
		fast: wrap != 0 && cfg.CPUID15EAX != 0 && cfg.CPUID15EBX != 0,
	}
}

// MTCRun applies the MTC packet p to t and c, then every MTC packet that
// follows it in d's buffer, as UpdateMTC on c and then t would one packet
// at a time with k's configuration. If the packet after the run is a
// TNT-8 it reads it into p, as NextTNT8 would, and returns true (the
// usual case in a soft-PT trace, where that byte is already loaded);
// otherwise it leaves p holding the last MTC applied and d after it.
//
// Where timing packets are dense (soft PT writes an MTC per instruction)
// this is the decoder's hottest loop. Once c has no cycles to calibrate
// with and t has its TSC, TMA and an MTC with no cycles since, an MTC
// changes only t's CTC and TSC estimate (c keeps the CTC of the MTC it
// last calibrated at, until cycles come): those packets are read straight
// from the buffer and their CTC deltas converted in a register. Anything
// else — the first MTC after a TSC, a TMA or a CYC, a bad CPUID 0x15
// configuration — goes through UpdateMTC.
func (d *PacketDecoder) MTCRun(p *Packet, t *Time, c *TimeCal, k *MTCClock) (tnt8 bool) {
	last := t.ctc
	if !(k.fast && t.mtcSteady() && c.haveMTC && c.cycMTC == 0 && last <= k.mask && d.synced) {
		return d.mtcSlow(p, t, c, k)
	}
	// The steady loop: p, then the MTC packets after it in the buffer,
	// up to the next other packet. Every delta is (ctc - last) mod the
	// wrap, as ctcDelta's single wrap correction gives when last is below
	// the wrap (the last CTC has bits above the MTC's only after a TMA,
	// and the first MTC after a TMA is not steady: checked all the same),
	// without a branch the wraps would mispredict. The clock is in
	// locals and the shift counts masked to their range (freq < 16,
	// shift < 64): the loop keeps everything in registers, with no
	// reload of k and no check of an oversized shift per packet.
	c.checkSKL168 = false
	freq, mask, mul := k.freq&31, k.mask, k.mul
	buf, base := d.buf, t.base
	pos, mtc := int(d.pos), p.MTC
	if k.pow2 {
		shift := k.shift & 63
		for {
			ctc := uint32(mtc) << freq
			base += uint64((ctc-last)&mask) * mul >> shift
			last = ctc
			if pos+1 >= len(buf) || buf[pos] != opcMTC {
				break
			}
			mtc = buf[pos+1]
			pos += 2
		}
	} else {
		div := k.div
		for {
			ctc := uint32(mtc) << freq
			base += uint64((ctc-last)&mask) * mul / div
			last = ctc
			if pos+1 >= len(buf) || buf[pos] != opcMTC {
				break
			}
			mtc = buf[pos+1]
			pos += 2
		}
	}
	t.ctc, t.tsc, t.base = last, base, base
	d.pos = uint64(pos)
	if pos < len(buf) && isTNT8(buf[pos]) && !d.inBlock {
		p.MTC = 0
		d.pos += uint64(decodeTNT(p, PktTNT8, uint64(buf[pos]>>1), 1))
		return true
	}
	p.MTC = mtc
	return false
}

// mtcSlow is MTCRun one packet at a time through UpdateMTC, until the
// timing is steady (MTCRun takes the rest) or the run ends.
func (d *PacketDecoder) mtcSlow(p *Packet, t *Time, c *TimeCal, k *MTCClock) (tnt8 bool) {
	for {
		_ = c.UpdateMTC(p, k.cfg)
		_ = t.UpdateMTC(p, k.cfg)
		if !d.NextMTC(p) {
			return d.NextTNT8(p)
		}
		if k.fast && t.mtcSteady() && c.haveMTC && c.cycMTC == 0 && t.ctc <= k.mask && d.synced {
			return d.MTCRun(p, t, c, k)
		}
	}
}

// mtcSteady: an MTC now changes only ctc, tsc and base (UpdateMTC with
// haveTSC, haveTMA, haveMTC, fc == 0 and lostCYC == 0).
func (t *Time) mtcSteady() bool {
	return t.haveTSC && t.haveTMA && t.haveMTC && t.fc == 0 && t.lostCYC == 0
}
