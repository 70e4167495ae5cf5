package softpt

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/ptpkt"
	"github.com/ptjit/ptjit/x86"
)

// packets decodes a trace with ptjit's packet decoder and renders it as
// "type:ip" / "tnt:bits" tokens.
func packets(t *testing.T, b []byte) []string {
	t.Helper()
	d := ptpkt.NewPacketDecoder(b, nil)
	if err := d.SyncForward(); err != nil {
		t.Fatalf("no PSB in trace: %v", err)
	}
	var out []string
	var p ptpkt.Packet
	for {
		err := d.Next(&p)
		if err != nil {
			var de *ptpkt.DecodeError
			if errors.As(err, &de) && errors.Is(de.Err, ptpkt.ErrEOS) && de.Offset == uint64(len(b)) {
				return out
			}
			t.Fatalf("decode: %v", err)
		}
		switch p.Type {
		case ptpkt.PktTNT8, ptpkt.PktTNT64:
			s := ""
			for i := int(p.TNTBits) - 1; i >= 0; i-- {
				if p.TNTPayload>>i&1 == 1 {
					s += "T"
				} else {
					s += "N"
				}
			}
			out = append(out, "tnt:"+s)
		case ptpkt.PktTIP, ptpkt.PktTIPPGE, ptpkt.PktTIPPGD, ptpkt.PktFUP:
			if p.IPC == ptpkt.IPSuppressed {
				out = append(out, p.Type.String()+":-")
			} else {
				out = append(out, fmt.Sprintf("%s:%d:%#x", p.Type, p.IPC, p.IP))
			}
		case ptpkt.PktTSC, ptpkt.PktTMA, ptpkt.PktMTC:
			out = append(out, p.Type.String())
		default:
			out = append(out, p.Type.String())
		}
	}
}

func insn(ip uint64, n uint8, c x86.InsnClass) *x86.Insn {
	return &x86.Insn{IP: ip, Len: n, Class: c, Mode: x86.Mode64}
}

func TestPacketRules(t *testing.T) {
	const base = 0x7f0000001000
	cfg := Config{RetCompression: true, PSBPeriod: 1 << 20}
	th := NewThread(cfg)
	th.Enable(base, 100)
	th.Step(insn(base, 5, x86.ClassCall), base+0x100, 101)           // call f
	th.Step(insn(base+0x100, 2, x86.ClassCondJump), base+0x102, 102) // jcc not taken
	th.Step(insn(base+0x102, 2, x86.ClassCondJump), base+0x110, 103) // jcc taken
	th.Step(insn(base+0x110, 1, x86.ClassRet), base+5, 104)          // ret, compressed
	th.Step(insn(base+5, 2, x86.ClassIndJump), base+0x2345, 105)     // jmp *%rax
	th.Step(insn(base+0x2345, 2, x86.ClassSyscall), base+0x2347, 200)
	th.Step(insn(base+0x2347, 1, x86.ClassRet), 0x401000, 201) // ret with no call: TIP
	th.Interrupt(0x401000, 300)
	th.Enable(0x402000, 400)
	th.Disable(500)
	got := strings.Join(packets(t, th.Take()), " ")
	want := strings.Join([]string{
		"psb", "tsc", "psbend", // first PSB+: tracing not yet enabled, no FUP
		"tsc", "mode.exec", "tip.pge:3:0x7f0000001000",
		"tnt:NTT", "tip:1:0x3345", // ret compressed as T; TNT flushed before the TIP
		"tip.pgd:-", "tsc", "mode.exec", "tip.pge:1:0x3347", // syscall
		"tip:3:0x401000", // far from last IP: sign-extended 48
		"fup:1:0x1000", "tip.pgd:-",
		"tsc", "mode.exec", "tip.pge:1:0x2000",
		"tip.pgd:-",
	}, " ")
	if got != want {
		t.Errorf("packets\n got %s\nwant %s", got, want)
	}
}

// Leaving the traced range (--soft-filter): the table of the SDM's packet
// generation for a branch that clears FilterEn.
func TestLeave(t *testing.T) {
	const base = 0x7f0000001000
	for _, tc := range []struct {
		name string
		in   *x86.Insn
		next uint64
		want string
	}{
		{"taken jcc: pending TNT, TIP.PGD without IP", insn(base+2, 2, x86.ClassCondJump), 0x401000, "tnt:N tip.pgd:-"},
		{"not-taken jcc falling out: its N bit, TIP.PGD at the next IP", insn(base+2, 2, x86.ClassCondJump), base + 4, "tnt:NN tip.pgd:1:0x1004"},
		{"direct call: TIP.PGD at the target", insn(base+2, 5, x86.ClassCall), 0x401000, "tnt:N tip.pgd:3:0x401000"},
		{"indirect jump: TIP.PGD at the target", insn(base+2, 2, x86.ClassIndJump), 0x401000, "tnt:N tip.pgd:3:0x401000"},
		{"ret: uncompressed, TIP.PGD at the target", insn(base+2, 1, x86.ClassRet), 0x401000, "tnt:N tip.pgd:3:0x401000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := NewThread(Config{RetCompression: true, PSBPeriod: 1 << 20})
			th.Enable(base, 1)
			th.Step(insn(base, 2, x86.ClassCondJump), base+2, 2) // one pending N bit
			th.Leave(tc.in, tc.next, 3)
			if th.Enabled() {
				t.Fatal("still enabled after Leave")
			}
			got := packets(t, th.Take())
			if s := strings.Join(got[6:], " "); s != tc.want { // after psb tsc psbend tsc mode.exec tip.pge
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
}

// The return stack stays the top of every decoder's call stack (doc.go,
// "Return compression"): a ret that is not compressed empties it, since
// libipt keeps its entry there and perf pops it; a call to the next
// instruction pushes nothing, as no decoder pushes one.
func TestRetCompressionRules(t *testing.T) {
	const base = 0x7f0000001000
	call := func(ip, target uint64) *x86.Insn {
		in := insn(ip, 5, x86.ClassCall)
		in.Target = target
		return in
	}
	for _, tc := range []struct {
		name  string
		steps func(th *Thread)
		want  string // packets after the first PSB+ and TIP.PGE
	}{
		{"a call's ret: compressed", func(th *Thread) {
			th.Step(call(base, base+0x100), base+0x100, 2)
			th.Step(insn(base+0x100, 1, x86.ClassRet), base+5, 3)
		}, "tnt:T tip.pgd:-"},
		{"a ret into a pushed address, then the call's own ret: both TIPs", func(th *Thread) {
			// HotSpot: compiled code calls the interpreter (call at
			// base+0x100), which invokes compiled code through an
			// address it pushed (ret to 0x9000) and leaves with jmp
			// to the call's return address; that code's ret goes to
			// the outer call's return address (base+5).
			th.Step(call(base, base+0x100), base+0x100, 2)
			th.Step(call(base+0x100, base+0x200), base+0x200, 3)
			th.Step(insn(base+0x200, 1, x86.ClassRet), base+0x9000, 4)
			th.Step(insn(base+0x9000, 2, x86.ClassIndJump), base+0x105, 5)
			th.Step(insn(base+0x105, 1, x86.ClassRet), base+5, 6)
		}, "tip:1:0xa000 tip:1:0x1105 tip:1:0x1005 tip.pgd:-"},
		{"calls after an uncompressed ret compress again", func(th *Thread) {
			th.Step(call(base, base+0x100), base+0x100, 2)
			th.Step(insn(base+0x100, 1, x86.ClassRet), base+0x9000, 3)
			th.Step(call(base+0x9000, base+0x100), base+0x100, 4)
			th.Step(insn(base+0x100, 1, x86.ClassRet), base+0x9005, 5)
		}, "tip:1:0xa000 tnt:T tip.pgd:-"},
		{"a zero-length call pushes nothing", func(th *Thread) {
			// call next; ret: to the next instruction itself, which
			// then returns to the outer call's return address
			th.Step(call(base, base+0x100), base+0x100, 2)
			th.Step(call(base+0x100, base+0x105), base+0x105, 3)
			th.Step(insn(base+0x105, 1, x86.ClassRet), base+0x105, 4)
			th.Step(insn(base+0x105, 1, x86.ClassRet), base+5, 5)
		}, "tip:1:0x1105 tip:1:0x1005 tip.pgd:-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			th := NewThread(Config{RetCompression: true, PSBPeriod: 1 << 20})
			th.Enable(base, 1)
			tc.steps(th)
			th.Disable(9)
			got := packets(t, th.Take())
			if s := strings.Join(got[6:], " "); s != tc.want { // after psb tsc psbend tsc mode.exec tip.pge
				t.Errorf("got %s, want %s", s, tc.want)
			}
		})
	}
}

func TestNoRetCompression(t *testing.T) {
	th := NewThread(Config{PSBPeriod: 1 << 20})
	th.Enable(0x1000, 1)
	th.Step(insn(0x1000, 5, x86.ClassCall), 0x2000, 2)
	th.Step(insn(0x2000, 1, x86.ClassRet), 0x1005, 3)
	th.Disable(4)
	got := strings.Join(packets(t, th.Take()), " ")
	if !strings.Contains(got, "tip:1:0x1005") || strings.Contains(got, "tnt") {
		t.Errorf("without return compression a ret must be a TIP: %s", got)
	}
}

// A PSB+ in mid-stream carries MODE.Exec and a FUP at the next IP, flushes
// the TNT bits before it, and forgets the return stack.
func TestPSBPlus(t *testing.T) {
	th := NewThread(Config{RetCompression: true, PSBPeriod: 16})
	th.Enable(0x1000, 1)
	th.Step(insn(0x1000, 5, x86.ClassCall), 0x2000, 2)
	ip := uint64(0x2000)
	for i := 0; i < 40; i++ { // enough TIPs to pass the PSB period
		th.Step(insn(ip, 2, x86.ClassIndJump), ip+0x10, 3)
		ip += 0x10
	}
	th.Step(insn(ip, 2, x86.ClassCondJump), ip+2, 4)
	th.Step(insn(ip+2, 1, x86.ClassRet), 0x1005, 5)
	th.Disable(6)
	pk := packets(t, th.Take())
	got := strings.Join(pk, " ")
	if strings.Count(got, "psb ") < 2 {
		t.Fatalf("no PSB+ in mid-stream: %s", got)
	}
	for i, p := range pk {
		if p == "psb" && i > 0 {
			if pk[i+1] != "tsc" || pk[i+2] != "mode.exec" || !strings.HasPrefix(pk[i+3], "fup:") || pk[i+4] != "psbend" {
				t.Fatalf("mid-stream PSB+ is %v", pk[i:i+5])
			}
		}
	}
	// The call was before a PSB: its ret must be a TIP, not a T bit.
	if !strings.HasSuffix(got, "tnt:N tip:1:0x1005 tip.pgd:-") {
		t.Errorf("ret after PSB not a full TIP: ...%s", got[len(got)-60:])
	}
}

// MTC packets appear as the crystal clock advances, TMA in PSB+.
func TestTiming(t *testing.T) {
	th := NewThread(Config{MTC: true, MTCFreq: 0, CTCRatio: 10, PSBPeriod: 1 << 20})
	th.Enable(0x1000, 1000)
	for i := uint64(0); i < 5; i++ {
		th.Step(insn(0x1000+i, 1, x86.ClassOther), 0x1001+i, 1000+25*(i+1))
	}
	th.Disable(2000)
	got := strings.Join(packets(t, th.Take()), " ")
	if !strings.HasPrefix(got, "psb tsc tma psbend") || strings.Count(got, "mtc") < 5 {
		t.Errorf("timing packets: %s", got)
	}
}

// The time a decoder tracks from a trace advances at every MTC, also after
// a re-enable in mid-segment (no PSB between): every TSC is followed by a
// TMA, as the SDM requires, and libipt's time tracking (which ptpkt.Time
// follows) ignores MTCs after a TSC until its TMA. The truth is the TSC
// the test passed at each step: at an MTC the decoder's estimate is the
// crystal-clock tick the MTC reports, which lies between the TSC of the
// step before and that of the step that wrote it.
func TestTimingAfterEnable(t *testing.T) {
	const ratio, freq = 10, 2
	cfg := Config{MTC: true, MTCFreq: freq, CTCRatio: ratio, PSBPeriod: 1 << 20}
	th := NewThread(cfg)
	var steps []uint64 // TSC of every step, in order
	ip, tsc := uint64(0x1000), uint64(1003)
	th.Enable(ip, tsc)
	run := func(n int) {
		for i := 0; i < n; i++ {
			tsc += 7
			th.Step(insn(ip, 1, x86.ClassOther), ip+1, tsc)
			steps = append(steps, tsc)
			ip++
		}
	}
	run(50)
	tsc += 5
	th.Interrupt(ip, tsc) // a stop ptjit acts on, then the thread resumes
	tsc += 1001
	th.Enable(ip, tsc)
	enableTSC := tsc
	run(200)
	end := tsc + 1
	th.Disable(end)

	pcfg := ptpkt.Config{CPUID15EAX: 1, CPUID15EBX: ratio, MTCFreq: freq}
	b := th.Take()
	d := ptpkt.NewPacketDecoder(b, &pcfg)
	if err := d.SyncForward(); err != nil {
		t.Fatal(err)
	}
	var tm ptpkt.Time
	var p ptpkt.Packet
	var mtcTimes []uint64
	for d.Next(&p) == nil {
		switch p.Type {
		case ptpkt.PktTSC:
			_ = tm.UpdateTSC(&p, &pcfg)
		case ptpkt.PktTMA:
			if err := tm.UpdateTMA(&p, &pcfg); err != nil {
				t.Fatalf("TMA: %v", err)
			}
		case ptpkt.PktMTC:
			if err := tm.UpdateMTC(&p, &pcfg); err != nil {
				t.Fatalf("MTC: %v", err)
			}
			now, lost, _, err := tm.TSC()
			if err != nil || lost != 0 {
				t.Fatalf("time after MTC: %v, %d lost", err, lost)
			}
			mtcTimes = append(mtcTimes, now)
		}
	}
	var after int // MTC times after the re-enable
	for i, m := range mtcTimes {
		if m%(ratio<<freq) != 0 {
			t.Errorf("MTC #%d: time %d is not on a crystal-clock MTC tick", i, m)
		}
		if i > 0 && m <= mtcTimes[i-1] {
			t.Errorf("MTC #%d: time %d does not advance past %d", i, m, mtcTimes[i-1])
		}
		if m < steps[0]-7 || m > end {
			t.Errorf("MTC #%d: time %d outside the steps' TSCs %d..%d", i, m, steps[0], end)
		}
		if m > enableTSC {
			after++
		}
	}
	// 200 steps of 7 ticks cross 1400/40 = 35 MTC periods.
	if after < 30 {
		t.Errorf("%d MTC times after the re-enable at TSC %d, want >= 30 (all: %v)", after, enableTSC, mtcTimes)
	}
}
