package decode

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
)

// End to end against an independent truth: record test programs with
// ptjit run --pt=soft (which single-steps every thread, writes the PT a CPU
// would and, with --ground-truth, every executed address), then check that
// ptjit decode -i reproduces exactly the executed instructions of every
// thread — through self-modifying code (smc), static-key patching
// (static-keys) and several JIT threads (jit-threads).
func TestDecodeRecordingMatchesGroundTruth(t *testing.T) {
	if testing.Short() {
		t.Skip("records programs under single-stepping")
	}
	wd, _ := os.Getwd()
	root := filepath.Dir(wd)
	progs := []string{"smc", "static-keys", "jit-threads"}
	bin := testenv.TestPrograms(t) // a missing program fails, never skips
	tmp := t.TempDir()
	ptjit := filepath.Join(tmp, "ptjit")
	if out, err := exec.Command("go", "build", "-o", ptjit, filepath.Join(root, "cmd", "ptjit")).CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/ptjit: %v\n%s", err, out)
	}
	for _, p := range progs {
		t.Run(p, func(t *testing.T) {
			dir := filepath.Join(tmp, "rec-"+p)
			gt := filepath.Join(tmp, p+".truth")
			run := exec.Command(ptjit, "run", "-q", "--pt=soft", "--ground-truth", gt, "-o", dir, "--", filepath.Join(bin, p))
			if out, err := run.CombinedOutput(); err != nil {
				t.Fatalf("ptjit run: %v\n%s", err, out)
			}
			want := map[int][]uint64{}
			f, err := os.Open(gt)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				tid, ip, ok := strings.Cut(sc.Text(), " ")
				n, err1 := strconv.Atoi(tid)
				v, err2 := strconv.ParseUint(strings.TrimPrefix(ip, "0x"), 16, 64)
				if !ok || err1 != nil || err2 != nil {
					t.Fatalf("bad ground-truth line %q", sc.Text())
				}
				want[n] = append(want[n], v)
			}
			f.Close()
			for _, jobs := range []string{"1", "2"} {
				out, err := exec.Command(ptjit, "decode", "-i", dir, "--json", "-j", jobs).Output()
				if err != nil {
					t.Fatalf("ptjit decode: %v", err)
				}
				got := map[int][]uint64{}
				cur := -1
				for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
					var rec struct {
						Kind  string `json:"kind"`
						TID   int    `json:"tid"`
						IP    string `json:"ip"`
						Error string `json:"error"`
					}
					if err := json.Unmarshal([]byte(line), &rec); err != nil {
						t.Fatalf("bad JSON line %q: %v", line, err)
					}
					switch rec.Kind {
					case "trace":
						cur = rec.TID
					case "insn":
						v, _ := strconv.ParseUint(strings.TrimPrefix(rec.IP, "0x"), 16, 64)
						got[cur] = append(got[cur], v)
					case "error", "resync error":
						t.Errorf("-j %s: decode error: %s", jobs, line)
					}
				}
				for tid, w := range want {
					if d := diffIPs(got[tid], w); d != "" {
						t.Errorf("-j %s: thread %d: decoded vs executed: %s", jobs, tid, d)
					}
				}
				if len(got) != len(want) {
					t.Errorf("-j %s: decoded %d threads, %d ran", jobs, len(got), len(want))
				}
				// --stat runs on blocks (the block cache, keyed by
				// code version): it must count exactly the
				// instructions that ran, with no error.
				out, err = exec.Command(ptjit, "decode", "-i", dir, "--stat", "-j", jobs).Output()
				if err != nil {
					t.Fatalf("ptjit decode --stat: %v", err)
				}
				ran := 0
				for _, w := range want {
					ran += len(w)
				}
				if wantStat := fmt.Sprintf("instructions: %d\nevents: ", ran); !strings.HasPrefix(string(out), wantStat) || !strings.Contains(string(out), "\nerrors: 0\n") {
					t.Errorf("-j %s: --stat says\n%s\nwant %d instructions, 0 errors", jobs, out, ran)
				}
			}
		})
	}
}

func diffIPs(a, b []uint64) string {
	for i := 0; i < len(a) || i < len(b); i++ {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			get := func(s []uint64) string {
				if i < len(s) {
					return fmt.Sprintf("%#x", s[i])
				}
				return "<end>"
			}
			return fmt.Sprintf("instruction %d: %s vs %s (lengths %d, %d)", i, get(a), get(b), len(a), len(b))
		}
	}
	return ""
}
