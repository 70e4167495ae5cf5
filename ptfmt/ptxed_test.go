package ptfmt

import (
	"strings"
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

func TestParsePtxedArgs(t *testing.T) {
	tests := []struct {
		args []string
		err  string
		chk  func(*PtxedOptions) bool
	}{
		{args: []string{"--pt", "x.pt"}, chk: func(o *PtxedOptions) bool { return o.BlockDecoder && o.PT == "x.pt" }},
		{args: []string{"--insn-decoder", "--pt", "x.pt"}, chk: func(o *PtxedOptions) bool { return !o.BlockDecoder }},
		{args: []string{"--filter:addr0_cfg", "1", "--filter:addr0_a", "0x1000", "--filter:addr0_b", "0x10ff", "--pt", "x"},
			chk: func(o *PtxedOptions) bool {
				return o.Filter.Cfg[0] == 1 && o.Filter.A[0] == 0x1000 && o.Filter.B[0] == 0x10ff
			}},
		{args: []string{"--mtc-freq", "4", "--cpuid-0x15.eax", "1", "--cpuid-0x15.ebx", "4", "--nom-freq", "8", "--pt", "x"},
			chk: func(o *PtxedOptions) bool {
				return o.MTCFreq == 4 && o.CPUID15EAX == 1 && o.CPUID15EBX == 4 && o.NomFreq == 8
			}},
		{args: []string{"--cpu", "6/94", "--pt", "x"}, chk: func(o *PtxedOptions) bool { return o.CPUSet }},
		{args: []string{"--cpu", "none", "--pt", "x"}, chk: func(o *PtxedOptions) bool { return !o.CPUSet }},
		{args: []string{"--stat:blocks", "--pt", "x"}, chk: func(o *PtxedOptions) bool { return o.Stat && o.StatBlocks }},
		{args: []string{}, err: "no pt file"},
		{args: []string{"--pt"}, err: "--pt: missing argument"},
		{args: []string{"--pt", "a", "--pt", "b"}, err: "duplicate pt sources"},
		{args: []string{"--mtc-freq", "256", "--pt", "x"}, err: "value too big"},
		{args: []string{"--mtc-freq", "x", "--pt", "x"}, err: "bad argument"},
		{args: []string{"--filter:addr0_cfg", "16", "--pt", "x"}, err: "value too big"},
		{args: []string{"--filter:addr4_a", "1", "--pt", "x"}, err: "unknown option"},
		{args: []string{"--cpu", "abc", "--pt", "x"}, err: "f/m[/s]"},
		{args: []string{"--frobnicate", "--pt", "x"}, err: "unknown option: --frobnicate"},
	}
	for _, tt := range tests {
		o, err := ParsePtxedArgs(tt.args)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: err = %v, want %q", tt.args, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.args, err)
			continue
		}
		if !tt.chk(o) {
			t.Errorf("%q: options %+v", tt.args, o)
		}
	}
}

func TestFlowConfigUnknownCPU(t *testing.T) {
	o, err := ParsePtxedArgs([]string{"--cpu", "0/0", "--pt", "x"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.FlowConfig()
	if err == nil || !strings.Contains(err.Error(), "unknown cpu") || cfg == nil || cfg.Packet.Errata != (ptpkt.Errata{}) {
		t.Fatalf("FlowConfig = %+v, %v; want no errata and an unknown cpu error", cfg, err)
	}
	o, _ = ParsePtxedArgs([]string{"--cpu", "6/94", "--pt", "x"})
	cfg, err = o.FlowConfig()
	if err != nil || !cfg.Packet.Errata.SKD010 || !cfg.Packet.Errata.SKL014 {
		t.Fatalf("6/94: errata %+v, %v", cfg.Packet.Errata, err)
	}
}
