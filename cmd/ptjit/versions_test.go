package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// reImm finds the immediate each decoded call of patch-imm's function
// loaded: "[region R vN +0x0]  mov $0xIMM,%eax".
var reImm = regexp.MustCompile(`\[region \d+ v\d+ \+0x0\]\s+mov \$0x([0-9a-f]+),%eax`)

// TestSoftPTVersionsPatchImm: testdata/patch-imm patches its function's
// immediate 2000 times with single 4-byte stores and calls it after each
// (2000 executed versions at one address), recorded under --pt=soft
// --wx=precise --soft-filter=jit. The immediates ptjit decode reads, call
// by call, are the values the program itself wrote (its VALUES file); every
// version in the history matches the program's manifest (address, size,
// sha256 of the page after each store); and code.db costs at most 1 KiB a
// version (a delta per store, not a page: db/delta.go).
func TestSoftPTVersionsPatchImm(t *testing.T) {
	e2eSetup(t)
	const n = 2000
	tmp := t.TempDir()
	dir, vals, manifest := filepath.Join(tmp, "rec"), filepath.Join(tmp, "values"), filepath.Join(tmp, "manifest")
	prog := e2eProg("patch-imm")
	alone := e2eRun(t, []string{prog, strconv.Itoa(n)}, nil, "", "")
	if alone.code != 0 {
		t.Fatalf("alone: exit %d: %s", alone.code, alone.stderr)
	}
	r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + manifest}, "run", "-q", "--pt=soft", "--wx=precise", "--soft-filter=jit", "-o", dir, "--",
		prog, strconv.Itoa(n), vals)
	if r.code != 0 || r.stdout != alone.stdout {
		t.Fatalf("under ptjit: exit %d, %q (alone %q)\n%s", r.code, r.stdout, alone.stdout, r.stderr)
	}
	e2eCheckMessages(t, r.stderr)
	raw, err := os.ReadFile(vals)
	if err != nil || len(raw) != 4*n {
		t.Fatalf("values file: %d bytes, err %v (want %d)", len(raw), err, 4*n)
	}
	want := make([]uint32, n)
	for i := range want {
		want[i] = binary.LittleEndian.Uint32(raw[4*i:])
	}

	e2eCompare(t, e2eReadManifest(t, manifest), e2eHistory(t, dir), false)

	for _, jobs := range []string{"1", "2"} {
		d := e2ePtjit(t, nil, "decode", "-i", dir, "-j", jobs)
		if d.code != 0 {
			t.Fatalf("decode -j %s: exit %d: %s", jobs, d.code, d.stderr)
		}
		var got []uint32
		for _, m := range reImm.FindAllStringSubmatch(d.stdout, -1) {
			v, err := strconv.ParseUint(m[1], 16, 32)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, uint32(v))
		}
		if strings.Contains(d.stdout, "error") || strings.Contains(d.stderr, "error") {
			t.Errorf("decode -j %s reported errors:\n%s", jobs, firstLines(d.stdout+d.stderr, "error", 3))
		}
		if len(got) != n {
			t.Fatalf("decode -j %s: %d calls decoded, the program made %d", jobs, len(got), n)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("decode -j %s: call %d loaded %#x, the program stored %#x", jobs, i+1, got[i], want[i])
			}
		}
	}
	st, err := os.Stat(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	if per := st.Size() / n; per > 1024 {
		t.Errorf("code.db: %d bytes for %d single-store versions, %d a version; want at most 1024", st.Size(), n, per)
	} else {
		t.Logf("code.db: %d bytes for %d versions, %d a version", st.Size(), n, per)
	}
}

// firstLines returns up to n lines of s containing sub.
func firstLines(s, sub string, n int) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) && len(out) < n {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
