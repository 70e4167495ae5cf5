package tracker

import (
	"testing"

	"github.com/ptjit/ptjit/tracker/internal/x86emu"
)

// TestStoresCover: an emulated store is carried out only where its bytes
// include the faulting address (preciseWrite).
func TestStoresCover(t *testing.T) {
	stores := []x86emu.Store{{Addr: 0x1000, Data: make([]byte, 8)}, {Addr: 0x2ffc, Data: make([]byte, 4)}}
	for _, c := range []struct {
		addr uint64
		want bool
	}{
		{0x1000, true}, {0x1007, true}, {0x1008, false}, {0xfff, false},
		{0x2ffc, true}, {0x2fff, true}, {0x3000, false},
		{0x1000 + 0xfffff9d8, false}, // an address computed with a zero-extended disp32
	} {
		if got := storesCover(stores, c.addr); got != c.want {
			t.Errorf("storesCover(%#x) = %v, want %v", c.addr, got, c.want)
		}
	}
	if storesCover(nil, 0x1000) {
		t.Error("no stores cover an address")
	}
}
