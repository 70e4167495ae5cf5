package recording

import (
	"strings"
	"testing"
)

// TestShortHex: history --writes shows at most maxHexBytes of a write's
// bytes, with a marker counting the rest.
func TestShortHex(t *testing.T) {
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{8, strings.Repeat("ab", 8)},
		{16, strings.Repeat("ab", 16)},
		{17, strings.Repeat("ab", 16) + "…+1B"},
		{4096, strings.Repeat("ab", 16) + "…+4080B"},
	} {
		b := make([]byte, tc.n)
		for i := range b {
			b[i] = 0xab
		}
		if got := shortHex(b); got != tc.want {
			t.Errorf("%d bytes: %q, want %q", tc.n, got, tc.want)
		}
	}
}

// TestTimeBaseParse: every time argument form, and the errors.
func TestTimeBaseParse(t *testing.T) {
	tb := TimeBase{StartTSC: 1_000_000, Hz: 1_000_000_000}
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{"0", 1_000_000}, {"1.5", 1_500_999_999}, {"1.5s", 1_500_999_999}, {"250ms", 250_999_999},
		{"3us", 1_002_999}, {"7ns", 1_000_006}, {"tsc:42", 42}, {"-0.0005", 499_999},
	} {
		got, err := tb.Parse("--at", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "x", "1.5h", "tsc:", "-5", "nan"} {
		if _, err := tb.Parse("--at", in); err == nil || !strings.Contains(err.Error(), "--at") {
			t.Errorf("Parse(%q): error %v, want one naming --at", in, err)
		}
	}
	raw := TimeBase{StartTSC: 5, Hz: 10, Raw: true}
	if got, err := raw.Parse("--at", "123"); err != nil || got != 123 {
		t.Errorf("raw Parse(123) = %d, %v", got, err)
	}
	if s := tb.Format(1_501_000_000); s != "1.500000000" {
		t.Errorf("Format: %q", s)
	}
	// a printed time given back is at or just before what it printed
	fast := TimeBase{StartTSC: 12345, Hz: 2_900_000_123}
	for _, tsc := range []uint64{12345, 99_999_999, 2_900_012_468, 123_456_789_012} {
		got, err := fast.Parse("--at", fast.Format(tsc))
		if err != nil || got > tsc || tsc-got > 3 {
			t.Errorf("Parse(Format(%d)) = %d, %v", tsc, got, err)
		}
	}
	if _, _, err := tb.ParseRange("--time", "2,1"); err == nil {
		t.Error("ParseRange(2,1): no error")
	}
}
