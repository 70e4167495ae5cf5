package ptpkt

import (
	"errors"
	"math/big"
	"testing"
)

// timeStep is one packet fed to a Time/TimeCal pair and the expected state
// afterwards: the TSC estimate (and whether one exists) and the FCR.
type timeStep struct {
	p       Packet
	header  bool   // inside PSB+
	tsc     uint64 // estimate after the packet
	noTime  bool   // TSC() reports ErrNoTime
	fcr     uint64 // 0: uncalibrated
	wantErr error  // from Time's update
}

func runTimeSteps(t *testing.T, cfg *Config, steps []timeStep) {
	t.Helper()
	var tm Time
	cal := NewTimeCal()
	for i, s := range steps {
		p := &s.p
		var err error
		switch p.Type {
		case PktPSB:
			cal.UpdatePSB(cfg)
		case PktTSC:
			if s.header {
				cal.HeaderTSC(p, cfg)
			} else {
				cal.UpdateTSC(p, cfg)
			}
			err = tm.UpdateTSC(p, cfg)
		case PktCBR:
			if s.header {
				cal.HeaderCBR(p, cfg)
			} else {
				cal.UpdateCBR(p, cfg)
			}
			err = tm.UpdateCBR(p, cfg)
		case PktTMA:
			cal.UpdateTMA(p, cfg)
			err = tm.UpdateTMA(p, cfg)
		case PktMTC:
			cal.UpdateMTC(p, cfg)
			err = tm.UpdateMTC(p, cfg)
		case PktCYC:
			fcr, _ := cal.FCR()
			cal.UpdateCYC(p, cfg)
			err = tm.UpdateCYC(p, cfg, fcr)
		case PktOVF:
			cal.UpdateOVF(cfg)
		}
		if err != s.wantErr {
			t.Errorf("step %d (%s): error %v, want %v", i, p.Type, err, s.wantErr)
		}
		tsc, _, _, terr := tm.TSC()
		if (terr == ErrNoTime) != s.noTime || tsc != s.tsc {
			t.Errorf("step %d (%s): tsc %#x (%v), want %#x (no time: %v)", i, p.Type, tsc, terr, s.tsc, s.noTime)
		}
		fcr, ferr := cal.FCR()
		if ferr != nil {
			fcr = 0
		}
		if fcr != s.fcr {
			t.Errorf("step %d (%s): fcr %#x, want %#x", i, p.Type, fcr, s.fcr)
		}
	}
}

func TestTime(t *testing.T) {
	tsc := func(v uint64) Packet { return Packet{Type: PktTSC, Payload: v} }
	tma := func(ctc, fc uint16) Packet { return Packet{Type: PktTMA, CTC: ctc, FC: fc} }
	mtc := func(v uint8) Packet { return Packet{Type: PktMTC, MTC: v} }
	cyc := func(v uint64) Packet { return Packet{Type: PktCYC, Payload: v} }
	cbr := func(v uint8) Packet { return Packet{Type: PktCBR, CBR: v} }

	t.Run("no time before TSC", func(t *testing.T) {
		runTimeSteps(t, &Config{}, []timeStep{
			{p: mtc(1), noTime: true},
			{p: cyc(5), noTime: true},
			{p: tsc(0xa0000), tsc: 0xa0000},
		})
	})
	// CTC:TSC = 1:4 (eax 1, ebx 4), MTC every 2^0 CTC: each MTC tick is
	// 4 TSC ticks. TMA's FC is subtracted from the base.
	t.Run("TSC, TMA, MTC", func(t *testing.T) {
		cfg := &Config{CPUID15EAX: 1, CPUID15EBX: 4, MTCFreq: 0}
		runTimeSteps(t, cfg, []timeStep{
			{p: tsc(0x1000), tsc: 0x1000},
			{p: tma(0x102, 0x10), tsc: 0x1000},
			{p: mtc(0x03), tsc: 0x1000 - 0x10 + 4},           // ctc 2 -> 3
			{p: mtc(0x05), tsc: 0x1000 - 0x10 + 4 + 8},       // +2 ticks
			{p: mtc(0x01), tsc: 0x1000 - 0x10 + 12 + 4*0xfc}, // wraps: 5 -> 0x101
		})
	})
	// mtc-freq 8: MTC payload is CTC[15:8]; TMA gives CTC[15:0] so it
	// serves as the first MTC.
	t.Run("MTC frequency", func(t *testing.T) {
		cfg := &Config{CPUID15EAX: 2, CPUID15EBX: 1, MTCFreq: 8}
		runTimeSteps(t, cfg, []timeStep{
			{p: tsc(0x100000), tsc: 0x100000},
			{p: tma(0x0300, 0), tsc: 0x100000},
			{p: mtc(0x04), tsc: 0x100000 + 0x100/2},
		})
	})
	// MTCs between TSC and TMA are ignored; TMA without TSC is a context
	// error.
	t.Run("MTC before TMA ignored, TMA without TSC", func(t *testing.T) {
		cfg := &Config{CPUID15EAX: 1, CPUID15EBX: 1}
		runTimeSteps(t, cfg, []timeStep{
			{p: tma(1, 1), noTime: true, wantErr: ErrBadContext},
			{p: tsc(0x500), tsc: 0x500},
			{p: mtc(9), tsc: 0x500},
			{p: tma(9, 0), tsc: 0x500},
			{p: tma(9, 0), tsc: 0x500, wantErr: ErrBadContext},
		})
	})
	// CBR with nominal frequency 4 calibrates FCR = 4/2 = 2.0 (0x200).
	t.Run("CYC calibrated by CBR", func(t *testing.T) {
		cfg := &Config{NomFreq: 4, CPUID15EAX: 1, CPUID15EBX: 4, MTCFreq: 8}
		runTimeSteps(t, cfg, []timeStep{
			{p: tsc(0xa0000), tsc: 0xa0000},
			{p: tma(0x102, 8), tsc: 0xa0000},
			{p: cbr(2), tsc: 0xa0000, fcr: 0x200},
			{p: cyc(3), tsc: 0xa0000 + 6 - 8 + 8, fcr: 0x200},
			{p: cyc(1), tsc: 0xa0000 + 8, fcr: 0x200},
			{p: cbr(0), tsc: 0xa0000 + 8, fcr: 0, wantErr: ErrBadPacket},
		})
	})
	// Without calibration CYCs are lost; two MTCs with cycles in between
	// calibrate FCR = (1 CTC * 4) / 8 cycles = 0.5 (0x80).
	t.Run("CYC calibrated by MTC", func(t *testing.T) {
		cfg := &Config{CPUID15EAX: 1, CPUID15EBX: 4}
		runTimeSteps(t, cfg, []timeStep{
			{p: tsc(0x1000), tsc: 0x1000},
			{p: tma(0x10, 0), tsc: 0x1000},
			{p: mtc(0x11), tsc: 0x1004},
			{p: cyc(8), tsc: 0x1004},
			{p: mtc(0x12), tsc: 0x1008, fcr: 0x80},
			{p: cyc(4), tsc: 0x100a, fcr: 0x80},
			{p: Packet{Type: PktOVF}, tsc: 0x100a, fcr: 0x80},
		})
	})
	// Two TSCs in PSB+ with cycles in between calibrate when there are no
	// MTCs: (0x2000-0x1000) / 0x800 cycles = 2.0.
	t.Run("CYC calibrated by header TSC", func(t *testing.T) {
		runTimeSteps(t, &Config{}, []timeStep{
			{p: tsc(0x1000), header: true, tsc: 0x1000},
			{p: cyc(0x800), tsc: 0x1000},
			{p: tsc(0x2000), header: true, tsc: 0x2000, fcr: 0x200},
			{p: cyc(0x10), tsc: 0x2020, fcr: 0x200},
		})
	})
}

func TestTimeCalSKL168(t *testing.T) {
	// The first MTC after a PSB is not used for calibration on SKL168
	// parts when it looks like a wrap CYC was dropped (see skl168-cyc in
	// the libipt corpus: fcr stays 0.25 instead of becoming 0.5).
	cfg := &Config{CPUID15EAX: 1, CPUID15EBX: 4, MTCFreq: 9, Errata: Errata{SKL168: true}}
	cal := NewTimeCal()
	for _, p := range []Packet{
		{Type: PktPSB}, {Type: PktMTC, MTC: 1},
		{Type: PktCYC, Payload: 0xc00}, {Type: PktCYC, Payload: 0x700}, {Type: PktCYC, Payload: 0xd00},
		{Type: PktMTC, MTC: 2},
		{Type: PktCYC, Payload: 0x800}, {Type: PktCYC, Payload: 0x800},
		{Type: PktPSB}, {Type: PktMTC, MTC: 3},
	} {
		switch p.Type {
		case PktPSB:
			cal.UpdatePSB(cfg)
		case PktMTC:
			cal.UpdateMTC(&p, cfg)
		case PktCYC:
			cal.UpdateCYC(&p, cfg)
		}
	}
	if fcr, err := cal.FCR(); err != nil || fcr != 0x40 {
		t.Errorf("fcr %#x (%v), want 0x40", fcr, err)
	}
	cfg.Errata.SKL168 = false
	cal = NewTimeCal()
	for _, p := range []Packet{{Type: PktMTC, MTC: 2}, {Type: PktCYC, Payload: 0x1000}, {Type: PktMTC, MTC: 3}} {
		if p.Type == PktMTC {
			cal.UpdateMTC(&p, cfg)
		} else {
			cal.UpdateCYC(&p, cfg)
		}
	}
	if fcr, err := cal.FCR(); err != nil || fcr != 0x80 {
		t.Errorf("without SKL168: fcr %#x (%v), want 0x80", fcr, err)
	}
}

// TestCtcToFC: the shift taken for a power-of-two EAX gives the quotient
// of ctc * EBX / EAX, computed here with math/big; other EAX values
// divide; a zero EAX or EBX is ErrBadConfig.
func TestCtcToFC(t *testing.T) {
	for _, c := range []struct{ ctc, eax, ebx uint64 }{
		{0, 1, 1}, {12345, 1, 88}, {12345, 2, 216}, {0xffff, 2, 217}, {1<<20 + 3, 4, 333},
		{1<<32 - 1, 8, 1000}, {99, 3, 250}, {1<<24 + 7, 7, 313}, {5, 1 << 31, 1<<32 - 1},
	} {
		cfg := &Config{CPUID15EAX: uint32(c.eax), CPUID15EBX: uint32(c.ebx)}
		got, err := ctcToFC(c.ctc, cfg)
		want := new(big.Int).Mul(new(big.Int).SetUint64(c.ctc), new(big.Int).SetUint64(c.ebx))
		want.Quo(want, new(big.Int).SetUint64(c.eax))
		if err != nil || got != want.Uint64() {
			t.Errorf("ctcToFC(%d, EAX %d, EBX %d) = %d, %v; want %d", c.ctc, c.eax, c.ebx, got, err, want.Uint64())
		}
	}
	for _, cfg := range []*Config{{CPUID15EAX: 0, CPUID15EBX: 2}, {CPUID15EAX: 2, CPUID15EBX: 0}} {
		if _, err := ctcToFC(1, cfg); !errors.Is(err, ErrBadConfig) {
			t.Errorf("ctcToFC with EAX %d, EBX %d: %v, want ErrBadConfig", cfg.CPUID15EAX, cfg.CPUID15EBX, err)
		}
	}
}
