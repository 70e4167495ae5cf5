package decode

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

// TestTakeWindow checks the window mapping: at least the size asked for,
// huge-page aligned and sized, writable throughout, taken by one caller at
// a time, and grown (the old mapping unmapped) when a larger one is asked
// for. Where the kernel gives transparent huge pages to madvised memory,
// the populated window must be in huge pages, as /proc/self/smaps says.
func TestTakeWindow(t *testing.T) {
	for _, n := range []int{5 << 20, 9<<20 + 1} {
		b := takeWindow(n)
		if b == nil {
			t.Fatalf("takeWindow(%d): nil", n)
		}
		if len(b) < n || len(b)%hugePage != 0 || uintptr(unsafe.Pointer(&b[0]))%hugePage != 0 {
			t.Fatalf("takeWindow(%d): %d bytes at %p, want ≥ %d, whole aligned huge pages", n, len(b), &b[0], n)
		}
		if takeWindow(n) != nil {
			t.Fatalf("takeWindow(%d) while taken: not nil", n)
		}
		for i := 0; i < len(b); i += 4096 {
			b[i] = byte(i >> 12)
		}
		if thpMadvise() {
			if kb := anonHugeKB(t, b); kb*1024 < len(b)/2 {
				t.Errorf("window of %d bytes: %d KiB in huge pages, want most of it", len(b), kb)
			}
		}
		releaseWindow()
	}
}

// thpMadvise reports whether madvised anonymous memory gets transparent huge
// pages ("always" or "madvise").
func thpMadvise() bool {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	return err == nil && !strings.Contains(string(b), "[never]")
}

// anonHugeKB returns AnonHugePages of the mapping holding b.
func anonHugeKB(t *testing.T, b []byte) int {
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr := uintptr(unsafe.Pointer(&b[0]))
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		var lo, hi uintptr
		if n, _ := fmt.Sscanf(line, "%x-%x", &lo, &hi); n == 2 && strings.Contains(line, " ") && !strings.HasSuffix(strings.Fields(line)[0], ":") {
			in = lo <= addr && addr < hi
			continue
		}
		var kb int
		if in && strings.HasPrefix(line, "AnonHugePages:") {
			fmt.Sscanf(strings.TrimPrefix(line, "AnonHugePages:"), "%d", &kb)
			return kb
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return 0
}
