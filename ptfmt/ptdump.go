package ptfmt

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/ptjit/ptjit/ptpkt"
)

// PtdumpOptions are the output options of libipt's ptdump tool. The zero
// value is ptdump's default (offsets shown).
type PtdumpOptions struct {
	NoOffset    bool // --no-offset: don't show the offset column
	Raw         bool // --raw: show the raw packet bytes
	LastIP      bool // --lastip: show the last IP on IP packets
	ExecMode    bool // --exec-mode: show the execution mode on mode.exec
	Time        bool // --time: show the estimated TSC on timing packets
	Tcal        bool // --tcal: show the calibration (FCR) on timing packets
	TimeDelta   bool // --time-delta: show time/FCR as deltas
	NoTcal      bool // --no-tcal: don't calibrate (CYC then has no effect)
	NoWallClock bool // --no-wall-clock: relative time without a TSC
	NoPad       bool // --no-pad: don't show PAD packets
	NoSync      bool // --no-sync: start at offset 0 instead of the first PSB
	NoTiming    bool // --no-timing: don't show timing packets
	NoCyc       bool // --no-cyc: don't show CYC and ignore it for time
	Quiet       bool // --quiet: print nothing but errors
}

// Sizes of ptdump's output columns including the C string terminator; a
// longer text is truncated to size-1 characters, as ptdump's snprintf does.
const (
	pdOffset     = 17
	pdRaw        = 33
	pdOpcode     = 10
	pdStandard   = 25
	pdExtended   = 48
	pdTrackID    = 5
	pdTrackValue = 17
)

// ptdumpLine is one output line being assembled (ptdump's ptdump_buffer).
type ptdumpLine struct {
	raw        []byte // hex bytes
	opcode     string
	standard   string
	extended   []byte // TNT payload
	useExt     bool
	trackID    string
	trackValue string
	skip       bool
	skipTime   bool
	skipTcal   bool
}

// ptdumper holds the state of one ptdump run.
type ptdumper struct {
	w    *bufio.Writer
	buf  []byte
	cfg  *ptpkt.Config
	opts *PtdumpOptions

	trackTime bool
	lastIP    ptpkt.LastIP
	tcal      ptpkt.TimeCal
	time      ptpkt.Time
	tsc, fcr  uint64 // last printed values, for --time-delta
	inHeader  bool

	line ptdumpLine
	sc   []byte // scratch
}

// Ptdump writes to w exactly what libipt's ptdump prints for the trace buf
// with the configuration cfg and the options opts (stdout only; ptdump's
// diagnostics "[offset: ...]" are part of stdout). Decode errors are
// printed and decoding resumes at the next PSB, as ptdump does; the
// returned error is only a write error or, like ptdump, a failure to sync.
func Ptdump(w io.Writer, buf []byte, cfg *ptpkt.Config, opts *PtdumpOptions) error {
	if cfg == nil {
		cfg = &ptpkt.Config{}
	}
	if opts == nil {
		opts = &PtdumpOptions{}
	}
	d := &ptdumper{
		w:         bufio.NewWriterSize(w, 64<<10),
		buf:       buf,
		cfg:       cfg,
		opts:      opts,
		trackTime: opts.Time || opts.Tcal,
		tcal:      ptpkt.NewTimeCal(),
		sc:        make([]byte, 0, 128),
	}
	err := d.run()
	if ferr := d.w.Flush(); err == nil {
		err = ferr
	}
	return err
}

// PtdumpErrataDiag returns the line ptdump prints when the errata of the
// configured CPU cannot be determined, or "" if there is nothing to print.
// It applies the errata to cfg. A zero CPU ("none", the default) means the
// spec: no errata and no message.
func PtdumpErrataDiag(cfg *ptpkt.Config) string {
	if cfg.CPU.Vendor == ptpkt.VendorUnknown {
		return ""
	}
	e, err := cfg.CPU.Errata()
	cfg.Errata = e
	if err != nil {
		return fmt.Sprintf("[0: failed to determine errata: %v]\n", err)
	}
	return ""
}

func (d *ptdumper) diag(msg string, off uint64, err error) {
	d.sc = d.sc[:0]
	d.sc = append(d.sc, '[')
	d.sc = strconv.AppendUint(d.sc, off, 16)
	d.sc = append(d.sc, ": "...)
	d.sc = append(d.sc, msg...)
	if err != nil {
		d.sc = append(d.sc, ": "...)
		d.sc = append(d.sc, errText(err)...)
	}
	d.sc = append(d.sc, "]\n"...)
	d.w.Write(d.sc)
}

// errText returns the libipt error text of a decode error.
func errText(err error) string {
	for {
		de, ok := err.(*ptpkt.DecodeError)
		if !ok {
			break
		}
		err = de.Err
	}
	return err.Error()
}

func (d *ptdumper) resetTracking() {
	d.lastIP.Reset()
	d.tcal.Reset()
	d.time.Reset()
	d.tsc, d.fcr = 0, 0
	d.inHeader = false
}

func (d *ptdumper) run() error {
	dec := ptpkt.NewPacketDecoder(d.buf, d.cfg)
	if d.opts.NoSync {
		if err := dec.SyncSet(0); err != nil {
			d.diag("sync error", 0, err)
			return nil
		}
	} else if err := dec.SyncForward(); err != nil {
		if ptpkt.IsEOS(err) {
			return nil
		}
		d.diag("sync error", 0, err)
		return nil
	}
	var p ptpkt.Packet
	for {
		off := dec.Offset()
		err := dec.Next(&p)
		if err == nil {
			if d.dumpPacket(off, &p) {
				continue
			}
		} else {
			if ptpkt.IsEOS(err) {
				return nil
			}
			d.diag("error decoding packet", off, err)
		}
		if err := dec.SyncForward(); err != nil {
			if ptpkt.IsEOS(err) {
				return nil
			}
			d.diag("sync error", 0, err)
			return nil
		}
		d.resetTracking()
	}
}

// trunc cuts s to a ptdump field of the given size.
func pdTrunc(s string, size int) string {
	if len(s) > size-1 {
		return s[:size-1]
	}
	return s
}

const pdHexDigits = "0123456789abcdef"

// dumpPacket prints one packet; false means ptdump gives up on the packet
// (a --raw packet reaching past the end of the trace) and resyncs.
func (d *ptdumper) dumpPacket(off uint64, p *ptpkt.Packet) bool {
	l := &d.line
	l.raw = l.raw[:0]
	l.opcode, l.standard, l.trackID, l.trackValue = "", "", "", ""
	l.extended = l.extended[:0]
	l.useExt, l.skip, l.skipTime, l.skipTcal = false, false, false, false

	if d.opts.Raw {
		end := off + uint64(p.Size)
		if end > uint64(len(d.buf)) {
			d.diag("bad packet size", off, ptpkt.ErrBadPacket)
			return false
		}
		for _, c := range d.buf[off:end] {
			if len(l.raw)+2 >= pdRaw {
				d.diag("truncating raw packet", off, nil)
				break
			}
			l.raw = append(l.raw, pdHexDigits[c>>4], pdHexDigits[c&0xf])
		}
	}
	d.printPacket(off, p)
	d.printLine(off)
	return true
}

func (d *ptdumper) printLine(off uint64) {
	l := &d.line
	if l.skip || d.opts.Quiet {
		return
	}
	b := d.sc[:0]
	sep := false
	if !d.opts.NoOffset {
		for i := 60; i >= 0; i -= 4 {
			b = append(b, pdHexDigits[(off>>uint(i))&0xf])
		}
		b = pdPad(b, pdOffset-16)
		sep = true
	}
	if len(l.raw) > 0 {
		if sep {
			b = append(b, ' ')
		}
		b = append(b, l.raw...)
		b = pdPad(b, pdRaw-len(l.raw))
		sep = true
	}
	if sep {
		b = append(b, ' ')
	}
	opcode := pdTrunc(l.opcode, pdOpcode)
	b = append(b, opcode...)
	havePayload := l.standard != "" || (l.useExt && len(l.extended) > 0)
	if havePayload {
		b = pdPad(b, pdOpcode-len(opcode))
	}
	switch {
	case l.useExt:
		b = append(b, ' ')
		b = append(b, l.extended...)
	case l.trackID != "":
		std := pdTrunc(l.standard, pdStandard)
		b = append(b, ' ')
		b = append(b, std...)
		b = pdPad(b, pdStandard-len(std))
		id := pdTrunc(l.trackID, pdTrackID)
		b = append(b, ' ')
		b = append(b, id...)
		b = pdPad(b, pdTrackID-len(id))
		b = append(b, pdTrunc(l.trackValue, pdTrackValue)...)
	case l.standard != "":
		b = append(b, ' ')
		b = append(b, pdTrunc(l.standard, pdStandard)...)
	}
	b = append(b, '\n')
	d.sc = b
	d.w.Write(b)
}

func pdPad(b []byte, n int) []byte {
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}

func pdHex(v uint64) string { return strconv.FormatUint(v, 16) }

// hex0 formats v as %0*x.
func pdHex0(v uint64, width int) string {
	s := strconv.FormatUint(v, 16)
	for len(s) < width {
		s = "0" + s
	}
	return s
}

func (d *ptdumper) printIP(off uint64, p *ptpkt.Packet, name string) {
	l := &d.line
	l.opcode = name
	switch p.IPC {
	case ptpkt.IPSuppressed:
		l.standard = "0: ????????????????"
	case ptpkt.IPUpdate16:
		l.standard = "1: ????????????" + pdHex0(p.IP, 4)
	case ptpkt.IPUpdate32:
		l.standard = "2: ????????" + pdHex0(p.IP, 8)
	case ptpkt.IPUpdate48:
		l.standard = "4: ????" + pdHex0(p.IP, 12)
	case ptpkt.IPSext48:
		l.standard = "3: " + pdHex0(ptpkt.SignExtend48(p.IP), 16)
	case ptpkt.IPFull:
		l.standard = "6: " + pdHex0(p.IP, 16)
	}
	if d.opts.LastIP {
		l.trackID = "ip"
		if err := d.lastIP.Update(p.IPC, p.IP); err != nil {
			l.trackValue = "<unavailable>"
			d.diag("error tracking last-ip", off, err)
			return
		}
		ip, err := d.lastIP.IP()
		switch {
		case err == ptpkt.ErrIPSuppressed:
			l.trackValue = "<suppressed>"
		case err != nil:
			l.trackValue = "<unavailable>"
			d.diag("error tracking last-ip", off, err)
		default:
			l.trackValue = pdHex0(ip, 16)
		}
	}
}

func pdJoin(parts ...string) string {
	s := ""
	for _, p := range parts {
		if p == "" {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += p
	}
	return s
}

func pdFlag(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

func (d *ptdumper) printPacket(off uint64, p *ptpkt.Packet) {
	l := &d.line
	o := d.opts
	switch p.Type {
	case ptpkt.PktInvalid:
		l.opcode = "<invalid>"
	case ptpkt.PktPSB:
		l.opcode = "psb"
		d.inHeader = true
		if d.trackTime {
			d.tcal.UpdatePSB(d.cfg)
		}
	case ptpkt.PktPSBEnd:
		l.opcode = "psbend"
		d.inHeader = false
	case ptpkt.PktPad:
		l.opcode = "pad"
		l.skip = o.NoPad
	case ptpkt.PktOVF:
		l.opcode = "ovf"
		if d.trackTime {
			if d.cfg.KeepTcalOnOVF {
				d.tcal.UpdateOVF(d.cfg)
			} else {
				d.tcal.Reset()
			}
		}
	case ptpkt.PktTraceStop:
		l.opcode = "stop"
	case ptpkt.PktFUP:
		d.printIP(off, p, "fup")
	case ptpkt.PktTIP:
		d.printIP(off, p, "tip")
	case ptpkt.PktTIPPGE:
		d.printIP(off, p, "tip.pge")
	case ptpkt.PktTIPPGD:
		d.printIP(off, p, "tip.pgd")
	case ptpkt.PktPIP:
		l.opcode = "pip"
		l.standard = pdHex(p.Payload) + pdFlag(p.NR, ", nr")
		l.trackID, l.trackValue = "cr3", pdHex0(p.Payload, 16)
	case ptpkt.PktVMCS:
		l.opcode = "vmcs"
		l.standard = pdHex(p.Payload)
		l.trackID, l.trackValue = "vmcs", pdHex0(p.Payload, 16)
	case ptpkt.PktTNT8, ptpkt.PktTNT64:
		l.opcode = "tnt.8"
		if p.Type == ptpkt.PktTNT64 {
			l.opcode = "tnt.64"
		}
		l.useExt = true
		bits := int(p.TNTBits)
		if bits > pdExtended {
			d.diag("truncating tnt payload", off, nil)
		}
		for i := bits - 1; i >= 0 && len(l.extended) < pdExtended; i-- {
			if p.TNTPayload&(1<<uint(i)) != 0 {
				l.extended = append(l.extended, '!')
			} else {
				l.extended = append(l.extended, '.')
			}
		}
	case ptpkt.PktModeExec:
		l.opcode = "mode.exec"
		l.standard = pdJoin(pdFlag(p.CSD, "cs.d"), pdFlag(p.CSL, "cs.l"), pdFlag(p.IF, "if"))
		if o.ExecMode {
			l.trackID, l.trackValue = "em", ptpkt.ExecModeName(p)
		}
	case ptpkt.PktModeTSX:
		l.opcode = "mode.tsx"
		l.standard = pdJoin(pdFlag(p.InTX, "intx"), pdFlag(p.Abort, "abrt"))
	case ptpkt.PktTSC:
		l.opcode = "tsc"
		l.standard = pdHex(p.Payload)
		if d.trackTime {
			d.trackTSC(off, p)
		}
		l.skip = l.skip || o.NoTiming
	case ptpkt.PktCBR:
		l.opcode = "cbr"
		l.standard = pdHex(uint64(p.CBR))
		if d.trackTime {
			d.trackCBR(off, p)
		}
		l.skip = l.skip || o.NoTiming
	case ptpkt.PktTMA:
		l.opcode = "tma"
		l.standard = pdHex(uint64(p.CTC)) + ", " + pdHex(uint64(p.FC))
		if d.trackTime {
			d.trackTMA(off, p)
		}
		l.skip = l.skip || o.NoTiming
	case ptpkt.PktMTC:
		l.opcode = "mtc"
		l.standard = pdHex(uint64(p.MTC))
		if d.trackTime {
			d.trackMTC(off, p)
		}
		l.skip = l.skip || o.NoTiming
	case ptpkt.PktCYC:
		l.opcode = "cyc"
		l.standard = pdHex(p.Payload)
		if d.trackTime && !o.NoCyc {
			d.trackCYC(off, p)
		}
		l.skip = l.skip || o.NoTiming || o.NoCyc
	case ptpkt.PktMNT:
		l.opcode = "mnt"
		l.standard = pdHex(p.Payload)
	case ptpkt.PktExStop:
		l.opcode = "exstop"
		l.standard = pdFlag(p.IPBit, "ip")
	case ptpkt.PktMWait:
		l.opcode = "mwait"
		l.standard = pdHex0(uint64(p.Hints), 8) + ", " + pdHex0(uint64(p.Ext), 8)
	case ptpkt.PktPwrE:
		l.opcode = "pwre"
		l.standard = "c" + strconv.Itoa(int((p.State+1)&0xf)) + "." +
			strconv.Itoa(int((p.SubState+1)&0xf)) + pdFlag(p.HW, ", hw")
	case ptpkt.PktPwrX:
		l.opcode = "pwrx"
		wr := ""
		n := 0
		if p.WakeInterrupt {
			wr, n = "int", n+1
		}
		if p.WakeStore {
			wr, n = " st", n+1
		}
		if p.WakeAutonomous {
			wr, n = " hw", n+1
		}
		if n != 1 {
			wr = "bad"
		}
		l.standard = wr + ": c" + strconv.Itoa(int((p.LastCState+1)&0xf)) +
			", c" + strconv.Itoa(int((p.DeepestCState+1)&0xf))
	case ptpkt.PktPTW:
		l.opcode = "ptw"
		l.standard = pdHex(uint64(p.PLC)) + ": " + pdHex(p.Payload) + pdFlag(p.IPBit, ", ip")
	case ptpkt.PktCFE:
		l.opcode = "cfe"
		s := strconv.Itoa(int(p.EvType))
		if ptpkt.CFEHasVector(p.EvType) {
			if p.EvType == ptpkt.CFESIPI {
				s += ": " + pdHex(uint64(p.Vector))
			} else {
				s += ": " + strconv.Itoa(int(p.Vector))
			}
		}
		l.standard = s + pdFlag(p.IPBit, ", ip")
		l.trackID, l.trackValue = "type", ptpkt.CFEName(p.EvType)
	case ptpkt.PktEVD:
		l.opcode = "evd"
		l.standard = strconv.Itoa(int(p.EvType)) + ": " + pdHex(p.Payload)
		l.trackID, l.trackValue = "type", ptpkt.EVDName(p.EvType)
	case ptpkt.PktTrig:
		l.opcode = "trig"
		s := pdHex0(uint64(p.TRBV), 2) + pdFlag(p.IPBit, ", ip") + pdFlag(p.Mult, ", mult")
		if p.ICNTValid {
			s += ", icnt: " + strconv.Itoa(int(p.ICNT))
		}
		l.standard = s
	case ptpkt.PktBBP:
		l.opcode = "bbp"
		sz := "4"
		if p.SZ {
			sz = "8"
		}
		l.standard = "sz: " + sz + ", type: " + pdHex(uint64(p.EvType))
	case ptpkt.PktBIP:
		l.opcode = "bip"
		l.standard = pdHex(uint64(p.ID)) + ": " + pdHex(p.Payload)
	case ptpkt.PktBEP:
		l.opcode = "bep"
		l.standard = pdFlag(p.IPBit, "ip")
	default:
		d.diag("unknown packet", off, ptpkt.ErrBadOpcode)
	}
}

func (d *ptdumper) trackTSC(off uint64, p *ptpkt.Packet) {
	if !d.opts.NoTcal {
		var err error
		if d.inHeader {
			err = d.tcal.HeaderTSC(p, d.cfg)
		} else {
			err = d.tcal.UpdateTSC(p, d.cfg)
		}
		if err != nil {
			d.diag("error calibrating time", off, err)
		}
	}
	if err := d.time.UpdateTSC(p, d.cfg); err != nil {
		d.diag("error updating time", off, err)
	}
	d.showTime(off)
}

func (d *ptdumper) trackCBR(off uint64, p *ptpkt.Packet) {
	if !d.opts.NoTcal {
		var err error
		if d.inHeader {
			err = d.tcal.HeaderCBR(p, d.cfg)
		} else {
			err = d.tcal.UpdateCBR(p, d.cfg)
		}
		if err != nil {
			d.diag("error calibrating time", off, err)
		}
	}
	if err := d.time.UpdateCBR(p, d.cfg); err != nil {
		d.diag("error updating time", off, err)
	}
	d.line.skipTime = true
	d.showTime(off)
}

func (d *ptdumper) trackTMA(off uint64, p *ptpkt.Packet) {
	if !d.opts.NoTcal {
		if err := d.tcal.UpdateTMA(p, d.cfg); err != nil {
			d.diag("error calibrating time", off, err)
		}
	}
	if err := d.time.UpdateTMA(p, d.cfg); err != nil {
		d.diag("error updating time", off, err)
	}
	d.line.skipTcal = true
	d.showTime(off)
}

func (d *ptdumper) trackMTC(off uint64, p *ptpkt.Packet) {
	if !d.opts.NoTcal {
		if err := d.tcal.UpdateMTC(p, d.cfg); err != nil {
			d.diag("error calibrating time", off, err)
		}
	}
	if err := d.time.UpdateMTC(p, d.cfg); err != nil {
		d.diag("error updating time", off, err)
	}
	d.showTime(off)
}

func (d *ptdumper) trackCYC(off uint64, p *ptpkt.Packet) {
	var fcr uint64
	if !d.opts.NoTcal {
		var err error
		fcr, err = d.tcal.FCR()
		if err != nil {
			fcr = 0
			d.diag("calibration error", off, err)
		}
		if err := d.tcal.UpdateCYC(p, d.cfg); err != nil {
			d.diag("error calibrating time", off, err)
		}
	}
	if err := d.time.UpdateCYC(p, d.cfg, fcr); err != nil {
		d.diag("error updating time", off, err)
	} else if fcr == 0 {
		d.diag("error updating time: no calibration", off, nil)
	}
	d.line.skipTcal = true
	d.showTime(off)
}

// showTime fills the tracking columns with the calibration or the time.
func (d *ptdumper) showTime(off uint64) {
	l := &d.line
	if d.opts.Tcal && !l.skipTcal {
		l.trackID = "fcr"
		fcr, err := d.tcal.FCR()
		if err != nil {
			l.trackValue = "<unavailable>"
			d.diag("error printing time", off, err)
		} else {
			const scale = float64(1 << ptpkt.FCRShift)
			v := float64(fcr) / scale
			if d.opts.TimeDelta {
				// %+.3f
				s := strconv.FormatFloat(v-float64(d.fcr)/scale, 'f', 3, 64)
				if s[0] != '-' {
					s = "+" + s
				}
				l.trackValue = s
				d.fcr = fcr
			} else {
				l.trackValue = strconv.FormatFloat(v, 'f', 3, 64)
			}
		}
	}
	if d.opts.Time && !l.skipTime {
		l.trackID = "tsc"
		tsc, _, _, err := d.time.TSC()
		if err != nil && !(err == ptpkt.ErrNoTime && d.opts.NoWallClock) {
			d.diag("error printing time", off, err)
			l.trackValue = "<unavailable>"
			return
		}
		if d.opts.TimeDelta {
			if d.tsc <= tsc {
				l.trackValue = "+" + pdHex(tsc-d.tsc)
			} else {
				l.trackValue = "-" + pdHex(d.tsc-tsc)
			}
			d.tsc = tsc
		} else {
			l.trackValue = pdHex0(tsc, 16)
		}
	}
}

// PtdumpRun is what `ptjit dump --format=ptdump` does with a raw trace:
// it applies the configured CPU's errata (printing ptdump's diagnostic if
// they are unknown) and dumps buf with Ptdump.
func PtdumpRun(w io.Writer, buf []byte, s *PtdumpSettings) error {
	cfg := s.Config
	if msg := PtdumpErrataDiag(&cfg); msg != "" {
		if _, err := io.WriteString(w, msg); err != nil {
			return err
		}
	}
	return Ptdump(w, buf, &cfg, &s.Options)
}
