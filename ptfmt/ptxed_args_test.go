package ptfmt

import (
	"strings"
	"testing"
)

func TestParseFileRange(t *testing.T) {
	tests := []struct {
		arg       string
		name      string
		off, size uint64
		err       string
	}{
		{arg: "a.pt", name: "a.pt"},
		{arg: "a.pt:16", name: "a.pt", off: 16},
		{arg: "a.pt:0x10-0x20", name: "a.pt", off: 0x10, size: 0x10},
		{arg: "a.pt:0", name: "a.pt"},
		{arg: "dir:x/a.pt", name: "dir:x/a.pt"},           // not a range: part of the name
		{arg: "a.pt:", name: "a.pt:"},                     // empty: part of the name
		{arg: "a.pt:0x10-zz", name: "a.pt:0x10-zz"},       // TO not a number: part of the name (libipt)
		{arg: "a.pt:-5", name: "a.pt:-5"},                 // no FROM
		{arg: "c:/x.pt:0x10", name: "c:/x.pt", off: 0x10}, // the last ':' starts the range
		{arg: "a.pt:0x20-0x10", name: "a.pt", off: 0x20, err: `bad range "0x20-0x10": end before start`},
		{arg: "a.pt:5-5", name: "a.pt", off: 5, err: "end before start"},
	}
	for _, tt := range tests {
		name, off, size, err := ParseFileRange(tt.arg)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) || name != tt.name || off != tt.off {
				t.Errorf("%q: %q %#x, err %v; want %q %#x, error %q", tt.arg, name, off, err, tt.name, tt.off, tt.err)
			}
			continue
		}
		if err != nil || name != tt.name || off != tt.off || size != tt.size {
			t.Errorf("%q = %q %#x %#x, %v; want %q %#x %#x", tt.arg, name, off, size, err, tt.name, tt.off, tt.size)
		}
	}
}

// Every option of the table is one Set knows, and ParsePtxedArgs accepts
// it as ptxed spells it.
func TestPtxedFlagsTable(t *testing.T) {
	for _, f := range PtxedFlags {
		o := NewPtxedOptions()
		v := ""
		if f.HasArg {
			v = "1"
			if f.Name == "cpu" {
				v = "6/94"
			}
		}
		if err := o.Set(f.Name, v); err != nil {
			t.Errorf("Set(%q, %q): %v", f.Name, v, err)
		}
		args := []string{"--" + f.Name}
		if f.HasArg {
			args = append(args, v)
		}
		if f.Name != "pt" {
			args = append(args, "--pt", "x")
		}
		if _, err := ParsePtxedArgs(args); err != nil {
			t.Errorf("ParsePtxedArgs(%q): %v", args, err)
		}
		if f.Short != "" {
			if _, err := ParsePtxedArgs([]string{"-" + f.Short, "--pt", "x"}); err != nil {
				t.Errorf("-%s: %v", f.Short, err)
			}
		}
	}
	if err := NewPtxedOptions().Set("frobnicate", ""); err == nil || err.Error() != "unknown option: --frobnicate" {
		t.Errorf("unknown option: %v", err)
	}
}
