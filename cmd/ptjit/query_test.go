package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
)

// ptjitIn runs the CLI in this process and returns its exit status, stdout
// and stderr.
func ptjitIn(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runWith(args, &out, &errb)
	return code, out.String(), errb.String()
}

const (
	siteOff  = 0x40           // offset of the patched site in the page
	jitBase  = 0x7f0000100000 // where the fake JIT region lives
	nop5     = "\x0f\x1f\x44\x00\x00"
	codePage = db.PageSize
)

// staticKeyRecording writes a code.db holding one region with three
// versions: a 5-byte nop at the site, then jmp rel32 to site+0x20, then the
// nop again, as a static key toggled on and off.
func staticKeyRecording(t *testing.T) (dir string, versions [][]byte) {
	t.Helper()
	dir = t.TempDir()
	r, err := db.Create(filepath.Join(dir, "code.db"), db.Meta{Command: []string{"static-keys"}, TSCHz: 1e9, Start: clock.Stamp{TSC: 1000, MonoNS: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(site string) []byte {
		b := bytes.Repeat([]byte{0x90}, codePage) // nops
		b[0] = 0x55                               // push %rbp
		copy(b[siteOff:], site)
		b[siteOff+0x20] = 0xc3 // ret
		return b
	}
	jmp := make([]byte, 5)
	jmp[0] = 0xe9
	binary.LittleEndian.PutUint32(jmp[1:], 0x20-5)
	versions = [][]byte{mk(nop5), mk(string(jmp)), mk(nop5)}
	reg := r.NewRegion(42, jitBase, codePage, clock.Stamp{TSC: 2000, MonoNS: 2000})
	var prev int64
	for i, v := range versions {
		at := clock.Stamp{TSC: uint64(2000 + 1000*i), MonoNS: int64(2000 + 1000*i)}
		if prev != 0 {
			r.EndVersion(prev, at)
		}
		prev, _ = r.AddVersion(db.Version{Region: reg, PID: 42, TID: 43 + i, Addr: jitBase, Size: codePage, Data: v, At: at, Cause: "mprotect", IP: 0x401000 + uint64(i)})
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, versions
}

func TestHistoryJSON(t *testing.T) {
	dir, versions := staticKeyRecording(t)
	code, out, errs := ptjitIn(t, "history", "-i", dir, "--json")
	if code != 0 {
		t.Fatalf("history exited %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(versions) {
		t.Fatalf("%d JSON lines, want %d:\n%s", len(lines), len(versions), out)
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v: %s", i, err, l)
		}
		sum := sha256.Sum256(versions[i])
		want := map[string]any{
			"pid": 42.0, "tid": float64(43 + i), "region": 1.0, "version": float64(i + 1),
			"addr": fmt.Sprintf("0x%x", jitBase), "ip": fmt.Sprintf("0x%x", 0x401000+i),
			"size": float64(codePage), "tsc": float64(2000 + 1000*i), "mono_ns": float64(2000 + 1000*i),
			"cause": "mprotect", "sha256": hex.EncodeToString(sum[:]),
		}
		for k, v := range want {
			if m[k] != v {
				t.Errorf("line %d: %s = %v, want %v", i, k, m[k], v)
			}
		}
	}
	// --addr outside the region selects nothing; --pid of another process too.
	for _, args := range [][]string{{"--addr", "0x1000"}, {"--pid", "7"}} {
		_, out, _ := ptjitIn(t, append([]string{"history", "-i", dir, "--json"}, args...)...)
		if strings.TrimSpace(out) != "" {
			t.Errorf("history %v printed %q, want nothing", args, out)
		}
	}
}

// objdumpAt disassembles b as if loaded at addr with objdump: the
// independent reference for show.
func objdumpAt(t *testing.T, b []byte, addr uint64) []string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "code.bin")
	os.WriteFile(f, b, 0o644)
	out, err := exec.Command("objdump", "-D", "-b", "binary", "-m", "i386:x86-64", fmt.Sprintf("--adjust-vma=%#x", addr), f).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	var addrs []string
	re := regexp.MustCompile(`^\s+([0-9a-f]+):\t`)
	for _, l := range strings.Split(string(out), "\n") {
		if m := re.FindStringSubmatch(l); m != nil && strings.Count(l, "\t") >= 2 {
			addrs = append(addrs, "0x"+m[1])
		}
	}
	return addrs
}

func TestShow(t *testing.T) {
	dir, versions := staticKeyRecording(t)
	site := fmt.Sprintf("%#x", jitBase+siteOff)

	// --version 2 shows the jmp, --at the TSC of version 3 the nop again,
	// and the default is the latest version.
	for _, tc := range []struct {
		args []string
		v    int
		want string
	}{
		{[]string{"--version", "2"}, 2, "jmp"},
		{[]string{"--at", "tsc:3500"}, 2, "jmp"},
		{[]string{"--at", "tsc:4000"}, 3, "nop"},
		{nil, 3, "nop"},
		{[]string{"--version", "1"}, 1, "nop"},
	} {
		code, out, errs := ptjitIn(t, append([]string{"show", "-i", dir, site, "-n", "3"}, tc.args...)...)
		if code != 0 {
			t.Fatalf("show %v: exit %d: %s", tc.args, code, errs)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.Contains(lines[0], fmt.Sprintf("region 1 version %d ", tc.v)) {
			t.Errorf("show %v: header %q, want version %d", tc.args, lines[0], tc.v)
		}
		if len(lines) != 4 || !strings.Contains(lines[1], tc.want) {
			t.Errorf("show %v: got\n%s\nwant 3 instructions, the first a %s", tc.args, out, tc.want)
		}
	}

	// The instruction boundaries match objdump's on the same bytes.
	_, out, _ := ptjitIn(t, "show", "-i", dir, fmt.Sprintf("%#x", jitBase), "--version", "2", "-n", "100000")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		got = append(got, strings.TrimLeft(strings.SplitN(l, ":", 2)[0], " "))
	}
	want := objdumpAt(t, versions[1], jitBase)
	if len(got) != len(want) {
		t.Fatalf("show: %d instructions, objdump %d", len(got), len(want))
	}
	for i := range want {
		if mustParse(got[i]) != mustParse(want[i]) {
			t.Fatalf("instruction %d at %s, objdump says %s", i, got[i], want[i])
		}
	}

	// --raw prints the bytes of the version from ADDR.
	_, out, _ = ptjitIn(t, "show", "-i", dir, site, "--version", "2", "--raw", "--len", "5")
	if !strings.Contains(out, "e9 1b 00 00 00") {
		t.Errorf("show --raw: %q, want the jmp bytes e9 1b 00 00 00", out)
	}
}

func mustParse(s string) uint64 {
	v, err := parseAddr("x", s)
	if err != nil {
		panic(err)
	}
	return v
}

func TestDiffStaticKey(t *testing.T) {
	dir, _ := staticKeyRecording(t)
	site := jitBase + siteOff
	code, out, errs := ptjitIn(t, "diff", "-i", dir, fmt.Sprintf("%#x", jitBase))
	if code != 0 {
		t.Fatalf("diff exited %d: %s", code, errs)
	}
	want1 := fmt.Sprintf("%#x: nop5 → jmp 0x%x", site, site+0x20)
	want2 := fmt.Sprintf("%#x: jmp 0x%x → nop5", site, site+0x20)
	if !strings.Contains(out, "version 1 → 2") || !strings.Contains(out, want1) || !strings.Contains(out, "version 2 → 3") || !strings.Contains(out, want2) {
		t.Errorf("diff output:\n%s\nwant %q and %q", out, want1, want2)
	}
	// Versions 1 and 3 are identical.
	_, out, _ = ptjitIn(t, "diff", "-i", dir, fmt.Sprintf("%#x", jitBase), "1", "3")
	if !strings.Contains(out, "no change") {
		t.Errorf("diff 1 3: %q, want no change", out)
	}
}

func TestQueryErrors(t *testing.T) {
	dir, _ := staticKeyRecording(t)
	empty := t.TempDir()
	corrupt := t.TempDir()
	os.WriteFile(filepath.Join(corrupt, "code.db"), bytes.Repeat([]byte("garbage!"), 512), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"history", "-i", empty}, "no such file"},
		{[]string{"history", "-i", corrupt}, "not a ptjit code.db"},
		{[]string{"show", "-i", corrupt, "0x1000"}, "not a ptjit code.db"},
		{[]string{"show", "-i", dir, "zzz"}, `ADDR "zzz"`},
		{[]string{"show", "-i", dir, "0x1000"}, "no recorded code version contains 0x1000"},
		{[]string{"show", "-i", dir, fmt.Sprint(jitBase), "--version", "9"}, "has no version 9"},
		{[]string{"show", "-i", dir, fmt.Sprint(jitBase), "--at", "tsc:5"}, "contains 0x7f0000100000 at TSC 5"},
		{[]string{"diff", "-i", dir, fmt.Sprint(jitBase), "1"}, "diff takes ADDR or ADDR V1 V2"},
		{[]string{"diff", "-i", dir, fmt.Sprint(jitBase), "1", "x"}, `version "x"`},
		{[]string{"history", "-i", dir, "--addr", "0xzz"}, `--addr "0xzz"`},
	} {
		code, out, errs := ptjitIn(t, tc.args...)
		if code == 0 {
			t.Errorf("%v: exit 0, output %q", tc.args, out)
			continue
		}
		if !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.HasPrefix(errs, "ptjit: ") {
			t.Errorf("%v: stderr %q, want one line \"ptjit: ...%s...\"", tc.args, errs, tc.want)
		}
	}
}

// TestDecodeOnlyErrors: a decode that met errors and decoded no
// instruction exits 1 with one line saying so; with the right image the
// same trace decodes and exits 0. libipt's synthetic/mid trace, through
// its image at the right base and 16 bytes off.
func TestDecodeOnlyErrors(t *testing.T) {
	dir := testenv.ConformanceDir(t)
	pt := filepath.Join(dir, "synthetic", "mid.pt")
	bin := filepath.Join(dir, "synthetic", "mid.bin")
	code, out, errs := ptjitIn(t, "decode", "--pt", pt, "--raw", bin+":0x400000", "--stat")
	if code != 0 || !strings.Contains(out, "errors: 0") || strings.Contains(out, "instructions: 0\n") {
		t.Fatalf("right image: status %d\n%s%s", code, out, errs)
	}
	code, out, errs = ptjitIn(t, "decode", "--pt", pt, "--raw", bin+":0x400010", "--stat")
	if code != 1 || !strings.Contains(out, "instructions: 0\n") {
		t.Fatalf("wrong image: status %d, want 1\n%s%s", code, out, errs)
	}
	if want := "ptjit: decode: no instruction decoded, 159 decode errors (see the output)\n"; errs != want {
		t.Errorf("wrong image: stderr %q, want %q", errs, want)
	}
	// Not a trace at all: the bytes of the image, which hold no PSB.
	for _, format := range []string{"--stat", "--calls", "--json"} {
		code, out, errs = ptjitIn(t, "decode", "--pt", bin, "--raw", bin+":0x400000", format)
		want := "ptjit: decode: " + bin + ": no PSB in 65552 bytes of trace: nothing to decode (not Intel PT?)\n"
		if code != 1 || out != "" || errs != want {
			t.Errorf("no PSB, %s: status %d, stdout %q, stderr %q; want 1, nothing, %q", format, code, out, errs, want)
		}
	}
}

// TestHistoryFilesJSON: history --files --json lists the file-backed
// executable mappings (kind "file") as the text form does: the program
// itself among them, each with its path, and as many as the text lists.
func TestHistoryFilesJSON(t *testing.T) {
	e2eSetup(t)
	dir := filepath.Join(t.TempDir(), "rec")
	prog := e2eProg("jit-threads")
	if r := e2ePtjit(t, nil, "run", "-q", "--pt=off", "-o", dir, "--", prog); r.code != 0 {
		t.Fatalf("run: exit %d: %s", r.code, r.stderr)
	}
	j := e2ePtjit(t, nil, "history", "-i", dir, "--files", "--json")
	txt := e2ePtjit(t, nil, "history", "-i", dir, "--files")
	if j.code != 0 || txt.code != 0 {
		t.Fatalf("history: exit %d / %d: %s%s", j.code, txt.code, j.stderr, txt.stderr)
	}
	files, self := 0, false
	for _, l := range strings.Split(strings.TrimSpace(j.stdout), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if m["kind"] == "file" {
			files++
			self = self || m["path"] == prog
		}
	}
	want := 0
	for _, l := range strings.Split(txt.stdout, "\n") {
		if strings.Contains(l, " (0x") && strings.Contains(l, "/") {
			want++
		}
	}
	if files == 0 || files != want || !self {
		t.Errorf("--json: %d file mappings (the program among them: %v); the text lists %d:\n%s", files, self, want, txt.stdout)
	}
}
