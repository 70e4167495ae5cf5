package ptpkt

import (
	"math/rand/v2"
	"testing"
)

func TestCompressIP(t *testing.T) {
	tests := []struct {
		ip, last uint64
		have     bool
		want     IPCompression
	}{
		{0x401234, 0x40ffff, true, IPUpdate16},
		{0x7f0000401234, 0x7f00ffff0000, true, IPUpdate32},
		{0x00007fff00001000, 0x0000000000401000, true, IPSext48},
		{0xffffffff81000000, 0x0000000000401000, true, IPSext48},
		{0x0a00ccccddddeeee, 0x0a00111122223333, true, IPUpdate48},
		{0x0a00ccccddddeeee, 0x0b00111122223333, true, IPFull},
		{0x401234, 0x401000, false, IPSext48},
		{0x0a00ccccddddeeee, 0x0a00ccccdddd0000, false, IPFull},
	}
	for _, tc := range tests {
		ipc, payload := CompressIP(tc.ip, tc.last, tc.have)
		if ipc != tc.want {
			t.Errorf("CompressIP(%#x, %#x, %v) = %v, want %v", tc.ip, tc.last, tc.have, ipc, tc.want)
		}
		var l LastIP
		if tc.have {
			l.Update(IPFull, tc.last)
		}
		l.Update(ipc, payload)
		if got, err := l.IP(); err != nil || got != tc.ip {
			t.Errorf("%#x via %v: decodes to %#x (%v)", tc.ip, ipc, got, err)
		}
	}
}

// TestEncoderIPStream writes random IPs with the Encoder and checks that
// the packet decoder plus LastIP recover every one.
func TestEncoderIPStream(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var e Encoder
	e.Append(&Packet{Type: PktPSB})
	var ips []uint64
	base := uint64(0x7f12_3456_0000)
	for i := 0; i < 2000; i++ {
		var ip uint64
		switch r.IntN(4) {
		case 0:
			ip = base + uint64(r.IntN(0x10000))
		case 1:
			ip = base&^0xffffffff | uint64(r.Uint32())
		case 2:
			ip = 0xffffffff_8000_0000 | uint64(r.Uint32())
		default:
			ip = r.Uint64()
		}
		ips = append(ips, ip)
		typ := []PacketType{PktTIP, PktFUP, PktTIPPGE, PktTIPPGD}[r.IntN(4)]
		if err := e.IPPacket(typ, ip); err != nil {
			t.Fatal(err)
		}
		if r.IntN(50) == 0 {
			e.Append(&Packet{Type: PktTIPPGD, IPC: IPSuppressed})
			ips = append(ips, 0)
		}
	}
	if err := e.IPPacket(PktTNT8, 0); err == nil {
		t.Errorf("IPPacket(TNT8) accepted")
	}
	dec := NewPacketDecoder(e.Buf, nil)
	dec.SyncForward()
	var p Packet
	var l LastIP
	dec.Next(&p)
	sizes := map[IPCompression]int{}
	for i, want := range ips {
		if err := dec.Next(&p); err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		sizes[p.IPC]++
		l.Update(p.IPC, p.IP)
		got, err := l.IP()
		if want == 0 {
			if err != ErrIPSuppressed {
				t.Fatalf("packet %d: want suppressed, got %#x %v", i, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Fatalf("packet %d (%v): got %#x %v, want %#x", i, p.IPC, got, err, want)
		}
	}
	for _, c := range []IPCompression{IPUpdate16, IPUpdate32, IPSext48, IPFull} {
		if sizes[c] == 0 {
			t.Errorf("no %v packets generated: %v", c, sizes)
		}
	}
}
