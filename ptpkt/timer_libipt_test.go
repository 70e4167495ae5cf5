package ptpkt_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/ptpkt"
)

// TestTimerMatchesLibipt replays every corpus row that shows time (ptdump
// --time) through a Timer and compares its TSC at each timing packet with
// the value libipt's ptdump printed (absolute, or deltas accumulated).
func TestTimerMatchesLibipt(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	tscCol := regexp.MustCompile(`^([0-9a-f]{16})\s.*\stsc\s+([+-]?)([0-9a-f]+)\s*$`)
	rows, checked := 0, 0
	for _, r := range testenv.CorpusIndex(t, dir) {
		opts := strings.Fields(r.PtdumpOpts)
		if r.PtdumpOpts == "-" || !slices.Contains(opts, "--time") {
			continue
		}
		rows++
		s, _, err := ptfmt.ParsePtdumpArgs(opts)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.Config
		if cfg.CPU.Vendor != ptpkt.VendorUnknown {
			cfg.Errata, _ = cfg.CPU.Errata()
		}
		// Expected TSC by packet offset.
		want := map[uint64]uint64{}
		var cur uint64
		for _, line := range strings.Split(string(testenv.ReadExpected(t, filepath.Join(dir, r.PtdumpExp))), "\n") {
			m := tscCol.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			off, _ := strconv.ParseUint(m[1], 16, 64)
			v, _ := strconv.ParseUint(m[3], 16, 64)
			switch {
			case !s.Options.TimeDelta:
				cur = v
			case m[2] == "-":
				cur -= v
			default:
				cur += v
			}
			want[off] = cur
		}
		pt := testenv.ReadExpected(t, filepath.Join(dir, r.PT))
		tm := ptpkt.NewTimer(&cfg)
		tm.NoCal = s.Options.NoTcal
		dec := ptpkt.NewPacketDecoder(pt, &cfg)
		err = dec.SyncForward()
		var p ptpkt.Packet
		for err == nil {
			off := dec.Offset()
			if err = dec.Next(&p); err != nil {
				if ptpkt.IsEOS(err) {
					break
				}
				tm.Reset()
				err = dec.SyncForward()
				continue
			}
			if p.Type == ptpkt.PktCYC && s.Options.NoCyc {
				continue
			}
			tm.Packet(&p)
			w, ok := want[off]
			if !ok {
				continue
			}
			checked++
			if got, _ := tm.TSC(); got != w {
				t.Errorf("%s: %#x (%s): Timer TSC %#x, libipt %#x", r.Name, off, p.Type, got, w)
			}
		}
	}
	if rows < 30 || checked < 100 {
		t.Errorf("only %d rows / %d timing packets checked", rows, checked)
	}
	t.Logf("%d rows, %d timing packets agree with libipt", rows, checked)
}
