package ptpkt

import (
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// FuzzPacketDecoder feeds arbitrary bytes to the packet decoder (synced at
// offset 0 and at PSBs, with and without errata) and checks that it never
// panics, always makes progress, reports errors inside the buffer, and
// that every decoded packet re-encodes to bytes that decode to the same
// packet.
func FuzzPacketDecoder(f *testing.F) {
	for _, b := range testenv.PacketSeeds(f) {
		f.Add(b)
	}
	errata := &Config{Errata: Errata{SKD007: true, SKZ84: true, SKL168: true}, MTCFreq: 3,
		CPUID15EAX: 2, CPUID15EBX: 7, NomFreq: 9}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, cfg := range []*Config{nil, errata} {
			checkDecode(t, data, cfg, true)
			checkDecode(t, data, cfg, false)
		}
	})
}

func checkDecode(t *testing.T, data []byte, cfg *Config, noSync bool) {
	dec := NewPacketDecoder(data, cfg)
	var err error
	if noSync {
		err = dec.SyncSet(0)
	} else {
		err = dec.SyncForward()
	}
	var p, q Packet
	var enc [MaxPacketSize]byte
	// Every step consumes at least one byte or moves the sync point
	// forward, so this bounds any correct decoder.
	limit := 2*len(data) + 4
	for steps := 0; err == nil; steps++ {
		if steps > limit {
			t.Fatalf("no progress after %d steps at %#x", steps, dec.Offset())
		}
		off := dec.Offset()
		err = dec.Next(&p)
		if err != nil {
			if IsEOS(err) {
				break
			}
			de, ok := err.(*DecodeError)
			if !ok || de.Offset != off || off >= uint64(len(data)) {
				t.Fatalf("bad error %v at %#x", err, off)
			}
			prev := dec.SyncOffset()
			err = dec.SyncForward()
			if err == nil && dec.SyncOffset() <= prev && !noSync {
				t.Fatalf("resync did not move forward: %#x -> %#x", prev, dec.SyncOffset())
			}
			continue
		}
		if p.Size == 0 || dec.Offset() <= off {
			t.Fatalf("%s at %#x: size %d, next offset %#x", p.Type, off, p.Size, dec.Offset())
		}
		if p.Type == PktInvalid || p.Type == PktBIP {
			continue // no standalone encoding (BIP needs its BBP)
		}
		if p.Type == PktOVF && dec.Offset()-off == 3 {
			continue // SKD007 OVF
		}
		n, eerr := p.Encode(enc[:])
		if eerr != nil {
			t.Fatalf("%s at %#x decoded but does not encode: %v (%+v)", p.Type, off, eerr, p)
		}
		// Reserved bits and CYC's redundant extension bytes are not
		// preserved, so compare packets, not bytes (canonical bytes are
		// checked against libipt's encoder in TestPacketEncodeKnownBytes).
		d2 := NewPacketDecoder(enc[:n], cfg)
		d2.SyncSet(0)
		if derr := d2.Next(&q); derr != nil {
			t.Fatalf("%s at %#x: re-encoded bytes % x do not decode: %v", p.Type, off, enc[:n], derr)
		}
		q.Size = p.Size
		if q != p {
			t.Fatalf("%s at %#x: round trip\n got %+v\nwant %+v", p.Type, off, q, p)
		}
	}
}
