package tracker_test

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
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

// TestWXFresh runs freshjit (testdata/freshjit.c: functions written into a
// fresh RWX mapping, run, one patched, the mapping moved and grown with
// mremap, then written and run in a forked child). Under auto and batch
// the mapping starts writable, not executable: the fill costs no stop, and
// each page is recorded once, at its first execution (cause wx-fresh),
// holding every function the program wrote there; the patch into code
// that ran is a store of its own. The mremap of a range whose pages W^X
// protects differently (RX, RW) succeeds as alone (the pages are settled
// first: the two never run are recorded as zeros). Under precise the
// mapping starts RX and every store of the fill is recorded. The program
// behaves as alone throughout. Without the fresh path (a mapping started
// RX in auto mode) the fill would be recorded as stores and no wx-fresh
// version would exist.
func TestWXFresh(t *testing.T) {
	prog := cprog(t, "freshjit")
	alone, st := run(t, prog)
	if st != 0 || !strings.HasSuffix(alone, "\nok\n") {
		t.Fatalf("freshjit alone: status %d\n%s", st, alone)
	}
	// the output without its addresses ("buf ADDR", "moved ADDR")
	checks := func(out string) string {
		var keep []string
		for _, l := range strings.Split(out, "\n") {
			if !strings.HasPrefix(l, "buf ") && !strings.HasPrefix(l, "moved ") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	// What the program wrote into page p before running it (its own
	// layout, see freshjit.c).
	page := func(p int) []byte {
		b := make([]byte, 4096)
		if p == 1 || p == 3 {
			return b // never written before the move
		}
		for k := 0; k < 64; k++ {
			imm := uint32(p*1000 + k)
			copy(b[k*64:], []byte{0xb8, byte(imm), byte(imm >> 8), byte(imm >> 16), byte(imm >> 24), 0xc3})
		}
		return b
	}
	for _, mode := range []tracker.WXMode{tracker.WXAuto, tracker.WXBatch, tracker.WXPrecise} {
		t.Run(string(mode), func(t *testing.T) {
			tr := traceWX(t, mode, prog)
			if tr.res.Status != 0 || checks(tr.stdout) != checks(alone) {
				t.Fatalf("under --wx=%s: status %d\n%s", mode, tr.res.Status, tr.stdout)
			}
			var buf uint64
			if _, err := fmt.Sscanf(tr.stdout, "buf %v", &buf); err != nil || buf == 0 {
				t.Fatalf("no buffer address in %q", tr.stdout)
			}
			s := tr.res.Stats
			writes, err := tr.db.Writes(0)
			if err != nil {
				t.Fatal(err)
			}
			var fill int // stores recorded into the mapping before the move
			for _, w := range writes {
				if w.Addr >= buf && w.Addr < buf+4*4096 {
					fill++
				}
			}
			vs, err := tr.db.Versions(db.VersionFilter{})
			if err != nil {
				t.Fatal(err)
			}
			fresh := map[uint64]db.VersionInfo{}
			for _, v := range vs {
				if v.Cause == "wx-fresh" && v.Addr >= buf && v.Addr < buf+4*4096 {
					fresh[v.Addr] = v
				}
			}
			if mode == tracker.WXPrecise {
				if s.FreshMapped != 0 || len(fresh) != 0 {
					t.Errorf("precise: %d fresh pages, %d wx-fresh versions; want none", s.FreshMapped, len(fresh))
				}
				// 2 × 64 functions of 6 byte stores, and the patch
				if fill != 2*64*6+1 {
					t.Errorf("precise: %d stores recorded in the first mapping, want %d", fill, 2*64*6+1)
				}
				return
			}
			if s.FreshMapped != 4 || s.FreshExecuted != 2 || len(fresh) != 4 {
				t.Fatalf("%d fresh pages, %d recorded at first execution, %d wx-fresh versions; want 4, 2, 4 (2 run, 2 settled before the mremap)",
					s.FreshMapped, s.FreshExecuted, len(fresh))
			}
			for p := 0; p < 4; p++ {
				v, ok := fresh[buf+uint64(p)*4096]
				if !ok {
					t.Fatalf("no wx-fresh version of page %d (%#x)", p, buf+uint64(p)*4096)
				}
				data, err := tr.db.VersionData(&v)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(data, page(p)) {
					t.Errorf("wx-fresh version of page %d: % x..., want what the program wrote: % x...", p, data[:16], page(p)[:16])
				}
			}
			// The fill made no store stop; under auto the patch, into
			// code that ran, is a precise store.
			want := map[tracker.WXMode]int{tracker.WXAuto: 1, tracker.WXBatch: 0}[mode]
			if fill != want {
				t.Errorf("%d stores recorded in the first mapping, want %d (the fill makes none)", fill, want)
			}
		})
	}
}

// TestWXThreadControlBlock: threads whose stacks, and so whose control
// blocks, are writable and executable memory (testdata/tcbstack.c), run
// code in the page of their control block; one more makes its own
// ordinary stack executable and does the same. The kernel writes those
// pages (the tid at clone and exit, the rseq area at every return to the
// thread, syscall output, signal frames, and a clock_gettime the code
// there makes): under every W^X mode the program must behave as alone
// (before: under precise, pthread_join returned at once or failed with
// EFAULT, the threads died of SIGSEGV, pipe and read into the stack
// failed with EFAULT; with the page left executable-only after its first
// run, the clock_gettime failed with EFAULT), and the code each worker
// ran there first is recorded (cause wx-tcb) with the bytes it wrote.
func TestWXThreadControlBlock(t *testing.T) {
	prog := cprog(t, "tcbstack")
	alone, st := run(t, prog)
	// the output without its addresses ("tcb page ADDR")
	checks := func(out string) (string, []uint64) {
		var keep []string
		var addrs []uint64
		for _, l := range strings.Split(out, "\n") {
			var a uint64
			if _, err := fmt.Sscanf(l, "tcb page %v", &a); err == nil {
				addrs = append(addrs, a)
				continue
			}
			keep = append(keep, l)
		}
		return strings.Join(keep, "\n"), addrs
	}
	want, _ := checks(alone)
	if st != 0 || !strings.HasSuffix(want, "\nok\n") || strings.Contains(want, "wrong") {
		t.Fatalf("tcbstack alone: status %d\n%s", st, alone)
	}
	for _, mode := range []tracker.WXMode{tracker.WXPrecise, tracker.WXBatch, tracker.WXAuto} {
		t.Run(string(mode), func(t *testing.T) {
			tr := traceWX(t, mode, prog)
			got, addrs := checks(tr.stdout)
			if tr.res.Status != 0 || got != want {
				t.Fatalf("under --wx=%s: status %d\n%s\nalone:\n%s", mode, tr.res.Status, tr.stdout, alone)
			}
			// 3 workers and selfexec ran code in kernel-written pages
			if s := tr.res.Stats; s.TCBPages < 4 || s.TCBExecuted != 4 || len(addrs) != 3 {
				t.Fatalf("%d stack and control-block pages, %d run, %d workers ran code there; want ≥ 4, 4, 3", s.TCBPages, s.TCBExecuted, len(addrs))
			}
			vs, err := tr.db.Versions(db.VersionFilter{})
			if err != nil {
				t.Fatal(err)
			}
			for i, a := range addrs {
				page := a &^ 4095
				var found bool
				for _, v := range vs {
					if v.Cause != "wx-tcb" || v.Addr != page {
						continue
					}
					data, err := tr.db.VersionData(&v)
					if err != nil {
						t.Fatal(err)
					}
					// tcbstack.c's function with its first immediate
					imm := uint32(i+1) * 1000
					code := []byte{0xb8, 0xe4, 0, 0, 0, 0xbf, 1, 0, 0, 0, 0x48, 0x8d, 0x35, 0x10, 0, 0, 0, 0x0f, 0x05,
						0x48, 0x85, 0xc0, 0x75, 0x05, 0xb8, byte(imm), byte(imm >> 8), byte(imm >> 16), byte(imm >> 24), 0xc3}
					if got := data[a-page : a-page+uint64(len(code))]; !bytes.Equal(got, code) {
						t.Errorf("thread %d: wx-tcb version of %#x holds % x at %#x, want % x", i+1, page, got, a, code)
					}
					found = true
				}
				if !found {
					t.Errorf("thread %d: no wx-tcb version of page %#x", i+1, page)
				}
			}
		})
	}
}

// TestWXExecstackDlopen: a threaded program loads a library that needs an
// executable stack (testdata/dlexecstack.c): glibc makes every thread's
// stack and main's (PROT_GROWSDOWN) writable and executable, and a
// trampoline runs on main's stack, while the threads have the kernel
// write into theirs (pipe, read, signal frames). Under every W^X mode the
// program must behave as alone (before: SIGSEGV under precise and batch).
func TestWXExecstackDlopen(t *testing.T) {
	// a GCC nested function whose address is taken: a trampoline on the stack
	code := "int libfn(int x) { int add(int v) { return v + x; } int (*volatile f)(int) = add; return f(1); }\n"
	lib := testenv.CompileC(t, "libexecstack.c", code, "-shared", "-fPIC", "-z", "execstack")
	prog := cprog(t, "dlexecstack")
	alone, st := run(t, prog, lib)
	if st != 0 || alone != "libfn(41) = 42\nthreads ok\nok\n" {
		t.Fatalf("dlexecstack alone: status %d\n%s", st, alone)
	}
	for _, mode := range []tracker.WXMode{tracker.WXPrecise, tracker.WXBatch, tracker.WXAuto} {
		t.Run(string(mode), func(t *testing.T) {
			tr := traceWX(t, mode, prog, lib)
			if tr.res.Status != 0 || tr.stdout != alone {
				t.Fatalf("under --wx=%s: status %d\n%s", mode, tr.res.Status, tr.stdout)
			}
			if tr.res.Stats.TCBPages == 0 {
				t.Errorf("no stack page kept writable for the kernel")
			}
		})
	}
}
