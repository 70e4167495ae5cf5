package decode

import (
	"encoding/binary"
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

// countingTrace counts the bytes read from a trace.
type countingTrace struct {
	BytesTrace
	read int64
}

func (c *countingTrace) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.BytesTrace.ReadAt(p, off)
	c.read += int64(n)
	return n, err
}

// psbTrace builds n segments of 4 KiB, each a PSB+ header with TSC
// 1000*(i+1) padded with PAD packets.
func psbTrace(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		seg := make([]byte, 4096)
		copy(seg, ptpkt.PSBPattern[:])
		seg[16] = 0x19 // TSC
		var v [8]byte
		binary.LittleEndian.PutUint64(v[:], uint64(1000*(i+1)))
		copy(seg[17:24], v[:7])
		seg[24], seg[25] = 0x02, 0x23 // PSBEND
		b = append(b, seg...)
	}
	return b
}

// TestTimeRange checks that TimeRange finds the PSBs around a window by
// binary search: the right offsets, and only a small part of a 4 MiB
// trace read.
func TestTimeRange(t *testing.T) {
	const n = 1024
	pt := psbTrace(n)
	for _, tc := range []struct {
		from, to uint64
		lo, hi   int64
	}{
		{5500, 7000, 4 * 4096, 6 * 4096},        // PSB 5 (tsc 5000) .. PSB with tsc 7000
		{5000, 5001, 4 * 4096, 5 * 4096},        // exactly at a PSB
		{0, 1500, 0, 1 * 4096},                  // before the first PSB
		{900000, 2000000, 899 * 4096, n * 4096}, // to the end
		{2000000, 3000000, (n - 1) * 4096, n * 4096},
	} {
		ct := &countingTrace{BytesTrace: pt}
		lo, hi, err := TimeRange(ct, nil, tc.from, tc.to)
		if err != nil {
			t.Fatal(err)
		}
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("[%d, %d): got [%#x, %#x), want [%#x, %#x)", tc.from, tc.to, lo, hi, tc.lo, tc.hi)
		}
		if ct.read > int64(len(pt))/8 {
			t.Errorf("[%d, %d): read %d of %d bytes: no binary search", tc.from, tc.to, ct.read, len(pt))
		}
	}
}

// TestFirstTSC: the TSC of the first PSB+ that has one, after padding, and
// past a PSB+ without TSC; none in an empty trace, one without PSB, or
// one whose PSBs carry no TSC.
func TestFirstTSC(t *testing.T) {
	noTSC := make([]byte, 4096)
	copy(noTSC, ptpkt.PSBPattern[:])
	noTSC[16], noTSC[17] = 0x02, 0x23 // PSBEND right after the PSB
	pad := make([]byte, 100)          // PAD packets
	for _, tc := range []struct {
		name string
		pt   []byte
		tsc  uint64
		ok   bool
	}{
		{"first segment", psbTrace(3), 1000, true},
		{"after padding", append(append([]byte(nil), pad...), psbTrace(2)...), 1000, true},
		{"after a PSB+ without TSC", append(append([]byte(nil), noTSC...), psbTrace(1)...), 1000, true},
		{"empty", nil, 0, false},
		{"no PSB", pad, 0, false},
		{"PSBs without TSC", append(append([]byte(nil), noTSC...), noTSC...), 0, false},
	} {
		tsc, ok, err := FirstTSC(BytesTrace(tc.pt), nil)
		if err != nil || tsc != tc.tsc || ok != tc.ok {
			t.Errorf("%s: FirstTSC = %d, %v, %v; want %d, %v", tc.name, tsc, ok, err, tc.tsc, tc.ok)
		}
	}
}
