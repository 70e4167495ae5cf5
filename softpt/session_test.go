package softpt

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/x86"
)

// loopAsm is the code the session test traces: a counted loop (TNT bits), a
// call and a compressed return, an indirect call through a register (TIP),
// and a syscall-free leaf. Its flow is known exactly.
const loopAsm = `
	.text
	.globl	flow
	.type	flow, @function
flow:
	mov	$100, %ecx
1:	dec	%ecx
	jnz	1b
	call	leaf
	lea	leaf(%rip), %rax
	call	*%rax
	ret
	.size	flow, .-flow
	.type	leaf, @function
leaf:
	nop
	ret
	.size	leaf, .-leaf
	.globl	main
main:
	call	flow
	xor	%eax, %eax
	ret
`

type flowProg struct {
	path string
	text *elf.Prog
	sym  map[string]uint64
}

func buildFlowProg(t *testing.T) *flowProg {
	t.Helper()
	bin := testenv.CompileC(t, "flow.s", loopAsm, "-no-pie")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := &flowProg{path: bin, sym: map[string]uint64{}}
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range syms {
		p.sym[s.Name] = s.Value
	}
	for _, pr := range f.Progs {
		if pr.Type == elf.PT_LOAD && pr.Flags&elf.PF_X != 0 {
			p.text = pr
		}
	}
	return p
}

// simulate walks flow() from its entry with the real bytes of the binary
// and feeds the session: the ground truth is this walk.
func simulate(t *testing.T, p *flowProg, s *Session, tid int) []uint64 {
	t.Helper()
	tsc := uint64(1000)
	w := newFlowWalk(t, p, s, tid, &tsc)
	for steps := 0; steps < 1000; steps++ {
		if !w.step() {
			return w.ips
		}
	}
	t.Fatal("flow did not return")
	return nil
}

// flowWalk walks flow() on one thread, an instruction per step, with
// the time shared by all walks.
type flowWalk struct {
	t            *testing.T
	s            *Session
	tid          int
	at           func(uint64) []byte
	ip, ecx, rax uint64
	stack        []uint64
	ips          []uint64
	tsc          *uint64
	leaf         uint64
}

const flowCaller = 0x401ffff0 // a return address outside the traced code

func newFlowWalk(t *testing.T, p *flowProg, s *Session, tid int, tsc *uint64) *flowWalk {
	t.Helper()
	f, err := os.Open(p.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := make([]byte, p.text.Filesz)
	if _, err := f.ReadAt(code, int64(p.text.Off)); err != nil {
		t.Fatal(err)
	}
	w := &flowWalk{t: t, s: s, tid: tid, at: func(ip uint64) []byte { return code[ip-p.text.Vaddr:] },
		ip: p.sym["flow"], tsc: tsc, leaf: p.sym["leaf"]}
	s.Enable(tid, w.ip, *tsc)
	return w
}

// step executes one instruction; false when flow() has returned.
func (w *flowWalk) step() bool {
	t, ip := w.t, w.ip
	var in x86.Insn
	if err := x86.DecodeInsn(w.at(ip), ip, x86.Mode64, &in); err != nil {
		t.Fatalf("decode at %#x: %v", ip, err)
	}
	w.ips = append(w.ips, ip)
	next := ip + uint64(in.Len)
	b := in.Bytes()
	switch {
	case b[0] == 0xb9: // mov $imm, %ecx
		w.ecx = uint64(b[1]) | uint64(b[2])<<8
	case b[0] == 0xff && b[1] == 0xc9: // dec %ecx
		w.ecx--
	case in.Class == x86.ClassCondJump: // jnz
		if w.ecx != 0 {
			next = in.Target
		}
	case in.Class == x86.ClassCall:
		w.stack = append(w.stack, next)
		next = in.Target
	case b[0] == 0x48 && b[1] == 0x8d: // lea leaf(%rip), %rax
		w.rax = w.leaf
	case in.Class == x86.ClassIndCall:
		w.stack = append(w.stack, next)
		next = w.rax
	case in.Class == x86.ClassRet:
		if len(w.stack) == 0 {
			next = flowCaller
		} else {
			next = w.stack[len(w.stack)-1]
			w.stack = w.stack[:len(w.stack)-1]
		}
	}
	*w.tsc += 10
	if next == flowCaller {
		// The return leaves the traced code (TIP.PGD with the caller's
		// IP): no decoder tries to read code at the made-up caller.
		w.s.Leave(w.tid, &in, next, *w.tsc)
		return false
	}
	w.s.Step(w.tid, &in, next, *w.tsc)
	w.ip = next
	return true
}

func TestSessionPerfScript(t *testing.T) {
	perfBin := testenv.Tool(t, "perf", "linux-perf")
	p := buildFlowProg(t)
	dir := t.TempDir()
	pd := filepath.Join(dir, "perf.data")
	gt := filepath.Join(dir, "truth.txt")
	s, err := NewSession(DefaultConfig, Options{PerfData: pd, GroundTruth: gt, Cmdline: []string{p.path}})
	if err != nil {
		t.Fatal(err)
	}
	const pid, tid = 4242, 4242
	var st syscall.Stat_t
	if err := syscall.Stat(p.path, &st); err != nil {
		t.Fatal(err)
	}
	s.Comm(pid, tid, "flow", true, 900)
	s.Mmap(&perf.PerfMmap{
		Pid: pid, Tid: tid,
		Addr: p.text.Vaddr &^ 0xfff, Len: (p.text.Vaddr&0xfff + p.text.Memsz + 0xfff) &^ 0xfff, Pgoff: p.text.Off &^ 0xfff,
		Maj: uint32(st.Dev >> 8 & 0xfff), Min: uint32(st.Dev&0xff | st.Dev>>12&0xfff00), Ino: st.Ino,
		Prot: 5, Flags: 2, Filename: p.path,
	}, 950)
	s.StartThread(pid, tid, 960)
	ips := simulate(t, p, s, tid)
	if err := s.Close(5000); err != nil {
		t.Fatal(err)
	}
	if len(ips) != 1+2*100+1+2+1+1+2+1 { // mov, loop, call, leaf, lea, call, leaf, ret
		t.Fatalf("simulation ran %d instructions", len(ips))
	}

	// The ground truth file is the walk.
	truth, _ := os.ReadFile(gt)
	var want []string
	for _, ip := range ips {
		want = append(want, fmt.Sprintf("%d 0x%x", tid, ip))
	}
	if strings.TrimSpace(string(truth)) != strings.Join(want, "\n") {
		t.Fatalf("ground truth file differs from the walk")
	}

	// perf decodes the software trace to exactly the same instructions.
	out, err := exec.Command(perfBin, "script", "-i", pd, "--itrace=i0ns", "-F", "ip", "--no-inline").CombinedOutput()
	if err != nil {
		t.Fatalf("perf script: %v\n%s", err, out)
	}
	var got []uint64
	for _, l := range strings.Split(string(out), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		v, err := strconv.ParseUint(l, 16, 64)
		if err != nil {
			t.Fatalf("perf script line %q (perf reported an error?)\n%s", l, out)
		}
		got = append(got, v)
	}
	if len(got) != len(ips) {
		t.Fatalf("perf decoded %d instructions, ground truth %d\n%s", len(got), len(ips), out)
	}
	for i := range ips {
		if got[i] != ips[i] {
			t.Fatalf("instruction %d: perf %#x, truth %#x", i, got[i], ips[i])
		}
	}
}

// TestSessionPerCPUPerfScript runs flow() on three threads of two
// processes, stepped in turn, on 2 virtual CPUs with threads moving on every
// 50 instructions: a CPU's queue interleaves threads of both processes,
// every thread migrates, and switches fall inside PSB segments. perf script
// splits the queues by the switch records into flows equal to the walks.
func TestSessionPerCPUPerfScript(t *testing.T) {
	perfBin := testenv.Tool(t, "perf", "linux-perf")
	p := buildFlowProg(t)
	pd := filepath.Join(t.TempDir(), "perf.data")
	s, err := NewSession(DefaultConfig, Options{PerfData: pd, Cmdline: []string{p.path}, Layout: LayoutPerCPU, CPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	s.quantum = 50

	var st syscall.Stat_t
	if err := syscall.Stat(p.path, &st); err != nil {
		t.Fatal(err)
	}
	mmap := func(pid int, tsc uint64) {
		s.Mmap(&perf.PerfMmap{
			Pid: uint32(pid), Tid: uint32(pid),
			Addr: p.text.Vaddr &^ 0xfff, Len: (p.text.Vaddr&0xfff + p.text.Memsz + 0xfff) &^ 0xfff, Pgoff: p.text.Off &^ 0xfff,
			Maj: uint32(st.Dev >> 8 & 0xfff), Min: uint32(st.Dev&0xff | st.Dev>>12&0xfff00), Ino: st.Ino,
			Prot: 5, Flags: 2, Filename: p.path,
		}, tsc)
	}
	s.Comm(100, 100, "flow", true, 900)
	mmap(100, 910)
	s.Fork(200, 100, 100, 920)
	s.Comm(200, 200, "flow", false, 921)
	mmap(200, 922)
	tsc := uint64(1000)
	threads := []struct{ pid, tid, speed int }{{100, 100, 1}, {100, 101, 2}, {200, 200, 1}}
	var walks []*flowWalk
	for _, th := range threads {
		s.StartThread(th.pid, th.tid, tsc)
		walks = append(walks, newFlowWalk(t, p, s, th.tid, &tsc))
	}
	for live := len(walks); live > 0; {
		live = 0
		for i, w := range walks {
			for range threads[i].speed {
				if w != nil && !w.step() {
					walks[i], w = nil, nil
					tsc += 10 // the exit comes later than the last instruction
					s.ExitThread(threads[i].tid, threads[i].pid, threads[i].pid, tsc)
				}
			}
			if w != nil {
				live++
			}
		}
	}
	if err := s.Close(tsc + 100); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(perfBin, "script", "-i", pd, "--itrace=i0nse", "-F", "tid,ip").Output()
	if err != nil {
		t.Fatalf("perf script: %v\n%s", err, out)
	}
	got := map[int][]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			t.Fatalf("perf script line %q (a decode error?)", l)
		}
		tid, err1 := strconv.Atoi(f[0])
		ip, err2 := strconv.ParseUint(f[1], 16, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("perf script line %q", l)
		}
		got[tid] = append(got[tid], ip)
	}
	want := simulateAlone(t, p)
	for _, th := range threads {
		if fmt.Sprint(got[th.tid]) != fmt.Sprint(want) {
			i := 0
			for i < len(want) && i < len(got[th.tid]) && want[i] == got[th.tid][i] {
				i++
			}
			t.Errorf("tid %d: perf decoded %d instructions, the walk ran %d; first difference at #%d", th.tid, len(got[th.tid]), len(want), i)
		}
	}
	if t.Failed() {
		t.Logf("perf script:\n%.3000s", out)
	}
}

// simulateAlone returns flow()'s instruction addresses.
func simulateAlone(t *testing.T, p *flowProg) []uint64 {
	s, err := NewSession(DefaultConfig, Options{PerfData: filepath.Join(t.TempDir(), "perf.data")})
	if err != nil {
		t.Fatal(err)
	}
	s.StartThread(1, 1, 1)
	ips := simulate(t, p, s, 1)
	s.Close(1 << 20)
	return ips
}
