package tracker_test

import (
	"strings"
	"testing"

	"github.com/ptjit/ptjit/tracker"
)

// TestWX runs wxprobe (testdata/wxprobe.c: every kind of store into RWX
// code, each followed by running it, and a fault of the program's own)
// under every W^X mode: the program must behave exactly as alone, and the
// stores must be recorded as the mode promises.
func TestWX(t *testing.T) {
	prog := cprog(t, "wxprobe")
	alone, st := run(t, prog)
	if st != 0 || !strings.HasSuffix(alone, "ok\n") {
		t.Fatalf("wxprobe alone: status %d\n%s", st, alone)
	}
	for _, mode := range []tracker.WXMode{tracker.WXPrecise, tracker.WXBatch, tracker.WXAuto} {
		t.Run(string(mode), func(t *testing.T) {
			tr := traceWX(t, mode, prog)
			if tr.res.Status != 0 || tr.stdout != alone {
				t.Fatalf("under --wx=%s: status %d\n%s", mode, tr.res.Status, tr.stdout)
			}
			s := tr.res.Stats
			writes, err := tr.db.Writes(0)
			if err != nil {
				t.Fatal(err)
			}
			switch mode {
			case tracker.WXPrecise:
				// 1 mov, 6 byte stores, 1 stos + 1 movs, 1 movdqu, 1
				// xchg, 1 store across pages, 40 repeated, 1 in the
				// forked child: 53 stores
				if s.Writes != 53 || len(writes) != 53 || s.Stepped != 1 || s.BatchWrites != 0 {
					t.Errorf("precise: %d writes (%d in the db), %d stepped, %d batch pages; want 53, 1 stepped, 0 batch",
						s.Writes, len(writes), s.Stepped, s.BatchWrites)
				}
				for _, w := range writes {
					if len(w.Old) != len(w.New) || len(w.New) == 0 || w.Insn == "" {
						t.Errorf("write at %#x: old %x new %x insn %q", w.Addr, w.Old, w.New, w.Insn)
					}
				}
			case tracker.WXBatch:
				if s.Writes != 0 || s.BatchWrites == 0 {
					t.Errorf("batch: %d precise writes, %d batch pages", s.Writes, s.BatchWrites)
				}
			case tracker.WXAuto:
				if s.Writes == 0 || s.BatchWrites == 0 {
					t.Errorf("auto: %d precise writes, %d batch pages; want both", s.Writes, s.BatchWrites)
				}
			}
		})
	}
}
