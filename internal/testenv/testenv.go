// Package testenv holds helpers that several packages' tests share: where
// to find system files the tests read. It imports only the standard
// library.
package testenv

import (
	"debug/elf"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SystemLibc finds the libc.so.6 that /bin/true loads; it skips the test
// when there is none.
func SystemLibc(t testing.TB) string {
	t.Helper()
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	if out, err := exec.Command("ldd", "/bin/true").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) >= 3 && f[0] == "libc.so.6" && f[1] == "=>" {
				path = f[2]
			}
		}
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Skipf("no libc.so.6: %v", err)
	}
	return real
}

// TextSection returns the bytes and address of the .text section of the
// ELF file at path, or fails the test.
func TextSection(tb testing.TB, path string) ([]byte, uint64) {
	tb.Helper()
	f, err := elf.Open(path)
	if err != nil {
		tb.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	s := f.Section(".text")
	if s == nil {
		tb.Fatalf("%s: no .text", path)
	}
	data, err := s.Data()
	if err != nil {
		tb.Fatalf("%s: read .text: %v", path, err)
	}
	return data, s.Addr
}
