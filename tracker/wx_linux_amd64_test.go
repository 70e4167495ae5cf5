package tracker_test

import (
	"strconv"
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
				// the xchg, which precise mode steps, makes its page
				// batch at once
				if s.Stepped != 0 {
					t.Errorf("auto: %d stores stepped; want 0 (a store the emulator cannot do goes batch)", s.Stepped)
				}
			}
		})
	}
}

// TestWXAlias runs dualmap (testdata/dualmap.c: code written through a
// writable memfd alias, run through its executable twin): the program
// behaves as alone, and under precise W^X every store through the alias
// is a write at the executable address, with a new version holding it.
func TestWXAlias(t *testing.T) {
	prog := cprog(t, "dualmap")
	alone, st := run(t, prog)
	if st != 0 {
		t.Fatalf("dualmap alone: status %d\n%s", st, alone)
	}
	tr := traceWX(t, tracker.WXPrecise, prog)
	if tr.res.Status != 0 || !strings.HasSuffix(tr.stdout, "\nok\n") {
		t.Fatalf("under --wx=precise: status %d\n%s", tr.res.Status, tr.stdout)
	}
	var rx []uint64
	for _, l := range strings.Split(tr.stdout, "\n") {
		if a, ok := strings.CutPrefix(l, "RX "); ok {
			v, _ := strconv.ParseUint(a, 0, 64)
			rx = append(rx, v)
		}
	}
	writes, err := tr.db.Writes(0)
	if err != nil {
		t.Fatal(err)
	}
	// 5 stores, 1 after mprotect RW, 1 memcpy, 1 through the second alias
	if len(writes) != 8 {
		t.Fatalf("%d writes recorded, want 8", len(writes))
	}
	for i, w := range writes {
		in := w.Addr >= rx[0] && w.Addr < rx[0]+8192 || len(rx) > 1 && w.Addr >= rx[1] && w.Addr < rx[1]+4096
		if !in {
			t.Errorf("write %d at %#x: not in an executable twin %#x", i, w.Addr, rx)
		}
		if len(w.New) != 8 || w.New[0] != 0xb8 || w.Version == 0 {
			t.Errorf("write %d: new %x version %d", i, w.New, w.Version)
			continue
		}
		v, err := tr.db.Version(w.Version)
		if err != nil {
			t.Fatal(err)
		}
		data, err := tr.db.VersionData(v)
		if err != nil {
			t.Fatal(err)
		}
		if off := w.Addr - v.Addr; string(data[off:off+8]) != string(w.New) || v.Cause != "write" {
			t.Errorf("write %d: version %d (%s) holds %x at %#x, want %x", i, v.ID, v.Cause, data[off:off+8], w.Addr, w.New)
		}
	}
}
