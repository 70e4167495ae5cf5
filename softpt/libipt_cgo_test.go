//go:build libipt

package softpt

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/x86"
)

// A differential check against Intel's libipt (apt-get install libipt-dev;
// go test -tags libipt ./softpt/). Go does not allow cgo in _test.go files,
// so the libipt side is testdata's libipt-helper (testenv.LibiptHelper): in
// mode "time" it decodes a raw trace with pt_insn_* and prints, per
// instruction, its address and pt_insn_time.

// TestLibiptTime decodes a soft trace of conditional jumps (je +0: both
// ways lead to the next instruction, and each needs a TNT bit, so libipt
// reads the timing packets between them) with a re-enable in mid-segment,
// and checks the time libipt gives every instruction against the TSC the
// test passed for it: the last MTC tick at or before it, or the TSC of its
// enable when no tick came since. Without a TMA after the enable's TSC,
// libipt ignores the MTCs until the next PSB and the time stands still.
func TestLibiptTime(t *testing.T) {
	helper := testenv.LibiptHelper(t)
	dir := t.TempDir()

	const base, n = 0x400000, 600
	const ratio, freq = 10, 2
	period := uint64(ratio << freq)
	code := append(bytes.Repeat([]byte{0x74, 0x00}, n), 0x0f, 0x05) // je .+2 ...; syscall
	th := NewThread(Config{MTC: true, MTCFreq: freq, CTCRatio: ratio, PSBPeriod: 1 << 20})
	var want []uint64 // the time of each instruction, from its TSC
	ip, tsc := uint64(base), uint64(100003)
	segStart := tsc
	th.Enable(ip, tsc)
	for i := 0; i < n; i++ {
		if i == n/2 { // a stop ptjit acts on; the thread resumes later
			th.Interrupt(ip, tsc+1)
			tsc += 1009
			segStart = tsc
			th.Enable(ip, tsc)
		}
		tsc += 3 + uint64(i%5)
		th.Step(&x86.Insn{IP: ip, Len: 2, Class: x86.ClassCondJump, Mode: x86.Mode64}, ip+2, tsc)
		want = append(want, max(segStart, tsc/period*period))
		ip += 2
	}
	th.StepExit(&x86.Insn{IP: ip, Len: 2, Class: x86.ClassSyscall, Mode: x86.Mode64}, tsc+1) // exit
	n1 := n + 1
	want = append(want, max(segStart, (tsc+1)/period*period))
	ptPath, imgPath := filepath.Join(dir, "trace.pt"), filepath.Join(dir, "code.bin")
	if err := os.WriteFile(ptPath, th.Take(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(imgPath, code, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(helper, "time", ptPath, imgPath, fmt.Sprint(base), fmt.Sprint(ratio), fmt.Sprint(freq)).CombinedOutput()
	if err != nil {
		t.Fatalf("libipt helper: %v\n%s", err, out)
	}
	var i int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for ; sc.Scan(); i++ {
		if strings.HasPrefix(sc.Text(), "insns ") {
			i--
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) != 3 || i >= n1 {
			t.Fatalf("libipt: line %d: %q", i+1, sc.Text())
		}
		gotIP, _ := strconv.ParseUint(f[0], 16, 64)
		got, _ := strconv.ParseUint(f[1], 10, 64)
		if gotIP != base+2*uint64(i) {
			t.Fatalf("libipt: instruction %d at %#x, want %#x", i, gotIP, base+2*uint64(i))
		}
		if got != want[i] || f[2] != "0" {
			t.Fatalf("libipt: instruction %d (%#x): time %d (%s lost MTC), want %d", i, gotIP, got, f[2], want[i])
		}
	}
	if i != n1 {
		t.Errorf("libipt decoded %d instructions, want %d:\n%s", i, n1, out[max(0, len(out)-300):])
	}
}
