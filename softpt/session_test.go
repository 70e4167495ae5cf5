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
	dir := t.TempDir()
	src := filepath.Join(dir, "flow.s")
	bin := filepath.Join(dir, "flow")
	if err := os.WriteFile(src, []byte(loopAsm), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-no-pie", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
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
	f, err := os.Open(p.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	code := make([]byte, p.text.Filesz)
	if _, err := f.ReadAt(code, int64(p.text.Off)); err != nil {
		t.Fatal(err)
	}
	at := func(ip uint64) []byte { return code[ip-p.text.Vaddr:] }
	const caller = 0x401ffff0 // a return address outside the traced code
	var stack []uint64
	ip, ecx, rax := p.sym["flow"], uint64(0), uint64(0)
	var ips []uint64
	tsc := uint64(1000)
	s.Enable(tid, ip, tsc)
	for steps := 0; steps < 1000; steps++ {
		var in x86.Insn
		if err := x86.DecodeInsn(at(ip), ip, x86.Mode64, &in); err != nil {
			t.Fatalf("decode at %#x: %v", ip, err)
		}
		ips = append(ips, ip)
		next := ip + uint64(in.Len)
		b := in.Bytes()
		switch {
		case b[0] == 0xb9: // mov $imm, %ecx
			ecx = uint64(b[1]) | uint64(b[2])<<8
		case b[0] == 0xff && b[1] == 0xc9: // dec %ecx
			ecx--
		case in.Class == x86.ClassCondJump: // jnz
			if ecx != 0 {
				next = in.Target
			}
		case in.Class == x86.ClassCall:
			stack = append(stack, next)
			next = in.Target
		case b[0] == 0x48 && b[1] == 0x8d: // lea leaf(%rip), %rax
			rax = p.sym["leaf"]
		case in.Class == x86.ClassIndCall:
			stack = append(stack, next)
			next = rax
		case in.Class == x86.ClassRet:
			if len(stack) == 0 {
				next = caller
			} else {
				next = stack[len(stack)-1]
				stack = stack[:len(stack)-1]
			}
		}
		tsc += 10
		s.Step(tid, &in, next, tsc)
		if next == caller {
			s.Disable(tid, tsc+1)
			return ips
		}
		ip = next
	}
	t.Fatal("flow did not return")
	return nil
}

func TestSessionPerfScript(t *testing.T) {
	perfBin, err := exec.LookPath("perf")
	if err != nil {
		t.Skip("perf not installed (CI installs linux-perf)")
	}
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
