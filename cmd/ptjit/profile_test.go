package main

import (
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// affineInsns is the length in instructions of testdata's emit_affine
// (jitlib.h: mov, imul, add, ret).
const affineInsns = 4

// TestFoldedSummary records testdata/perfmap-jit (its call log says which
// JIT function it called, in order; its header which code version each
// ran in) and checks decode --folded and --summary against it, with the
// trace unfiltered and with --soft-filter=jit:
//   - every folded line parses strictly ("frames COUNT": frames non-empty,
//     the first "tid T", COUNT a positive integer), the counts sum to
//     --stat's instructions, and the output is the same decoded
//     sequentially and in small parallel windows (the stack carries
//     across chunks);
//   - each function of the log ends a stack, with main below it when the
//     trace is unfiltered;
//   - the summary's total is --stat's, each JIT function has as many
//     calls as the log and affineInsns instructions per call, and the
//     code versions ran as the program says: region R v1 jit_add7 and
//     jit_mul3, v2 jit_sub5 and jit_mul3 (same address, rewritten), a
//     new region's v1 jit_neg.
func TestFoldedSummary(t *testing.T) {
	e2eSetup(t)
	for _, filter := range []string{"off", "jit"} {
		t.Run("filter="+filter, func(t *testing.T) {
			dir, calls, want := recordPerfmapJIT(t, filter)

			folded := e2ePtjit(t, nil, "decode", "-i", dir, "--folded")
			if folded.code != 0 {
				t.Fatalf("decode --folded: exit %d\n%s", folded.code, folded.stderr)
			}
			stacks, _, sum := parseFolded(t, folded.stdout)
			if sum != want {
				t.Errorf("folded counts sum to %d, decode --stat counts %d instructions", sum, want)
			}
			for _, args := range [][]string{{"-j", "1"}, {"-j", "4", "--window", "4096"}} {
				o := e2ePtjit(t, nil, append([]string{"decode", "-i", dir, "--folded"}, args...)...)
				if o.code != 0 || o.stdout != folded.stdout {
					t.Errorf("decode --folded %v: exit %d, output differs from the default's\n%s", args, o.code, o.stderr)
				}
			}
			for name := range calls {
				found := false
				for _, st := range stacks {
					leaf := st[len(st)-1]
					if leaf != name {
						continue
					}
					found = true
					if filter == "off" && !strings.Contains(strings.Join(st, ";"), ";main;") {
						t.Errorf("stack %q: no main below %s", strings.Join(st, ";"), name)
					}
				}
				if !found {
					t.Errorf("no folded stack ends in %s\n%s", name, folded.stdout)
				}
			}

			sum2 := e2ePtjit(t, nil, "decode", "-i", dir, "--summary")
			if sum2.code != 0 {
				t.Fatalf("decode --summary: exit %d\n%s", sum2.code, sum2.stderr)
			}
			head := regexp.MustCompile(`(?m)^== .*: (\d+) instructions, \d+ calls, [0-9.]+ seconds`).FindAllStringSubmatch(sum2.stdout, -1)
			if len(head) != 1 {
				t.Fatalf("summary: want one thread heading\n%s", sum2.stdout)
			}
			if n, _ := strconv.ParseUint(head[0][1], 10, 64); n != want {
				t.Errorf("summary: %d instructions, decode --stat %d", n, want)
			}
			fn := regexp.MustCompile(`(?m)^ +(\d+) +(\d+) +[0-9.]+  (\S+)$`)
			funcs := map[string][2]int{}
			for _, m := range fn.FindAllStringSubmatch(sum2.stdout, -1) {
				i, _ := strconv.Atoi(m[1])
				c, _ := strconv.Atoi(m[2])
				funcs[m[3]] = [2]int{i, c}
			}
			for name, n := range calls {
				if got, want := funcs[name], [2]int{n * affineInsns, n}; got != want {
					t.Errorf("summary: %s: instructions, calls %v, want %v (the program's call log)\n%s", name, got, want, sum2.stdout)
				}
			}
			ver := regexp.MustCompile(`(?m)^ +(\d+)  region (\d+) v(\d+)$`)
			got := map[string]int{}
			regions := map[string]bool{}
			for _, m := range ver.FindAllStringSubmatch(sum2.stdout, -1) {
				n, _ := strconv.Atoi(m[1])
				got["v"+m[3]] += n
				regions[m[2]] = true
			}
			// perfmap-jit's header: v1 runs jit_add7 and jit_mul3, v2
			// jit_sub5 and jit_mul3 at the same addresses, and a region
			// mapped anew runs jit_neg (its v1)
			wantV := map[string]int{"v1": (calls["jit_add7"] + calls["jit_mul3"]/2 + calls["jit_neg"]) * affineInsns,
				"v2": (calls["jit_sub5"] + calls["jit_mul3"]/2) * affineInsns}
			if len(regions) != 2 || got["v1"] != wantV["v1"] || got["v2"] != wantV["v2"] {
				t.Errorf("summary: code versions %v in regions %v, want %v in 2 regions\n%s", got, regions, wantV, sum2.stdout)
			}
		})
	}
}

// parseFolded parses folded stacks strictly: every line "FRAMES COUNT",
// FRAMES ';'-separated non-empty frames, the first "tid T", COUNT a
// positive integer; it returns the stacks, their counts and the counts'
// sum.
func parseFolded(t *testing.T, out string) ([][]string, []uint64, uint64) {
	t.Helper()
	if out == "" || !strings.HasSuffix(out, "\n") {
		t.Fatalf("folded output empty or without a final newline: %q", out)
	}
	var stacks [][]string
	var counts []uint64
	var sum uint64
	tid := regexp.MustCompile(`^tid [1-9][0-9]*$`)
	for i, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		sp := strings.LastIndexByte(l, ' ')
		if sp <= 0 {
			t.Fatalf("folded line %d %q: no count", i+1, l)
		}
		n, err := strconv.ParseUint(l[sp+1:], 10, 64)
		if err != nil || n == 0 || l[sp+1] == '0' || l[sp+1] == '+' {
			t.Fatalf("folded line %d %q: count is not a positive integer", i+1, l)
		}
		frames := strings.Split(l[:sp], ";")
		for _, f := range frames {
			if strings.TrimSpace(f) == "" {
				t.Fatalf("folded line %d %q: empty frame", i+1, l)
			}
		}
		if !tid.MatchString(frames[0]) || len(frames) < 2 {
			t.Fatalf("folded line %d %q: want \"tid T;\" and a frame", i+1, l)
		}
		stacks = append(stacks, frames)
		counts = append(counts, n)
		sum += n
	}
	return stacks, counts, sum
}

// recordPerfmapJIT records testdata/perfmap-jit with --pt=soft and
// --soft-filter=filter and returns the recording, the calls the program
// says it made (name → count, from its "call NAME ADDR RESULT" lines) and
// the instructions decode --stat counts.
func recordPerfmapJIT(t *testing.T, filter string) (dir string, calls map[string]int, insns uint64) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter="+filter, "-o", dir, "--", e2eProg("perfmap-jit"))
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	calls = map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "call" {
			t.Fatalf("program output line %q", l)
		}
		calls[f[1]]++
	}
	stat := e2ePtjit(t, nil, "decode", "-i", dir, "--stat")
	m := regexp.MustCompile(`(?m)^instructions: (\d+)$`).FindStringSubmatch(stat.stdout)
	if stat.code != 0 || m == nil {
		t.Fatalf("decode --stat: exit %d\n%s%s", stat.code, stat.stdout, stat.stderr)
	}
	insns, _ = strconv.ParseUint(m[1], 10, 64)
	return dir, calls, insns
}
