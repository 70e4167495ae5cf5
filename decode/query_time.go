package decode

import "github.com/ptjit/ptjit/ptpkt"

// timeState is the query layer's timing: the packet engineer's Time (TSC
// estimate) and TimeCal (cycle calibration) driven the way libipt's event
// decoder drives pt_time and pt_time_cal. Configuration errors only make
// timing imprecise (they are counted as lost MTC/CYC), so they are not
// decode errors, as in libipt.
type timeState struct {
	t     ptpkt.Time
	cal   ptpkt.TimeCal
	cfg   *ptpkt.Config
	clock ptpkt.MTCClock // cfg's, for runs of MTC packets
}

func (s *timeState) init(cfg *FlowConfig) {
	s.t.Reset()
	s.cal = ptpkt.NewTimeCal()
	s.cfg = &cfg.Packet
	s.clock = ptpkt.NewMTCClock(s.cfg)
}

func (s *timeState) headerTSC(p *ptpkt.Packet) {
	_ = s.cal.HeaderTSC(p, s.cfg)
	_ = s.t.UpdateTSC(p, s.cfg)
}

func (s *timeState) tsc(p *ptpkt.Packet) {
	_ = s.cal.UpdateTSC(p, s.cfg)
	_ = s.t.UpdateTSC(p, s.cfg)
}

func (s *timeState) headerCBR(p *ptpkt.Packet) {
	_ = s.cal.HeaderCBR(p, s.cfg)
	_ = s.t.UpdateCBR(p, s.cfg)
}

func (s *timeState) cbr(p *ptpkt.Packet) {
	_ = s.cal.UpdateCBR(p, s.cfg)
	_ = s.t.UpdateCBR(p, s.cfg)
}

func (s *timeState) tma(p *ptpkt.Packet) {
	_ = s.cal.UpdateTMA(p, s.cfg)
	_ = s.t.UpdateTMA(p, s.cfg)
}

func (s *timeState) mtc(p *ptpkt.Packet) {
	_ = s.cal.UpdateMTC(p, s.cfg)
	_ = s.t.UpdateMTC(p, s.cfg)
}

// mtcRun applies the MTC p and the MTCs after it, and reads a TNT-8 after
// them into p if there is one (ptpkt.MTCRun).
func (s *timeState) mtcRun(pd *ptpkt.PacketDecoder, p *ptpkt.Packet) (tnt8 bool) {
	return pd.MTCRun(p, &s.t, &s.cal, &s.clock)
}

func (s *timeState) cyc(p *ptpkt.Packet) {
	_ = s.cal.UpdateCYC(p, s.cfg)
	fcr, err := s.cal.FCR()
	if err != nil {
		fcr = 0
	}
	_ = s.t.UpdateCYC(p, s.cfg, fcr)
}

// restoreAfterOVF keeps the time (and, if keepTcal, the calibration) of
// prev after an overflow reset.
func (s *timeState) restoreAfterOVF(prev *timeState, keepTcal bool) {
	s.t = prev.t
	if keepTcal {
		s.cal = prev.cal
		s.cal.UpdateOVF(s.cfg)
	}
}

// query returns the current TSC estimate; ok is false when there is only
// relative time (no TSC packet yet).
func (s *timeState) query() (tsc uint64, lostMTC, lostCYC uint32, ok bool) {
	tsc, lostMTC, lostCYC, err := s.t.TSC()
	return tsc, lostMTC, lostCYC, err == nil
}

// timeSnap is the time at a query (libipt's last-query time): what the
// flow layer reads of it, a copy far smaller than the timeState it is
// taken from at every TNT refill.
type timeSnap struct {
	tsc              uint64
	lostMTC, lostCYC uint32
	ok               bool
}

func (s *timeState) snap() timeSnap {
	tsc, lostMTC, lostCYC, err := s.t.TSC()
	return timeSnap{tsc, lostMTC, lostCYC, err == nil}
}

func (s *timeSnap) query() (tsc uint64, lostMTC, lostCYC uint32, ok bool) {
	return s.tsc, s.lostMTC, s.lostCYC, s.ok
}

// tscOrZero returns the TSC at the query (0 before any time information);
// it selects code versions in the image.
func (s *timeSnap) tscOrZero() uint64 { return s.tsc }
