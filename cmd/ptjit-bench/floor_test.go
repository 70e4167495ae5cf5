package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestFloorWX: testdata/floor's wx and wxpoll modes, the least W^X the runtime rows
// compare ptjit with, runs testdata/append-jit (an append-and-run JIT in
// RWX memory, as Guile's and qemu's) as it runs alone, and does exactly
// the W^X work of batch mode: per round a fetch fault on the page just
// written and a write fault on the page that ran (but the first store
// into each page, fresh memory that starts writable), a protection
// change each.
func TestFloorWX(t *testing.T) {
	bin := testenv.TestPrograms(t)
	const rounds = 100
	prog := filepath.Join(bin, "append-jit")
	alone, err := exec.Command(prog, fmt.Sprint(rounds)).Output()
	if err != nil {
		t.Fatal(err)
	}
	// two phases of rounds, a 16-byte function each
	pages := (2*rounds*16 + 4095) / 4096
	want := fmt.Sprintf("%d write faults, %d fetch faults, %d injected", 2*rounds-pages, 2*rounds, 4*rounds-pages)
	for _, mode := range []string{"wx", "wxpoll"} {
		cmd := exec.Command(filepath.Join(bin, "floor"), mode, "--", prog, fmt.Sprint(rounds))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("floor %s: %v\n%s", mode, err, stderr.String())
		}
		if !bytes.Equal(out, alone) {
			t.Fatalf("floor %s prints\n%s\nalone\n%s", mode, out, alone)
		}
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("floor %s says %q, want %q", mode, strings.TrimSpace(stderr.String()), want)
		}
	}
}
