package att

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/x86"
	"github.com/ptjit/ptjit/x86/internal/x86test"
)

func objdumpMachine(mode x86.ExecMode) []string {
	switch mode {
	case x86.Mode16:
		return []string{"-m", "i8086"}
	case x86.Mode32:
		return []string{"-m", "i386"}
	}
	return []string{"-m", "i386:x86-64", "-M", "intel64"}
}

var (
	objFirstRE = regexp.MustCompile(`(?m)^\s*0:\t((?:[0-9a-f]{2} )+)`)
	objTextRE  = regexp.MustCompile(`(?m)^\s*0:\t(?:[0-9a-f]{2} )+\s*\t(.*)$`)
)

// TestDecodeInsnVsObjdump checks the table's lengths against objdump on a
// raw binary of each case's bytes: the table itself must be right.
func TestDecodeInsnVsObjdump(t *testing.T) {
	objdump := testenv.Tool(t, "objdump", "binutils")
	dir := t.TempDir()
	for k, tc := range x86test.Cases {
		if tc.NoObj {
			continue
		}
		code := x86test.MustHex(t, tc.Hex)
		path := filepath.Join(dir, "c"+strconv.Itoa(k)+".bin")
		if err := os.WriteFile(path, code, 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-D", "-b", "binary"}, objdumpMachine(tc.Mode)...)
		out, err := exec.Command(objdump, append(args, path)...).CombinedOutput()
		if err != nil {
			t.Fatalf("objdump: %v\n%s", err, out)
		}
		m := objFirstRE.FindSubmatch(out)
		if m == nil {
			t.Errorf("%s %s: no instruction in objdump output:\n%s", tc.Mode, tc.What, out)
			continue
		}
		// A long instruction wraps: count continuation lines' bytes too.
		n := len(strings.Fields(string(m[1])))
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.SplitN(l, "\t", 3)
			if len(f) == 2 && strings.HasSuffix(strings.TrimSpace(f[0]), ":") {
				addr, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(f[0]), ":"), 16, 64)
				if err == nil && int(addr) == n {
					n += len(strings.Fields(f[1]))
				}
			}
		}
		if n != tc.Len {
			t.Errorf("%s %s (% x): table says %d bytes, objdump %d:\n%s", tc.Mode, tc.What, code, tc.Len, n, out)
			continue
		}
		// Disasm's text must be objdump's.
		tm := objTextRE.FindSubmatch(out)
		var in x86.Insn
		if tm == nil || x86.DecodeInsn(code, 0, tc.Mode, &in) != nil {
			t.Errorf("%s %s: no text in objdump output or no decode", tc.Mode, tc.What)
			continue
		}
		if got, want := strings.Join(strings.Fields(Text(&in)), " "), objdumpText(string(tm[1])); got != want {
			t.Errorf("%s %s (% x): Disasm %q, objdump %q", tc.Mode, tc.What, code, got, want)
		}
	}
}

// TestDisasmRandom formats random and mutated instructions in all modes:
// Disasm must not panic and must return text for anything DecodeInsn
// accepts.
func TestDisasmRandom(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	var seeds [][]byte
	for _, tc := range x86test.Cases {
		seeds = append(seeds, x86test.MustHex(t, tc.Hex))
	}
	buf := make([]byte, 16)
	n := 0
	for iter := 0; iter < 60000; iter++ {
		rng.Read(buf)
		if iter%2 == 1 {
			s := seeds[rng.Intn(len(seeds))]
			copy(buf, s)
			buf[rng.Intn(len(s))] ^= byte(1 << rng.Intn(8))
		}
		for _, mode := range []x86.ExecMode{x86.Mode16, x86.Mode32, x86.Mode64} {
			var in x86.Insn
			if x86.DecodeInsn(buf, uint64(rng.Uint32()), mode, &in) != nil {
				continue
			}
			if s := Text(&in); s == "" {
				t.Fatalf("%s % x: empty Disasm", mode, in.Bytes())
			}
			n++
		}
	}
	t.Logf("%d random instructions formatted", n)
}
