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

	"github.com/ptjit/ptjit/x86"
)

// A differential check against Intel's libipt (apt-get install libipt-dev;
// go test -tags libipt ./softpt/). Go does not allow cgo in _test.go files,
// so the libipt side is a small C program built with gcc -lipt at test
// time: it decodes a raw trace with pt_insn_* and prints, per instruction,
// its address and pt_insn_time.
const libiptTimeC = `
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

static uint8_t *load(const char *path, size_t *size) {
	FILE *f = fopen(path, "rb");
	if (!f) { perror(path); exit(2); }
	fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n ? n : 1);
	if (fread(buf, 1, n, f) != (size_t) n) { perror(path); exit(2); }
	fclose(f); *size = n; return buf;
}

int main(int argc, char **argv) {
	if (argc != 6) { fprintf(stderr, "usage: pt image base ctc-ratio mtc-freq\n"); return 2; }
	size_t size;
	struct pt_config config;
	pt_config_init(&config);
	config.begin = load(argv[1], &size);
	config.end = config.begin + size;
	config.cpuid_0x15_eax = 1;
	config.cpuid_0x15_ebx = strtoul(argv[4], NULL, 0);
	config.mtc_freq = strtoul(argv[5], NULL, 0);
	struct pt_image *image = pt_image_alloc(NULL);
	if (pt_image_add_file(image, argv[2], 0, UINT64_MAX, NULL, strtoull(argv[3], NULL, 0)) < 0) { fprintf(stderr, "image\n"); return 2; }
	struct pt_insn_decoder *d = pt_insn_alloc_decoder(&config);
	pt_insn_set_image(d, image);
	int st = pt_insn_sync_forward(d);
	if (st < 0) { printf("error sync %d\n", -st); return 0; }
	for (;;) {
		while (st & pts_event_pending) {
			struct pt_event ev;
			st = pt_insn_event(d, &ev, sizeof(ev));
			if (st < 0) break;
		}
		if (st < 0 || (st & pts_eos)) break;
		struct pt_insn insn;
		st = pt_insn_next(d, &insn, sizeof(insn));
		if (st < 0) break;
		uint64_t tsc = 0; uint32_t lost_mtc = 0, lost_cyc = 0;
		if (pt_insn_time(d, &tsc, &lost_mtc, &lost_cyc) < 0) { printf("error time\n"); return 0; }
		printf("%" PRIx64 " %" PRIu64 " %u\n", insn.ip, tsc, lost_mtc);
	}
	if (st < 0 && st != -pte_eos) printf("error %d\n", -st);
	return 0;
}
`

// TestLibiptTime decodes a soft trace of conditional jumps (je +0: both
// ways lead to the next instruction, and each needs a TNT bit, so libipt
// reads the timing packets between them) with a re-enable in mid-segment,
// and checks the time libipt gives every instruction against the TSC the
// test passed for it: the last MTC tick at or before it, or the TSC of its
// enable when no tick came since. Without a TMA after the enable's TSC,
// libipt ignores the MTCs until the next PSB and the time stands still.
func TestLibiptTime(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "libipt-time")
	src := helper + ".c"
	if err := os.WriteFile(src, []byte(libiptTimeC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-o", helper, src, "-lipt").CombinedOutput(); err != nil {
		t.Fatalf("building the libipt helper (is libipt-dev installed?): %v\n%s", err, out)
	}

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
	out, err := exec.Command(helper, ptPath, imgPath, fmt.Sprint(base), fmt.Sprint(ratio), fmt.Sprint(freq)).CombinedOutput()
	if err != nil {
		t.Fatalf("libipt helper: %v\n%s", err, out)
	}
	var i int
	sc := bufio.NewScanner(bytes.NewReader(out))
	for ; sc.Scan(); i++ {
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
