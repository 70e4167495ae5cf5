package att

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/arch/x86/x86asm"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/x86"
)

// The sweep tests decode the whole .text of real system binaries linearly
// and compare every instruction boundary, length and branch class with
// objdump -d, the independent truth. They also measure where x86asm alone
// would be wrong (the gaps insn_fix.go covers) and report the counts.

// objInsn is one instruction as objdump printed it.
type objInsn struct {
	addr  uint64
	raw   []byte
	text  string // mnemonic and operands ("" for a gap marker)
	bad   bool   // objdump printed "(bad)"
	skip  bool   // objdump skipped bytes here ("..." = a run of zeros, or a data dump)
	lines int    // how many output lines the bytes took
}

var (
	objLineRE = regexp.MustCompile(`^\s*([0-9a-f]+):\t([0-9a-f]{2}(?: [0-9a-f]{2})*) *(?:\t(.*))?$`)
	objSkipRE = regexp.MustCompile(`^\s*\.\.\.$`)
	// Data objects in .text are dumped as hex and ASCII, without a tab
	// before the text.
	objDataRE = regexp.MustCompile(`^\s*[0-9a-f]+:\t(?:[0-9a-f]{2} )+ +[^\t]*$`)
)

// parseObjdump reads objdump -d output. objdump wraps long byte sequences
// over several lines (7 bytes each); the continuation lines have an address
// and bytes but no text, and their bytes belong to the previous instruction.
// A line "..." means objdump skipped a run of zero bytes.
func parseObjdump(out []byte) ([]objInsn, error) {
	var insns []objInsn
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		if objSkipRE.MatchString(line) || objDataRE.MatchString(line) {
			insns = append(insns, objInsn{skip: true})
			continue
		}
		m := objLineRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		addr, err := strconv.ParseUint(m[1], 16, 64)
		if err != nil {
			return nil, fmt.Errorf("objdump line %d: bad address %q", ln, m[1])
		}
		var raw []byte
		for _, h := range strings.Fields(m[2]) {
			b, err := strconv.ParseUint(h, 16, 8)
			if err != nil {
				return nil, fmt.Errorf("objdump line %d: bad byte %q", ln, h)
			}
			raw = append(raw, byte(b))
		}
		text := strings.TrimSpace(m[3])
		if text == "" && len(insns) > 0 && !insns[len(insns)-1].skip {
			prev := &insns[len(insns)-1]
			if prev.addr+uint64(len(prev.raw)) != addr {
				return nil, fmt.Errorf("objdump line %d: continuation at %#x does not follow %#x+%d", ln, addr, prev.addr, len(prev.raw))
			}
			prev.raw = append(prev.raw, raw...)
			prev.lines++
			continue
		}
		insns = append(insns, objInsn{addr: addr, raw: raw, text: text, bad: strings.Contains(text, "(bad)") || strings.HasPrefix(text, ".byte"), lines: 1})
	}
	return insns, sc.Err()
}

// cpuBoundaries rewrites the two places where objdump's listing does not
// show instruction boundaries as the CPU (and libipt's pt_ild) sees them:
//
//   - objdump prints 9B (fwait) fused with the x87 instruction after it
//     ("9b d9 7c 24 02 fstcw"); for the CPU, 9B is an instruction of its own
//     and fnstcw the next one.
//   - objdump prints a REX prefix that is followed by another REX or a
//     legacy prefix as a line of its own ("47  rex.RXB"), and likewise
//     surplus prefixes ("f2 f2 42  repnz repnz rex.X"); for the CPU they are
//     ignored but still prefixes of the following instruction.
func cpuBoundaries(in []objInsn) []objInsn {
	out := make([]objInsn, 0, len(in))
	for k := 0; k < len(in); k++ {
		o := in[k]
		switch {
		case o.skip || o.bad:
		case fusedFwait(o) > 0:
			j := fusedFwait(o)
			out = append(out, objInsn{addr: o.addr, raw: o.raw[:j], text: "fwait", lines: 1})
			o.addr += uint64(j)
			o.raw = o.raw[j:]
			// What remains is the no-wait form: fstcw -> fnstcw.
			for _, w := range []string{"fstcw", "fstsw", "fclex", "finit", "fsave", "fstenv"} {
				if strings.HasPrefix(o.text, w) {
					o.text = "fn" + o.text[1:]
				}
			}
		case prefixOnly(o) && k+1 < len(in) && !in[k+1].skip && in[k+1].addr == o.addr+uint64(len(o.raw)):
			next := in[k+1]
			next.addr = o.addr
			next.raw = append(append([]byte{}, o.raw...), next.raw...)
			in[k+1] = next
			continue
		case prefixOnly(o):
			// Prefixes before a run of zeros objdump skipped: the
			// instruction they belong to is not in the listing.
			o.bad = true
		}
		out = append(out, o)
	}
	return out
}

// fusedFwait returns the length of the fwait (9B, maybe after prefixes)
// that objdump fused with the next instruction, or 0.
func fusedFwait(o objInsn) int {
	if strings.HasPrefix(o.text, "fwait") {
		return 0
	}
	for j, b := range o.raw {
		if b == 0x9B {
			if j+1 < len(o.raw) {
				return j + 1
			}
			return 0
		}
		if !x86.IsPrefix(b, x86.Mode64) {
			return 0
		}
	}
	return 0
}

// prefixOnly reports an objdump line that holds only prefix bytes.
func prefixOnly(o objInsn) bool {
	if o.skip || o.bad {
		return false
	}
	for _, b := range o.raw {
		if !x86.IsPrefix(b, x86.Mode64) {
			return false
		}
	}
	for _, w := range strings.Fields(o.text) {
		if !objPrefixes[w] && !strings.HasPrefix(w, "rex") {
			return false
		}
	}
	return true
}

// objPrefixes are words objdump prints before a mnemonic.
var objPrefixes = map[string]bool{
	"lock": true, "rep": true, "repz": true, "repe": true, "repnz": true, "repne": true,
	"bnd": true, "notrack": true, "data16": true, "data32": true, "addr16": true, "addr32": true,
	"cs": true, "ds": true, "es": true, "ss": true, "fs": true, "gs": true,
	"xacquire": true, "xrelease": true, "{vex}": true, "{vex3}": true, "{evex}": true,
}

// objdumpClass derives the flow class from objdump's text: the independent
// classification the decoder is compared with.
func objdumpClass(text string) x86.InsnClass {
	f := strings.Fields(text)
	for len(f) > 0 && (objPrefixes[f[0]] || strings.HasPrefix(f[0], "rex")) {
		f = f[1:]
	}
	if len(f) == 0 {
		return x86.ClassOther
	}
	mn, ops := f[0], ""
	if i := strings.IndexByte(mn, ','); i > 0 {
		mn = mn[:i] // branch hints: "jne,pt", "loop,pn"
	}
	if len(f) > 1 {
		ops = f[1]
	}
	indirect := strings.HasPrefix(ops, "*")
	switch mn {
	case "jmp", "jmpq", "jmpw", "jmpl":
		if indirect {
			return x86.ClassIndJump
		}
		return x86.ClassJump
	case "call", "callq", "callw", "calll":
		if indirect {
			return x86.ClassIndCall
		}
		return x86.ClassCall
	case "ret", "retq", "retw", "retl":
		return x86.ClassRet
	case "ljmp", "ljmpq", "ljmpw", "ljmpl":
		return x86.ClassFarJump
	case "lcall", "lcallq", "lcallw", "lcalll":
		return x86.ClassFarCall
	case "lret", "lretq", "lretw", "lretl", "iret", "iretw", "iretl", "iretq", "iretd", "uiret", "erets", "eretu":
		return x86.ClassFarRet
	case "loop", "loope", "loopz", "loopne", "loopnz", "loopw", "loopl", "loopq":
		return x86.ClassCondJump
	case "syscall", "sysenter", "int", "int3", "into", "int1", "icebp":
		return x86.ClassSyscall
	case "sysret", "sysretl", "sysretq", "sysexit", "sysexitl", "sysexitq":
		return x86.ClassSysret
	case "ptwrite", "ptwritel", "ptwriteq":
		return x86.ClassPTWrite
	case "vmlaunch", "vmresume":
		return x86.ClassVMEntry
	case "vmcall":
		return x86.ClassVMExit
	case "mov", "movq", "movl":
		if strings.HasSuffix(ops, ",%cr3") {
			return x86.ClassMovCR3
		}
		return x86.ClassOther
	}
	if mn[0] == 'j' {
		return x86.ClassCondJump // ja, jb, ..., jrcxz, jecxz, jcxz
	}
	return x86.ClassOther
}

// sweepStats are the counts a sweep reports.
type sweepStats struct {
	insns, bytes               int // instructions/bytes compared
	objBad, objSkip            int // objdump "(bad)" and "..." resyncs
	lenMismatch, classMismatch int
	boundary, decodeErr        int // our boundary not objdump's; our errors
	targetMismatch             int
	x86asmLen, x86asmErr       int // x86asm.Decode alone: wrong length, error
	x86asmClass                int // x86asm.Decode alone: right length, wrong class
	x86asmGaps                 map[string]*gap
	disasmErr                  int // Disasm fell back to .byte
	failures                   []string
	disasmFailures             []string
	textMismatch               int      // Disasm text differs from objdump's
	textFailures               []string // examples
	strictText                 bool     // text mismatches fail the test
}

func (s *sweepStats) fail(format string, args ...any) {
	if len(s.failures) < 40 {
		s.failures = append(s.failures, fmt.Sprintf(format, args...))
	}
}

// sweep compares DecodeInsn with objdump's listing of path's .text. objdump
// runs with -M intel64: Intel PT traces Intel CPUs, which ignore 66 on near
// branches in 64-bit mode (AMD, objdump's default, would take rel16).
func sweep(t *testing.T, path string) *sweepStats {
	objdump := testenv.Tool(t, "objdump", "binutils")
	out, err := exec.Command(objdump, "-d", "-M", "intel64", "-j", ".text", path).Output()
	if err != nil {
		t.Fatalf("objdump -d %s: %v", path, err)
	}
	listing, err := parseObjdump(out)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	listing = cpuBoundaries(listing)
	text, base := testenv.TextSection(t, path)
	end := base + uint64(len(text))

	st := &sweepStats{x86asmGaps: map[string]*gap{}}
	var in x86.Insn
	cur := base // where our own linear sweep says the next instruction starts
	resync := true
	for k, o := range listing {
		if o.skip {
			st.objSkip++
			resync = true
			continue
		}
		if o.addr < base || o.addr+uint64(len(o.raw)) > end {
			t.Fatalf("%s: objdump address %#x outside .text [%#x,%#x)", path, o.addr, base, end)
		}
		code := text[o.addr-base:]
		if !bytes.Equal(code[:len(o.raw)], o.raw) {
			t.Fatalf("%s: objdump bytes at %#x (% x) differ from the file", path, o.addr, o.raw)
		}
		if o.bad {
			st.objBad++
			resync = true
			continue
		}
		if !resync && o.addr != cur {
			st.boundary++
			st.fail("%#x: our sweep put a boundary at %#x, objdump at %#x", o.addr, cur, o.addr)
		}
		resync = false
		st.insns++
		st.bytes += len(o.raw)
		err := x86.DecodeInsn(code, o.addr, x86.Mode64, &in)
		if err != nil {
			st.decodeErr++
			st.fail("%#x: % x (%s): %v", o.addr, o.raw, o.text, err)
			cur = o.addr + uint64(len(o.raw))
			continue
		}
		cur = o.addr + uint64(in.Len)
		if int(in.Len) != len(o.raw) {
			st.lenMismatch++
			st.fail("%#x: % x (%s): length %d, objdump %d", o.addr, o.raw, o.text, in.Len, len(o.raw))
			continue
		}
		if want := objdumpClass(o.text); in.Class != want {
			st.classMismatch++
			st.fail("%#x: % x (%s): class %v, objdump says %v", o.addr, o.raw, o.text, in.Class, want)
		}
		if in.Class.IsDirect() {
			// objdump prints a direct target as the first hex operand.
			f := strings.Fields(o.text)
			var got uint64
			ok := false
			for _, w := range f {
				if v, err := strconv.ParseUint(strings.TrimPrefix(w, "0x"), 16, 64); err == nil && !strings.HasPrefix(w, "<") {
					got, ok = v, true
					break
				}
			}
			if !ok || got != in.Target {
				st.targetMismatch++
				st.fail("%#x: % x (%s): target %#x", o.addr, o.raw, o.text, in.Target)
			}
		}
		// The x86asm gap measurement: where would x86asm alone be wrong?
		xi, xerr := x86asm.Decode(code[:min(len(code), x86.MaxInsnLen)], 64)
		switch {
		case xerr != nil:
			st.x86asmErr++
			st.addGap(o)
		case xi.Len != len(o.raw):
			st.x86asmLen++
			st.addGap(o)
		case x86asmClass(xi) != in.Class:
			st.x86asmClass++
			st.addGap(o)
		}
		if got, want := strings.Join(strings.Fields(Text(&in)), " "), objdumpText(o.text); got != want {
			st.textMismatch++
			if len(st.textFailures) < 20 {
				st.textFailures = append(st.textFailures, fmt.Sprintf("%#x: % x: Disasm %q, objdump %q", o.addr, o.raw, got, want))
			}
		}
		if strings.HasPrefix(Text(&in), ".byte") {
			st.disasmErr++
			if len(st.disasmFailures) < 20 {
				st.disasmFailures = append(st.disasmFailures, fmt.Sprintf("%#x: % x (%s): Disasm gives %s", o.addr, o.raw, o.text, Text(&in)))
			}
		}
		_ = k
	}
	return st
}

// objdumpText normalises objdump's text for comparison with Disasm: no
// symbol annotations ("<memcpy+0x10>"), no "# address" comments, single
// spaces.
func objdumpText(text string) string {
	if i := strings.Index(text, "#"); i >= 0 {
		text = text[:i]
	}
	if i := strings.Index(text, " <"); i >= 0 {
		// "call 2639f <memcpy>": with symbols objdump drops the 0x that
		// it prints without them (and Disasm prints).
		text = text[:i]
		if j := strings.LastIndexAny(text, " ,"); j >= 0 {
			if _, err := strconv.ParseUint(text[j+1:], 16, 64); err == nil {
				text = text[:j+1] + "0x" + text[j+1:]
			}
		}
	}
	return strings.Join(strings.Fields(text), " ")
}

// gap counts one kind of x86asm error, with an example.
type gap struct {
	n      int
	sample string
}

func (s *sweepStats) addGap(o objInsn) {
	k := gapKey(o.text)
	g := s.x86asmGaps[k]
	if g == nil {
		g = &gap{sample: fmt.Sprintf("% x (%s)", o.raw, o.text)}
		s.x86asmGaps[k] = g
	}
	g.n++
}

// x86asmClass is the class x86asm's decoding implies, to measure where
// x86asm alone would misclassify a branch.
func x86asmClass(xi x86asm.Inst) x86.InsnClass {
	_, rel := xi.Args[0].(x86asm.Rel)
	switch xi.Op {
	case x86asm.JMP:
		if rel {
			return x86.ClassJump
		}
		return x86.ClassIndJump
	case x86asm.CALL:
		if rel {
			return x86.ClassCall
		}
		return x86.ClassIndCall
	case x86asm.RET:
		return x86.ClassRet
	case x86asm.LJMP:
		return x86.ClassFarJump
	case x86asm.LCALL:
		return x86.ClassFarCall
	case x86asm.LRET, x86asm.IRET, x86asm.IRETD, x86asm.IRETQ:
		return x86.ClassFarRet
	case x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JNE,
		x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JO, x86asm.JNO,
		x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS, x86asm.JCXZ, x86asm.JECXZ,
		x86asm.JRCXZ, x86asm.LOOP, x86asm.LOOPE, x86asm.LOOPNE:
		return x86.ClassCondJump
	case x86asm.SYSCALL, x86asm.SYSENTER, x86asm.INT, x86asm.INTO:
		return x86.ClassSyscall
	case x86asm.SYSRET, x86asm.SYSEXIT:
		return x86.ClassSysret
	case x86asm.MOV:
		if r, ok := xi.Args[0].(x86asm.Reg); ok && r == x86asm.CR3 {
			return x86.ClassMovCR3
		}
	}
	return x86.ClassOther
}

// gapKey names an x86asm gap by objdump's mnemonic.
func gapKey(text string) string {
	f := strings.Fields(text)
	for len(f) > 1 && (objPrefixes[f[0]] || strings.HasPrefix(f[0], "rex")) {
		f = f[1:]
	}
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func (s *sweepStats) report(t *testing.T, name string) {
	t.Logf("%s: %d instructions (%d bytes) checked against objdump; objdump (bad): %d, zero runs skipped: %d",
		name, s.insns, s.bytes, s.objBad, s.objSkip)
	t.Logf("%s: mismatches: length %d, boundary %d, class %d, target %d, decode errors %d, Disasm fallbacks %d",
		name, s.lenMismatch, s.boundary, s.classMismatch, s.targetMismatch, s.decodeErr, s.disasmErr)
	t.Logf("%s: x86asm v0.32 alone: %d wrong lengths, %d decode errors, %d wrong classes",
		name, s.x86asmLen, s.x86asmErr, s.x86asmClass)
	keys := make([]string, 0, len(s.x86asmGaps))
	for k := range s.x86asmGaps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := s.x86asmGaps[k]
		t.Logf("%s:   x86asm gap %-12s %6d  e.g. %s", name, k, g.n, g.sample)
	}
	for _, f := range s.failures {
		t.Errorf("%s: %s", name, f)
	}
	for _, f := range s.disasmFailures {
		if s.strictText {
			t.Errorf("%s: %s", name, f)
		} else {
			t.Logf("%s: %s", name, f)
		}
	}
	t.Logf("%s: Disasm text differs from objdump's for %d instructions", name, s.textMismatch)
	for _, f := range s.textFailures {
		if s.strictText {
			t.Errorf("%s: %s", name, f)
		} else {
			t.Logf("%s: %s", name, f)
		}
	}
	if s.insns == 0 {
		t.Errorf("%s: no instructions compared", name)
	}
}

func TestSweepLibc(t *testing.T) {
	path := testenv.SystemLibc(t)
	st := sweep(t, path)
	st.strictText = true
	st.report(t, path)
}

func TestSweepPerl(t *testing.T) {
	path, err := filepath.EvalSymlinks(testenv.Tool(t, "perl", "perl-base"))
	if err != nil {
		t.Fatal(err)
	}
	st := sweep(t, path)
	st.strictText = true
	st.report(t, path)
}

// TestSweepExtra sweeps the ELF files listed in $PTJIT_SWEEP (separated by
// colons), for checking the decoder against more code than libc and perl.
func TestSweepExtra(t *testing.T) {
	list := os.Getenv("PTJIT_SWEEP")
	if list == "" {
		t.Skip("set PTJIT_SWEEP=file1:file2... to sweep more binaries")
	}
	for _, path := range strings.Split(list, ":") {
		if path == "" {
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			st := sweep(t, path)
			st.report(t, path)
		})
	}
}

// TestParseObjdump checks the parser on wrapped lines, (bad) and zero runs.
func TestParseObjdump(t *testing.T) {
	out := []byte(`
0000000000001000 <f>:
    1000:	f3 0f 1e fa          	endbr64
    1004:	48 b8 88 77 66 55 44 	movabs $0x1122334455667788,%rax
    100b:	33 22 11 
    100e:	06                   	(bad)
	...
    1020:	c3                   	ret
`)
	got, err := parseObjdump(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("parsed %d entries, want 5: %+v", len(got), got)
	}
	if got[1].addr != 0x1004 || len(got[1].raw) != 10 || got[1].lines != 2 {
		t.Errorf("wrapped movabs parsed as %+v", got[1])
	}
	if !got[2].bad || !got[3].skip || got[4].text != "ret" {
		t.Errorf("bad/skip/ret parsed as %+v %+v %+v", got[2], got[3], got[4])
	}
	bad := []byte("    1000:\tf3 0f 1e fa \tendbr64\n    1007:\t00 00 \n")
	if _, err := parseObjdump(bad); err == nil {
		t.Errorf("continuation at a wrong address not rejected")
	}
}
