package tracker

import (
	"reflect"
	"testing"
)

// TestParsePerfMap: V8's lines (hex without 0x), HotSpot's (0x...), names
// with spaces, a line still being written, and lines that do not parse.
func TestParsePerfMap(t *testing.T) {
	in := "7f7798026400 38 JS:^fooAdd /tmp/names.js:1:16\n" +
		"0x00007fb3b4ec7600 0x0000000000000058 int Names.fooAdd(int)\n" +
		"bad line\n" +
		"\n" +
		"10 0 zero-size\n" +
		"ffffffffffffffff 2 wraps\n" +
		"1000 10 half"
	lines, used, bad := parsePerfMap([]byte(in))
	want := []perfMapLine{
		{0x7f7798026400, 0x38, "JS:^fooAdd /tmp/names.js:1:16"},
		{0x7fb3b4ec7600, 0x58, "int Names.fooAdd(int)"},
	}
	if !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %+v\nwant %+v", lines, want)
	}
	if used != len(in)-len("1000 10 half") {
		t.Errorf("used %d of %d: the unfinished line must be left", used, len(in))
	}
	if bad != 3 {
		t.Errorf("bad %d, want 3", bad)
	}
}
