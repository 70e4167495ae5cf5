package ptfmt

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

// ptdumpTestTrace is a small trace with PAD, timing packets and an error.
func ptdumpTestTrace(t *testing.T) []byte {
	t.Helper()
	var b []byte
	for _, p := range []ptpkt.Packet{
		{Type: ptpkt.PktPSB},
		{Type: ptpkt.PktTSC, Payload: 0x1000},
		{Type: ptpkt.PktPad},
		{Type: ptpkt.PktPSBEnd},
		{Type: ptpkt.PktMTC, MTC: 2},
		{Type: ptpkt.PktCYC, Payload: 9},
		{Type: ptpkt.PktTIP, IPC: ptpkt.IPUpdate16, IP: 0x1234},
	} {
		var err error
		if b, err = ptpkt.AppendPacket(b, &p); err != nil {
			t.Fatal(err)
		}
	}
	return append(b, 0xc9) // bad opcode at 0x20
}

func ptdumpString(t *testing.T, args string, pt []byte) string {
	t.Helper()
	s, files, err := ParsePtdumpArgs(strings.Fields(args))
	if err != nil || len(files) != 0 {
		t.Fatalf("%q: %v %v", args, files, err)
	}
	var out bytes.Buffer
	if err := PtdumpRun(&out, pt, s); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// TestPtdumpOptions covers the ptdump options the libipt corpus does not
// exercise, with the output ptdump's print_buffer produces: offset column
// %-17s plus a blank, opcode %-10s plus a blank when a payload follows.
func TestPtdumpOptions(t *testing.T) {
	pt := ptdumpTestTrace(t)
	const all = "0000000000000000  psb\n" +
		"0000000000000010  tsc        1000\n" +
		"0000000000000018  pad\n" +
		"0000000000000019  psbend\n" +
		"000000000000001b  mtc        2\n" +
		"000000000000001d  cyc        9\n" +
		"000000000000001e  tip        1: ????????????1234\n" +
		"[21: error decoding packet: unknown opcode]\n"
	drop := func(names ...string) string {
		var keep []string
		for _, l := range strings.SplitAfter(all, "\n") {
			f := strings.Fields(l)
			if len(f) > 1 && !strings.HasPrefix(l, "[") && slicesContains(names, f[1]) {
				continue
			}
			keep = append(keep, l)
		}
		return strings.Join(keep, "")
	}
	tests := []struct{ args, want string }{
		{"", all},
		{"--no-pad", drop("pad")},
		{"--no-timing", drop("tsc", "mtc", "cyc")},
		{"--no-cyc", drop("cyc")},
		{"--quiet", "[21: error decoding packet: unknown opcode]\n"},
		{"--cpu 0/0 --quiet", "[0: failed to determine errata: unknown cpu]\n[21: error decoding packet: unknown opcode]\n"},
		{"--no-offset --no-timing --no-pad", "psb\npsbend\ntip        1: ????????????1234\n[21: error decoding packet: unknown opcode]\n"},
		{"--lastip --quiet", "[21: error decoding packet: unknown opcode]\n"},
		// MTC-only timing without CPUID 0x15: the MTC is ignored
		// between TSC and TMA, the CYC has no calibration.
		{"--time --no-timing", "0000000000000000  psb\n0000000000000018  pad\n0000000000000019  psbend\n" +
			"[1d: calibration error: no timing information]\n[1d: error updating time: no calibration]\n" +
			"000000000000001e  tip        1: ????????????1234\n[21: error decoding packet: unknown opcode]\n"},
	}
	for _, tc := range tests {
		if got := ptdumpString(t, tc.args, pt); got != tc.want {
			t.Errorf("ptdump %s:\n got:\n%s\nwant:\n%s", tc.args, got, tc.want)
		}
	}
	// Time tracking columns: payload %-25s, id %-5s.
	got := ptdumpString(t, "--time", pt[:0x18])
	want := "0000000000000000  psb\n0000000000000010  tsc        1000                      tsc  0000000000001000\n"
	if got != want {
		t.Errorf("ptdump --time:\n got %q\nwant %q", got, want)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestParsePtdumpArgs(t *testing.T) {
	s, files, err := ParsePtdumpArgs([]string{"--cpu", "6/0x9e/10", "--mtc-freq=0x3", "--nom-freq", "010",
		"--cpuid-0x15.eax", "2", "--cpuid-0x15.ebx=100", "--keep-tcal-on-ovf", "a.pt"})
	if err != nil {
		t.Fatal(err)
	}
	c := s.Config
	if c.CPU != (ptpkt.CPU{Vendor: ptpkt.VendorIntel, Family: 6, Model: 0x9e, Stepping: 10}) || c.MTCFreq != 3 || c.NomFreq != 8 ||
		c.CPUID15EAX != 2 || c.CPUID15EBX != 100 || !c.KeepTcalOnOVF || len(files) != 1 || files[0] != "a.pt" {
		t.Errorf("parsed %+v %v", s, files)
	}
	e, err := c.CPU.Errata()
	if err != nil || !e.SKD007 || !e.SKL168 || e.APL11 {
		t.Errorf("errata of 6/158: %+v %v", e, err)
	}
	for _, tc := range []struct{ args, err string }{
		{"--time --tcal", "specify either --time or --tcal"},
		{"--mtc-freq 256", "--mtc-freq: value too big: 256"},
		{"--nom-freq x", "--nom-freq: bad argument: x"},
		{"--cpuid-0x15.eax", "--cpuid-0x15.eax: missing argument"},
		{"--cpu 6", `--cpu: cpu must be specified as f/m[/s]: "6"`},
		{"--bogus", "unknown option: --bogus"},
		{"--raw=1", "--raw takes no argument"},
	} {
		_, _, err := ParsePtdumpArgs(strings.Fields(tc.args))
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: error %v, want %q", tc.args, err, tc.err)
		}
	}
}
