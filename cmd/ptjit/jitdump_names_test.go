package main

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// jitdumpLoad is a JIT_CODE_LOAD record of a jitdump, as this test's own
// reader (below, from perf's jitdump-specification.txt) finds it.
type jitdumpLoad struct {
	addr uint64
	name string
	code []byte
}

// readJitdumpLoads parses a jitdump file: a header whose total_size (at
// byte 8) says where the records start, then records of {id u32, size
// u32, timestamp u64}, a JIT_CODE_LOAD (id 0) being {pid u32, tid u32,
// vma u64, code_addr u64, code_size u64, code_index u64, name\0, code}.
func readJitdumpLoads(t *testing.T, path string) []jitdumpLoad {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if len(b) < 40 || le.Uint32(b) != 0x4A695444 {
		t.Fatalf("%s: not a jitdump", path)
	}
	var out []jitdumpLoad
	for off := int(le.Uint32(b[8:])); off+16 <= len(b); {
		id, size := le.Uint32(b[off:]), int(le.Uint32(b[off+4:]))
		if size < 16 || off+size > len(b) {
			t.Fatalf("%s: record at %#x: size %d", path, off, size)
		}
		if id == 0 {
			r := b[off : off+size]
			codeSize := int(le.Uint64(r[40:]))
			name := r[56 : size-codeSize-1]
			out = append(out, jitdumpLoad{addr: le.Uint64(r[32:]), name: string(name), code: r[size-codeSize:]})
		}
		off += size
	}
	return out
}

// TestNodeJitdumpNames runs testdata/names.js under node --perf-prof (V8
// writes ./jit-PID.dump: a code load per function it compiles, with the
// code's bytes) with --always-sparkplug, under --pt=soft
// --soft-filter=jit, and checks the names against the jitdump read here:
// decode --calls enters each of fooAdd's and barMul's baseline code 200
// times (names.js calls each 200 times) under the name V8 gave it, every
// version it names there holds exactly the bytes of the load of that name
// (show --raw), --summary counts 200 calls of each (a call out of the
// traced code to a builtin returns into the caller, not a new call), and
// --folded lists both names.
func TestNodeJitdumpNames(t *testing.T) {
	e2eSetup(t)
	testenv.Tool(t, "node", "nodejs")
	root, _ := filepath.Abs("../..")
	script := filepath.Join(root, "testdata", "names.js")
	cwd := t.TempDir() // V8 writes jit-PID.dump into its working directory
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2eRun(t, []string{e2e.ptjit, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", dir, "--",
		"node", "--perf-prof", "--always-sparkplug", "--no-logfile-per-isolate", "--logfile=" + filepath.Join(cwd, "v8.log"), script}, nil, "", cwd)
	if r.code != 0 || r.stdout != "node result 81000\n" {
		t.Fatalf("run: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	dumps, _ := filepath.Glob(filepath.Join(cwd, "jit-*.dump"))
	if len(dumps) != 1 {
		t.Fatalf("node wrote jitdumps %v, want one", dumps)
	}
	loads := readJitdumpLoads(t, dumps[0])

	calls := e2ePtjit(t, nil, "decode", "-i", dir, "--calls")
	if calls.code != 0 {
		t.Fatalf("decode --calls: exit %d\n%s", calls.code, calls.stderr)
	}
	summary := e2ePtjit(t, nil, "decode", "-i", dir, "--summary")
	if summary.code != 0 {
		t.Fatalf("decode --summary: exit %d\n%s", summary.code, summary.stderr)
	}
	folded := e2ePtjit(t, nil, "decode", "-i", dir, "--folded")
	if folded.code != 0 {
		t.Fatalf("decode --folded: exit %d\n%s", folded.code, folded.stderr)
	}
	for _, fn := range []string{"fooAdd", "barMul"} {
		if !regexp.MustCompile(`(?m);JS:\^` + fn + ` \S+names\.js:\d+:\d+ [1-9]\d*$`).MatchString(folded.stdout) {
			t.Errorf("decode --folded has no stack ending in %s", fn)
		}
		byName := map[string]jitdumpLoad{}
		for _, l := range loads {
			if strings.HasPrefix(l.name, "JS:^"+fn+" ") {
				byName[l.name] = l
			}
		}
		if len(byName) == 0 {
			t.Errorf("the jitdump has no baseline code load for %s", fn)
			continue
		}
		re := regexp.MustCompile(`(?m)-> (JS:\^` + fn + ` \S+names\.js:\d+:\d+) \[region (\d+) v(\d+)\]$`)
		entries := re.FindAllStringSubmatch(calls.stdout, -1)
		if len(entries) != 200 {
			t.Errorf("decode --calls enters %s's baseline code %d times; names.js calls it 200 times", fn, len(entries))
		}
		checked := map[string]bool{}
		for _, m := range entries {
			key := m[1] + " " + m[2] + "." + m[3]
			if checked[key] {
				continue
			}
			checked[key] = true
			l, ok := byName[m[1]]
			if !ok {
				t.Errorf("decode --calls names %q, which the jitdump has no load of", m[1])
				continue
			}
			show := e2ePtjit(t, nil, "show", "-i", dir, "--raw", "--region", m[2], "--version", m[3],
				"--len", strconv.Itoa(len(l.code)), fmt.Sprintf("%#x", l.addr))
			var got []byte
			for _, line := range strings.Split(show.stdout, "\n") {
				if _, hexs, ok := strings.Cut(line, ": "); ok && strings.HasPrefix(line, "0x") {
					b, err := hex.DecodeString(strings.ReplaceAll(hexs, " ", ""))
					if err != nil {
						t.Fatalf("show --raw line %q: %v", line, err)
					}
					got = append(got, b...)
				}
			}
			if show.code != 0 || hex.EncodeToString(got) != hex.EncodeToString(l.code) {
				t.Errorf("%s: region %s version %s at %#x holds %x (exit %d %s), the jitdump's load %x", m[1], m[2], m[3], l.addr, got, show.code, show.stderr, l.code)
			}
		}
		sm := regexp.MustCompile(`(?m)^ +(\d+) +(\d+) +[0-9.]+  JS:\^` + fn + ` \S+names\.js:\d+:\d+$`).FindStringSubmatch(summary.stdout)
		if sm == nil {
			t.Errorf("decode --summary has no line for %s\n%s", fn, summary.stdout)
		} else if n, _ := strconv.Atoi(sm[2]); n != 200 {
			t.Errorf("decode --summary: %s called %d times; names.js calls it 200 times", fn, n)
		}
		// fooAdd and barMul call V8 builtins, outside the traced code:
		// tracing that starts again at such a call's return address is
		// the call returning, not another entry into fooAdd+0xNN
		if n := strings.Count(calls.stdout, "-> JS:^"+fn+" "); n != 200 {
			t.Errorf("decode --calls has %d lines entering %s (at any offset); names.js calls it 200 times", n, fn)
		}
	}
}
