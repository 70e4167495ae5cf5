package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProcMemWrites: a program rewrites its own RX code through
// /proc/self/mem with pwrite, lseek+write and pwritev — no protection
// change, no fault. Every rewrite is a version (cause "procmem") equal to
// the program's own account of its code.
func TestProcMemWrites(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("procmem")
	native := e2eRun(t, []string{prog}, nil, "", "")
	tmp := t.TempDir()
	manifest, dir := filepath.Join(tmp, "manifest"), filepath.Join(tmp, "rec")
	r := e2ePtjit(t, []string{"PTJIT_MANIFEST=" + manifest}, "run", "-q", "--pt=off", "-o", dir, "--", prog)
	if r.code != 0 || r.stdout != native.stdout || native.code != 0 {
		t.Fatalf("under ptjit: exit %d, stdout %q; alone: exit %d, stdout %q; stderr %s", r.code, r.stdout, native.code, native.stdout, r.stderr)
	}
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l) // ADDR SIZE SHA256 CAUSE PID TID
		want = append(want, strings.Join(f[:4], " "))
	}
	h := e2ePtjit(t, nil, "history", "-i", dir, "--json")
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(h.stdout), "\n") {
		var v struct {
			Addr, Cause, SHA256 string
			Size                uint64
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("history line %q: %v", l, err)
		}
		if v.Cause == "exec" { // the vdso
			continue
		}
		got = append(got, strings.Join([]string{v.Addr, jsonNum(v.Size), v.SHA256, v.Cause}, " "))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("history:\n%s\nmanifest:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(want) != 4 {
		t.Fatalf("manifest has %d lines, want 4", len(want))
	}
}

func jsonNum(v uint64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
