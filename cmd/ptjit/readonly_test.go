package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadOnlyRecording records a self-patching program (static keys), copies the recording and
// runs every query on the copy through a read-only bind mount (in a
// private mount namespace, so nothing leaks if the test dies): each must
// answer exactly as on the writable original, and create nothing.
func TestReadOnlyRecording(t *testing.T) {
	e2eSetup(t)
	tmp := t.TempDir()
	orig := filepath.Join(tmp, "rec")
	if r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", orig, "--", e2eProg("static-keys")); r.code != 0 {
		t.Fatalf("ptjit run: status %d\n%s", r.code, r.stderr)
	}
	for _, leftover := range []string{"code.db-wal", "code.db-shm", "code.db-journal"} {
		if _, err := exec.Command("test", "-e", filepath.Join(orig, leftover)).CombinedOutput(); err == nil {
			t.Errorf("a finished recording keeps %s: it should be one code.db", leftover)
		}
	}
	initial := dirDigest(t, orig) // before any query
	hs := e2eHistory(t, orig)
	if d := dirDigest(t, orig); d != initial {
		t.Fatalf("ptjit history left files beside code.db:\n%s\nwas\n%s", d, initial)
	}
	if len(hs) == 0 {
		t.Fatal("no versions recorded")
	}
	// an address with several versions, for show and diff
	count := map[string]int{}
	jit := ""
	for _, h := range hs {
		if count[h.Addr]++; count[h.Addr] == 2 {
			jit = h.Addr
		}
	}
	if jit == "" {
		t.Fatalf("no address with two versions in the history: %v", hs)
	}
	// Two copies: one read through a read-only bind mount of itself (in a
	// private mount namespace, so nothing leaks if the test dies), one in
	// a root-owned 0755 directory read by another user (nobody), with its
	// own copy of ptjit that user can run.
	shared, err := os.MkdirTemp("", "ptjit-ro-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o755)
	ro, other := filepath.Join(shared, "ro"), filepath.Join(shared, "other")
	bin := filepath.Join(shared, "ptjit")
	for _, c := range [][]string{{"-a", orig, ro}, {"-a", orig, other}, {e2e.ptjit, bin}} {
		if out, err := exec.Command("cp", c...).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v\n%s", err, out)
		}
	}
	os.Chmod(bin, 0o755)
	roMount := `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"`
	exportDir := filepath.Join(tmp, "export")
	queries := [][]string{
		{"history"}, {"history", "--json"}, {"history", "--files"}, {"history", "--writes"},
		{"show", jit}, {"show", jit, "--raw"}, {"diff", jit},
		{"decode", "--stat"}, {"decode", "--calls"}, {"decode", "--insn"}, {"dump"},
	}
	for _, q := range queries {
		name := "ptjit " + strings.Join(q, " ")
		want := e2ePtjit(t, nil, append([]string{q[0], "-i", orig}, q[1:]...)...)
		if want.code != 0 {
			t.Fatalf("%s on the original: status %d\n%s", name, want.code, want.stderr)
		}
		if d := dirDigest(t, orig); d != initial {
			t.Fatalf("%s left files beside code.db:\n%s\nwas\n%s", name, d, initial)
		}
		for _, c := range []struct {
			what, dir string
			argv      []string
		}{
			{"a read-only mount", ro, []string{"unshare", "-m", "sh", "-c", roMount, "sh", ro, bin}},
			{"another user's directory", other, []string{"setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", bin}},
		} {
			got := e2eRun(t, append(append(c.argv, q[0], "-i", c.dir), q[1:]...), nil, "", "")
			if got.code != 0 {
				t.Errorf("%s on %s: status %d\n%s", name, c.what, got.code, got.stderr)
				continue
			}
			// (dump names the file it reads)
			if strings.ReplaceAll(got.stdout, c.dir, orig) != want.stdout {
				t.Errorf("%s: %s answers differently from the original", name, c.what)
			}
		}
	}
	// export writes elsewhere; it only reads the recording
	if r := e2eRun(t, []string{"unshare", "-m", "sh", "-c", roMount, "sh", ro, bin, "export", "jitdump", "-i", ro, "-o", exportDir}, nil, "", ""); r.code != 0 {
		t.Errorf("export jitdump from a read-only copy: status %d\n%s", r.code, r.stderr)
	}
	for _, d := range []string{ro, other} {
		if got := dirDigest(t, d); got != initial {
			t.Errorf("queries changed %s:\n%s\nwas\n%s", d, got, initial)
		}
	}
}
