package perf

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing" // Tests that check the perf.data writer against the installed perf: perf's

	// own Intel PT decoder (pure software, it runs without PT hardware) must
	// decode the hand-assembled trace written by PerfDataWriter into exactly
	// the instructions objdump lists along the path the trace describes.

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/ptpkt"
)

// skipIfNoPerf returns perf's path; without perf the test is Missing it
// (a skip, a failure under CI, which installs linux-perf).
func skipIfNoPerf(t testing.TB) string {
	t.Helper()
	return testenv.Tool(t, "perf", "linux-perf")
}

// testProgramAsm is a tiny static program: a counted loop, a call and a
// return, then exit. Its instruction listing (objdump) is, by index:
// 0 mov, 1 dec, 2 jnz, 3 call, 4 mov, 5 xor, 6 syscall, 7 nop, 8 ret.
const testProgramAsm = `
	.globl _start
	.text
_start:
	mov $3, %ecx
1:	dec %ecx
	jnz 1b
	call f
	mov $60, %eax
	xor %edi, %edi
	syscall
	.globl f
	.type f, @function
f:	nop
	ret
`

// testProgramPath is the listing indices the trace below walks: the loop
// taken twice and left, the call, the body of f, the return, the exit.
var testProgramPath = []int{0, 1, 2, 1, 2, 1, 2, 3, 7, 8, 4, 5, 6}

// buildTestProgram assembles testProgramAsm into a static ELF in a temp dir.
func buildTestProgram(t testing.TB) string {
	t.Helper()
	return testenv.CompileC(t, "prog.S", testProgramAsm, "-nostdlib", "-static", "-no-pie", "-Wl,--build-id=none")
}

// objdumpAddrs lists the instruction addresses of bin's .text with objdump,
// independently of ptjit's decoder.
func objdumpAddrs(t testing.TB, bin string) []uint64 {
	t.Helper()
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", "-j", ".text", bin).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	re := regexp.MustCompile(`^\s+([0-9a-f]+):\s`)
	var addrs []uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// execSegment returns the executable PT_LOAD of bin: vaddr, size, offset.
func execSegment(t testing.TB, bin string) (addr, size, off uint64) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 {
			return p.Vaddr, p.Memsz, p.Off
		}
	}
	t.Fatalf("%s: no executable segment", bin)
	return
}

// Hand-assembled PT packets (Intel SDM vol. 3 ch. 33).
var (
	ptPSB    = []byte{0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82}
	ptPSBEND = []byte{0x02, 0x23}
)

func ptTSC(tsc uint64) []byte {
	b := []byte{0x19}
	for i := 0; i < 7; i++ {
		b = append(b, byte(tsc>>(8*i)))
	}
	return b
}

// ptModeExec64 is MODE.Exec with CS.L=1 (64-bit code).
var ptModeExec64 = []byte{0x99, 0x01}

// ptTIP48 is a TIP-family packet (opcode low bits op) with a 48-bit
// sign-extended IP (IPBytes 011).
func ptTIP48(op byte, ip uint64) []byte {
	b := []byte{3<<5 | op}
	for i := 0; i < 6; i++ {
		b = append(b, byte(ip>>(8*i)))
	}
	return b
}

const (
	ptOpTIP    = 0x0d
	ptOpTIPPGE = 0x11
	ptOpTIPPGD = 0x01
	ptOpFUP    = 0x1d
)

// ptShortTNT encodes up to 6 taken/not-taken bits, first branch first.
func ptShortTNT(bits ...bool) []byte {
	b := byte(1) << (len(bits) + 1)
	for i, taken := range bits {
		if taken {
			b |= 1 << (len(bits) - i)
		}
	}
	return []byte{b}
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// testProgramTrace is the PT stream of one run of testProgramAsm starting
// at entry with time tsc: loop T,T,N, the return compressed to a T bit,
// tracing disabled by the syscall.
func testProgramTrace(entry, tsc uint64) []byte {
	return concat(ptPSB, ptTSC(tsc), ptPSBEND, ptModeExec64, ptTIP48(ptOpTIPPGE, entry),
		ptShortTNT(true, true, false, true), []byte{ptOpTIPPGD})
}

// perfScriptIPs runs perf script on file and returns the ip column.
func perfScriptIPs(t testing.TB, file string, extra ...string) ([]uint64, []string, string) {
	t.Helper()
	args := append([]string{"script", "-i", file, "--itrace=i0ns", "-F", "ip,sym"}, extra...)
	cmd := exec.Command("perf", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var ips []uint64
	var syms []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		ip, err := strconv.ParseUint(f[0], 16, 64)
		if err != nil {
			t.Fatalf("perf script line %q: %v", line, err)
		}
		ips = append(ips, ip)
		sym := ""
		if len(f) > 1 {
			sym = f[1]
		}
		syms = append(syms, sym)
	}
	return ips, syms, stderr.String() + string(out)
}

// writeTestRecording writes a recording of one run of the test program.
// With crash set, the writer is flushed but never closed, as if ptjit died.
func writeTestRecording(t testing.TB, path, bin string, perCPU, crash bool) []byte {
	t.Helper()
	const pid, tid, cpu = 4242, 4242, 1
	addr, size, off := execSegment(t, bin)
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	entry := f.Entry
	f.Close()
	w, err := CreatePerfData(path, PerfDataConfig{PerCPU: perCPU, Cmdline: []string{"ptjit", "test"}})
	if err != nil {
		t.Fatal(err)
	}
	w.SetCPU(cpu)
	w.Comm(pid, tid, "prog", true, 100)
	m := PerfMmap{Pid: pid, Tid: tid, Addr: addr, Len: size, Pgoff: off, Prot: 5, Flags: 2, Filename: bin}
	if err := PerfMmapFile(&m); err != nil {
		t.Fatal(err)
	}
	w.Mmap2(&m, 200)
	w.ItraceStart(pid, tid, 300)
	trace := testProgramTrace(entry, 1000)
	w.AuxTrace(tid, cpu, 1000, trace)
	w.Exit(pid, pid, tid, tid, 5000)
	if crash {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		w.Comm(pid, tid, "lost", false, 6000) // buffered, never reaches the file
		w.f.Close()                           // the dying process's fd
		return trace
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return trace
}

func TestPerfDecodesWrittenPerfData(t *testing.T) {
	skipIfNoPerf(t)
	bin := buildTestProgram(t)
	listing := objdumpAddrs(t, bin)
	if len(listing) != 9 {
		t.Fatalf("objdump lists %d instructions, want 9: %x", len(listing), listing)
	}
	var want []uint64
	for _, i := range testProgramPath {
		want = append(want, listing[i])
	}
	for _, c := range []struct {
		name          string
		perCPU, crash bool
	}{{"per-thread", false, false}, {"per-cpu", true, false}, {"crashed-writer", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "perf.data")
			writeTestRecording(t, file, bin, c.perCPU, c.crash)
			got, syms, all := perfScriptIPs(t, file)
			if !equalU64(got, want) {
				t.Fatalf("perf script decoded\n%x\nwant\n%x\nperf output:\n%s", got, want, all)
			}
			if syms[0] != "_start" || syms[8] != "f" {
				t.Errorf("symbols %q, want _start ... f", syms)
			}
		})
	}
}

func equalU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPerfDecodesEncoderTrace writes the trace with the packet encoder,
// with a PSB+ in mid-stream (MODE.Exec and a FUP of the next instruction,
// as perf requires) and one AUXTRACE record per packet group, and checks
// perf decodes the same path across the records.
func TestPerfDecodesEncoderTrace(t *testing.T) {
	skipIfNoPerf(t)
	bin := buildTestProgram(t)
	listing := objdumpAddrs(t, bin)
	if len(listing) != 9 {
		t.Fatalf("objdump lists %d instructions, want 9", len(listing))
	}
	var want []uint64
	for _, i := range testProgramPath {
		want = append(want, listing[i])
	}
	var e ptpkt.Encoder
	var cuts []int // packet-group boundaries
	add := func(p ptpkt.Packet) {
		t.Helper()
		if err := e.Append(&p); err != nil {
			t.Fatal(err)
		}
	}
	ip := func(typ ptpkt.PacketType, addr uint64) {
		t.Helper()
		if err := e.IPPacket(typ, addr); err != nil {
			t.Fatal(err)
		}
	}
	tnt := func(bits ...bool) {
		var payload uint64
		for _, b := range bits {
			payload <<= 1
			if b {
				payload |= 1
			}
		}
		add(ptpkt.Packet{Type: ptpkt.PktTNT8, TNTBits: uint8(len(bits)), TNTPayload: payload})
	}
	add(ptpkt.Packet{Type: ptpkt.PktPSB})
	add(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 1000})
	add(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
	cuts = append(cuts, len(e.Buf))
	add(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
	ip(ptpkt.PktTIPPGE, listing[0])
	tnt(true, true) // the loop taken twice
	cuts = append(cuts, len(e.Buf))
	add(ptpkt.Packet{Type: ptpkt.PktPSB})
	add(ptpkt.Packet{Type: ptpkt.PktTSC, Payload: 1100})
	add(ptpkt.Packet{Type: ptpkt.PktModeExec, CSL: true})
	ip(ptpkt.PktFUP, listing[1]) // the next instruction: dec
	add(ptpkt.Packet{Type: ptpkt.PktPSBEnd})
	cuts = append(cuts, len(e.Buf))
	tnt(false, true) // loop left; ret of f (call after the PSB)
	add(ptpkt.Packet{Type: ptpkt.PktTIPPGD, IPC: ptpkt.IPSuppressed})
	cuts = append(cuts, len(e.Buf))

	const pid = 777
	addr, size, off := execSegment(t, bin)
	file := filepath.Join(t.TempDir(), "perf.data")
	w, err := CreatePerfData(file, PerfDataConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.Comm(pid, pid, "prog", true, 100)
	m := PerfMmap{Pid: pid, Tid: pid, Addr: addr, Len: size, Pgoff: off, Prot: 5, Flags: 2, Filename: bin}
	if err := PerfMmapFile(&m); err != nil {
		t.Fatal(err)
	}
	w.Mmap2(&m, 200)
	w.ItraceStart(pid, pid, 300)
	start := 0
	for _, c := range cuts {
		w.AuxTrace(pid, -1, 1000, e.Buf[start:c])
		start = c
	}
	w.Exit(pid, pid, pid, pid, 5000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _, all := perfScriptIPs(t, file, "--itrace=i0nse")
	if !equalU64(got, want) {
		t.Fatalf("perf script decoded\n%x\nwant\n%x\nperf output:\n%s", got, want, all)
	}
	// Our reader gives back the exact stream, padding aside.
	p, err := OpenPerfData(file)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr, err := LoadPerfTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Queues) != 1 || len(tr.Queues[0].Buffers) != len(cuts) {
		t.Fatalf("queues %+v", tr.Queues)
	}
	q := tr.Queues[0]
	start = 0
	for i, c := range cuts {
		b := q.Buffers[i]
		if !bytes.Equal(q.Data[b.StreamPos:b.StreamPos+c-start], e.Buf[start:c]) {
			t.Errorf("buffer %d differs", i)
		}
		start = c
	}
}
