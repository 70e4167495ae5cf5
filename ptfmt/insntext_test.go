package ptfmt

import (
	"testing"

	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/x86"
)

// TestFlowInsnTextAcrossSections: an instruction whose bytes run from one
// section into the next (two pages of JIT code, each with its own
// version, as W^X records them) is disassembled from both, the second as
// valid at the time the decoder read the instruction: mov $0x44332211,%eax
// across the boundary, with the page after it at two versions that give
// two immediates. Without the image, the text is "(bad)", as it was.
func TestFlowInsnTextAcrossSections(t *testing.T) {
	const page = 0x10000
	a := make([]byte, 4096)
	for i := range a {
		a[i] = 0x90
	}
	copy(a[4096-3:], []byte{0xb8, 0x11, 0x22}) // mov $imm32, %eax: 3 bytes here
	b1 := []byte{0x33, 0x44, 0xc3, 0x90}       // the rest in the next page, version 1
	b2 := []byte{0x55, 0x66, 0xc3, 0x90}       // version 2, from TSC 100
	img := decode.NewImage()
	if err := img.AddVersion(page, a, 0, 1000, "a"); err != nil {
		t.Fatal(err)
	}
	if err := img.AddVersion(page+4096, b1, 0, 100, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := img.AddVersion(page+4096, b2, 100, 1000, "b2"); err != nil {
		t.Fatal(err)
	}
	ip := uint64(page + 4096 - 3)
	for _, tc := range []struct {
		tsc  uint64
		want string
	}{
		{50, "mov $0x44332211,%eax"},
		{150, "mov $0x66552211,%eax"},
	} {
		sec := img.Lookup(ip, tc.tsc)
		if sec == nil {
			t.Fatalf("no section at %#x", ip)
		}
		in := &decode.FlowInsn{IP: ip, Size: 5, Mode: x86.Mode64, Section: sec, TSC: tc.tsc}
		if got := FlowInsnText(in, img); got != tc.want {
			t.Errorf("at TSC %d: %q, want %q", tc.tsc, got, tc.want)
		}
		if got := FlowInsnText(in, nil); got != "(bad)" {
			t.Errorf("at TSC %d without the image: %q, want (bad)", tc.tsc, got)
		}
	}
}
