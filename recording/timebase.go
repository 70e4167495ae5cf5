package recording

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/db"
)

// TimeBase is the one way every command prints and reads time: seconds
// since the recording started (meta start_tsc), converted with the TSC
// frequency ptjit measured (meta tsc_hz), or, with Raw (--tsc), the raw
// TSC that PT packets and code.db carry.
type TimeBase struct {
	StartTSC uint64
	Hz       uint64 // 0: unknown (a raw PT file): times are printed raw
	Raw      bool
}

// LoadTimeBase reads the time base of a recording's code.db.
func LoadTimeBase(cdb *db.DB, raw bool) (TimeBase, error) {
	meta, err := cdb.Meta()
	if err != nil {
		return TimeBase{}, err
	}
	tb := TimeBase{Raw: raw}
	tb.StartTSC, _ = strconv.ParseUint(meta["start_tsc"], 10, 64)
	tb.Hz, _ = strconv.ParseUint(meta["tsc_hz"], 10, 64)
	if tb.Hz == 0 {
		return tb, fmt.Errorf("%s: meta.tsc_hz is missing: cannot convert TSC to seconds (use --tsc)", cdb.Path())
	}
	return tb, nil
}

// Format prints tsc as seconds since the start with nanosecond digits
// ("12.000345678"; negative before the start), or the raw TSC.
func (t TimeBase) Format(tsc uint64) string {
	if t.Raw || t.Hz == 0 {
		return strconv.FormatUint(tsc, 10)
	}
	return strconv.FormatFloat(t.Seconds(tsc), 'f', 9, 64)
}

// Seconds converts tsc to seconds since the start.
func (t TimeBase) Seconds(tsc uint64) float64 {
	d := float64(tsc) - float64(t.StartTSC)
	if tsc >= t.StartTSC {
		// exact integer part first: float64 keeps 53 bits
		d = float64(tsc - t.StartTSC)
	}
	return d / float64(t.Hz)
}

// Parse reads a time argument: seconds since the start ("1.25", "1.25s",
// "1250ms", "1250000us", "1250000000ns"), or a raw TSC written "tsc:N"
// (or, with Raw, a plain integer). what names the argument in errors.
func (t TimeBase) Parse(what, s string) (uint64, error) {
	if v, ok := strings.CutPrefix(s, "tsc:"); ok || t.Raw {
		n, err := strconv.ParseUint(v, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("%s %q: not a TSC value", what, s)
		}
		return n, nil
	}
	if t.Hz == 0 {
		return 0, fmt.Errorf("%s %q: this input has no TSC frequency to convert seconds; give a raw TSC as tsc:N", what, s)
	}
	num, scale := s, 1.0
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"ns", 1e-9}, {"us", 1e-6}, {"µs", 1e-6}, {"ms", 1e-3}, {"s", 1}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			num, scale = v, u.scale
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s %q: not a time (seconds since the recording started, e.g. 1.25 or 1250ms; or tsc:N)", what, s)
	}
	// Format prints nanoseconds, rounded: half a nanosecond earlier,
	// rounded down, is at or before the instant it printed, so a time
	// copied from the output includes what happened then.
	ticks := math.Floor((f*scale - 0.5e-9) * float64(t.Hz))
	if f*scale == 0 {
		ticks = 0
	}
	if ticks < -float64(t.StartTSC) || float64(t.StartTSC)+ticks > math.MaxUint64/2 {
		return 0, fmt.Errorf("%s %q: outside the recording's time range", what, s)
	}
	if ticks < 0 {
		return t.StartTSC - uint64(-ticks), nil
	}
	return t.StartTSC + uint64(ticks), nil
}

// ParseRange reads "START,END" (either may be empty: from the start, to
// the end) as a TSC range [from, to).
func (t TimeBase) ParseRange(what, s string) (from, to uint64, err error) {
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return 0, 0, fmt.Errorf("%s %q: want START,END (seconds since the recording started; either may be empty)", what, s)
	}
	to = math.MaxUint64
	if a != "" {
		if from, err = t.Parse(what+" START", a); err != nil {
			return 0, 0, err
		}
	}
	if b != "" {
		if to, err = t.Parse(what+" END", b); err != nil {
			return 0, 0, err
		}
	}
	if to <= from {
		return 0, 0, fmt.Errorf("%s %q: END is not after START", what, s)
	}
	return from, to, nil
}

// At says when tsc was: "tsc N" raw, else "T s".
func (t TimeBase) At(tsc uint64) string {
	if t.Raw || t.Hz == 0 {
		return "tsc " + t.Format(tsc)
	}
	return t.Format(tsc) + " s"
}

// Describe is db.VersionInfo.String with times in this time base:
// "region R version V [START-END] pid P tid T, CAUSE at ip IP, valid from
// TIME[ to TIME]".
func (t TimeBase) Describe(v *db.VersionInfo) string {
	s := fmt.Sprintf("region %d version %d [%#x-%#x] pid %d tid %d, %s at ip %#x, valid from %s", v.Region, v.Vno, v.Addr, v.Addr+v.Size, v.PID, v.TID, v.Cause, v.IP, t.At(v.Valid.TSC))
	if v.HasEnd {
		s += " to " + t.At(v.End.TSC)
	}
	return s
}
