package ptfmt

import (
	"bytes"
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
)

func TestDumpText(t *testing.T) {
	var e ptpkt.Encoder
	for _, p := range []ptpkt.Packet{
		{Type: ptpkt.PktPSB}, {Type: ptpkt.PktModeExec, CSL: true},
		{Type: ptpkt.PktFUP, IPC: ptpkt.IPSext48, IP: 0x401000}, {Type: ptpkt.PktTSC, Payload: 0x1000}, {Type: ptpkt.PktPSBEnd},
		{Type: ptpkt.PktTNT8, TNTBits: 3, TNTPayload: 5}, {Type: ptpkt.PktTIP, IPC: ptpkt.IPUpdate16, IP: 0x2000},
	} {
		if err := e.Append(&p); err != nil {
			t.Fatal(err)
		}
	}
	e.Buf = append(e.Buf, 0xc9)
	var out bytes.Buffer
	if err := DumpText(&out, e.Buf, nil); err != nil {
		t.Fatal(err)
	}
	want := "0x00000000  psb\n" +
		"0x00000010  mode.exec mode=64-bit\n" +
		"0x00000012  fup sext48=0x401000  -> 0x401000\n" +
		"0x00000019  tsc tsc=0x1000  [tsc 0x1000]\n" +
		"0x00000021  psbend\n" +
		"0x00000023  tnt.8 TNT\n" +
		"0x00000024  tip update16=0x2000  -> 0x402000\n" +
		"0x00000027  error: unknown opcode; resyncing at the next PSB\n"
	if out.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	DumpText(&out, []byte{0, 0, 0}, nil)
	if out.String() != "no PSB in 3 bytes: nothing to decode\n" {
		t.Errorf("no PSB: got %q", out.String())
	}
}
