package recording

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/elfnote"
	"github.com/ptjit/ptjit/internal/testenv"
)

// The ELF tests compare with readelf, and resolve the addresses a
// running program prints about itself through its /proc/PID/maps mapping.

const elfTestProg = `#include <stdio.h>
__attribute__((noinline)) int alpha(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int beta(int x) { return alpha(x) ^ 7; }
__attribute__((noinline)) int gamma_fn(int x) { return beta(x) + alpha(x); }
int main(void) {
	printf("alpha=%p beta=%p gamma_fn=%p main=%p\n", (void *)alpha, (void *)beta, (void *)gamma_fn, (void *)main);
	fflush(stdout);
	getchar();
	return gamma_fn(1) & 1;
}
`

// buildELFTestProg compiles elfTestProg with gcc into a temporary directory.
func buildELFTestProg(t *testing.T, extra ...string) string {
	t.Helper()
	return testenv.CompileC(t, "prog.c", elfTestProg, append([]string{"-O1", "-fPIE", "-pie"}, extra...)...)
}

// readelfFuncs runs readelf -W with args (-s: .symtab and .dynsym;
// --dyn-syms: .dynsym) and returns the defined FUNC/IFUNC symbols by address
// (all names at each address) and their sizes.
func readelfFuncs(t *testing.T, args ...string) (map[uint64][]string, map[uint64]uint64) {
	t.Helper()
	out, err := exec.Command(testenv.Tool(t, "readelf", "binutils"), append([]string{"-W"}, args...)...).Output()
	if err != nil {
		t.Fatalf("readelf %v: %v", args, err)
	}
	names := map[uint64][]string{}
	sizes := map[uint64]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// "   Num:    Value          Size Type    Bind   Vis      Ndx Name"
		f := strings.Fields(sc.Text())
		if len(f) < 8 || !strings.HasSuffix(f[0], ":") || (f[3] != "FUNC" && f[3] != "IFUNC") || f[6] == "UND" {
			continue
		}
		addr, err := strconv.ParseUint(f[1], 16, 64)
		if err != nil || addr == 0 {
			continue
		}
		size, err := strconv.ParseUint(f[2], 0, 64)
		if err != nil {
			t.Fatalf("readelf: bad size in %q", sc.Text())
		}
		name := f[7]
		if i := strings.IndexByte(name, '@'); i > 0 {
			name = name[:i]
		}
		names[addr] = append(names[addr], name)
		sizes[addr] = max(sizes[addr], size)
	}
	return names, sizes
}

// checkAgainst checks that every readelf function address resolves to one of
// nm's names for it at offset 0, and its last byte at offset size-1.
func checkAgainst(t *testing.T, tab *ELFSymbols, names map[uint64][]string, sizes map[uint64]uint64) {
	t.Helper()
	if len(names) == 0 {
		t.Fatalf("%s: readelf lists no functions", tab.Path)
	}
	bad := 0
	for addr, ns := range names {
		name, off, ok := tab.Lookup(addr)
		if !ok || off != 0 || !contains(ns, name) {
			bad++
			if bad <= 10 {
				t.Errorf("%s: Lookup(%#x) = %q+%#x, %v; readelf says %v", tab.Path, addr, name, off, ok, ns)
			}
			continue
		}
		if sz := sizes[addr]; sz > 1 {
			name2, off2, ok2 := tab.Lookup(addr + sz - 1)
			if !ok2 || name2 != name || off2 != sz-1 {
				bad++
				if bad <= 10 {
					t.Errorf("%s: Lookup(%#x) (last byte of %s) = %q+%#x, %v", tab.Path, addr+sz-1, name, name2, off2, ok2)
				}
			}
		}
	}
	if tab.Len() != len(names) {
		t.Errorf("%s: table has %d addresses, readelf %d", tab.Path, tab.Len(), len(names))
	}
	t.Logf("%s: %d function addresses agree with readelf", tab.Path, len(names)-bad)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestELFSymbolsVsReadelf(t *testing.T) {
	bin := buildELFTestProg(t)
	tab, err := ReadELFSymbols(bin)
	if err != nil {
		t.Fatal(err)
	}
	names, sizes := readelfFuncs(t, "-s", bin)
	checkAgainst(t, tab, names, sizes)
	for _, fn := range []string{"alpha", "beta", "gamma_fn", "main"} {
		found := false
		for _, ns := range names {
			found = found || contains(ns, fn)
		}
		if !found {
			t.Errorf("readelf does not list %s", fn)
		}
	}
}

func TestELFSymbolsLibcDynsym(t *testing.T) {
	path := testenv.SystemLibc(t)
	tab, err := ReadELFSymbols(path)
	if err != nil {
		t.Fatal(err)
	}
	names, sizes := readelfFuncs(t, "--dyn-syms", path)
	checkAgainst(t, tab, names, sizes)
}

// TestELFSymbolsMapped runs the test program, reads the function addresses
// it prints and its executable mapping from /proc/PID/maps, and resolves
// them through the mapping.
func TestELFSymbolsMapped(t *testing.T) {
	bin := buildELFTestProg(t)
	tab, err := ReadELFSymbols(bin)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the program's output: %v", err)
	}
	maps, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	type mapping struct{ start, end, pgoff uint64 }
	var exe []mapping
	for _, l := range strings.Split(string(maps), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[5] != bin {
			continue
		}
		se := strings.SplitN(f[0], "-", 2)
		start, _ := strconv.ParseUint(se[0], 16, 64)
		end, _ := strconv.ParseUint(se[1], 16, 64)
		pgoff, _ := strconv.ParseUint(f[2], 16, 64)
		exe = append(exe, mapping{start, end, pgoff})
	}
	if len(exe) == 0 {
		t.Fatalf("no mapping of %s in /proc/PID/maps:\n%s", bin, maps)
	}
	for _, kv := range strings.Fields(line) {
		name, addrS, _ := strings.Cut(kv, "=")
		addr, err := strconv.ParseUint(strings.TrimPrefix(addrS, "0x"), 16, 64)
		if err != nil {
			t.Fatalf("bad program output %q", line)
		}
		var m *mapping
		for i := range exe {
			if addr >= exe[i].start && addr < exe[i].end {
				m = &exe[i]
			}
		}
		if m == nil {
			t.Errorf("%s=%#x is in no mapping of %s", name, addr, bin)
			continue
		}
		got, off, ok := tab.LookupMapped(addr, m.start, m.pgoff)
		if !ok || got != name || off != 0 {
			t.Errorf("LookupMapped(%#x, start %#x, pgoff %#x) = %q+%#x, %v; want %s+0", addr, m.start, m.pgoff, got, off, ok, name)
		}
		// One byte in: same function, offset 1.
		if got, off, ok := tab.LookupMapped(addr+1, m.start, m.pgoff); !ok || got != name || off != 1 {
			t.Errorf("LookupMapped(%#x) = %q+%#x, %v; want %s+1", addr+1, got, off, ok, name)
		}
	}
	if _, _, ok := tab.LookupMapped(exe[0].start-1, exe[0].start, exe[0].pgoff); ok {
		t.Errorf("an address below the mapping resolved")
	}
}

// readelfBuildID returns the build-id readelf -n prints for path, or "".
func readelfBuildID(t *testing.T, path string) string {
	out, err := exec.Command(testenv.Tool(t, "readelf", "binutils"), "-n", path).Output()
	if err != nil {
		t.Fatalf("readelf -n %s: %v", path, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if _, id, ok := strings.Cut(l, "Build ID: "); ok {
			return strings.TrimSpace(id)
		}
	}
	return ""
}

func TestBuildID(t *testing.T) {
	for _, path := range []string{testenv.SystemLibc(t), buildELFTestProg(t, "-Wl,--build-id=sha1"), buildELFTestProg(t, "-Wl,--build-id=md5")} {
		want := readelfBuildID(t, path)
		if want == "" {
			t.Fatalf("readelf shows no build-id for %s", path)
		}
		id, err := elfnote.BuildID(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := hex.EncodeToString(id); got != want {
			t.Errorf("%s: build-id %s, readelf says %s", path, got, want)
		}
	}
}

func TestReadBuildIDErrors(t *testing.T) {
	noID := buildELFTestProg(t, "-Wl,--build-id=none")
	if want := readelfBuildID(t, noID); want != "" {
		t.Fatalf("readelf shows build-id %s for a --build-id=none binary", want)
	}
	_, err := elfnote.BuildID(noID)
	if !errors.Is(err, elfnote.ErrNoBuildID) || !strings.Contains(err.Error(), noID) {
		t.Errorf("no build-id: got %v, want ErrNoBuildID naming the file", err)
	}

	notELF := filepath.Join(t.TempDir(), "notelf.txt")
	os.WriteFile(notELF, []byte("hello, not an ELF file\n"), 0o644)
	if _, err := elfnote.BuildID(notELF); err == nil || !strings.Contains(err.Error(), notELF) {
		t.Errorf("not ELF: got %v, want an error naming the file", err)
	}
	if _, err := ReadELFSymbols(notELF); err == nil || !strings.Contains(err.Error(), notELF) {
		t.Errorf("ReadELFSymbols on not ELF: got %v, want an error naming the file", err)
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if _, err := ReadELFSymbols(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: got %v", err)
	}
}

// TestELFSymbolsStripped: a stripped file gives a table of its .dynsym
// functions (here none are defined), not an error.
func TestELFSymbolsStripped(t *testing.T) {
	bin := buildELFTestProg(t)
	stripped := bin + ".stripped"
	if out, err := exec.Command(testenv.Tool(t, "strip", "binutils"), "-o", stripped, bin).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	tab, err := ReadELFSymbols(stripped)
	if err != nil {
		t.Fatal(err)
	}
	names, _ := readelfFuncs(t, "-s", stripped)
	if tab.Len() != len(names) {
		t.Errorf("stripped: %d addresses, readelf lists %d", tab.Len(), len(names))
	}
	full, err := ReadELFSymbols(bin)
	if err != nil {
		t.Fatal(err)
	}
	if full.Len() <= tab.Len() {
		t.Errorf("unstripped table (%d) not larger than stripped (%d)", full.Len(), tab.Len())
	}
	// The build-id survives stripping.
	a, err1 := elfnote.BuildID(bin)
	b, err2 := elfnote.BuildID(stripped)
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("build-id %x (%v) vs stripped %x (%v)", a, err1, b, err2)
	}
}

// TestELFSymbolsDebugFile strips the test program after putting its
// symbols in a separate debug file under ROOT/.build-id/xx/yyyy.debug (as
// Debian's -dbgsym packages do, with objcopy --only-keep-debug): the
// stripped file has no function symbol of its own, and
// ReadELFSymbolsDebug names alpha and gamma_fn at the addresses readelf
// gives for them in the unstripped file.
func TestELFSymbolsDebugFile(t *testing.T) {
	bin := buildELFTestProg(t, "-g")
	funcs, _ := readelfFuncs(t, "-s", bin)
	id, err := elfnote.BuildID(bin)
	if err != nil || len(id) < 2 {
		t.Fatalf("gcc made no build-id: %v", err)
	}
	root := t.TempDir()
	h := hex.EncodeToString(id)
	dbg := filepath.Join(root, ".build-id", h[:2], h[2:]+".debug")
	os.MkdirAll(filepath.Dir(dbg), 0o755)
	for _, c := range [][]string{{"objcopy", "--only-keep-debug", bin, dbg}, {"strip", "--strip-all", bin}} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", c, err, out)
		}
	}
	if plain, err := ReadELFSymbols(bin); err != nil || plain.Len() != 0 {
		t.Fatalf("stripped: %v symbols, %v", plain.Len(), err)
	}
	tab, err := ReadELFSymbolsDebug(bin, root)
	if err != nil || tab.Debug != dbg {
		t.Fatalf("ReadELFSymbolsDebug: debug file %q, %v", tab.Debug, err)
	}
	found := 0
	for addr, names := range funcs {
		for _, want := range names {
			if want != "alpha" && want != "gamma_fn" {
				continue
			}
			found++
			if got, off, ok := tab.Lookup(addr); !ok || got != want || off != 0 {
				t.Errorf("Lookup(%#x) = %q+%#x, %v; want %s", addr, got, off, ok, want)
			}
		}
	}
	if found != 2 {
		t.Fatalf("readelf found %d of alpha, gamma_fn", found)
	}
	if _, err := ReadELFSymbolsDebug(bin, t.TempDir()); err != nil {
		t.Errorf("no debug file: %v, want the empty table", err)
	}
}
