package decode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImageOverlayAndVersions(t *testing.T) {
	dir := t.TempDir()
	f1 := filepath.Join(dir, "a.bin")
	f2 := filepath.Join(dir, "b.bin")
	if err := os.WriteFile(f1, []byte("AAAAAAAAAAAAAAAA"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f2, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := NewImage()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(img.AddFile(f1, 0, 0, 0x1000)) // 0x1000-0x1010 "A..."
	must(img.AddFile(f2, 2, 4, 0x1004)) // 0x1004-0x1008 "2345" overlays
	must(img.AddVersion(0x1008, []byte("vv"), 100, 200, "jit v1"))
	must(img.AddVersion(0x1008, []byte("ww"), 200, AlwaysValid, "jit v2"))

	tests := []struct {
		ip, tsc uint64
		want    string // first bytes read, "" = nomap
		tag     string
	}{
		{0x1000, 0, "AAAA2345AAAAAAAA", f1},
		{0x1004, 0, "2345AAAAAAAA", f2},
		{0x1008, 0, "AAAAAAAA", f1},
		{0x1008, 150, "vvAAAAAA", "jit v1"},
		{0x1008, 199, "vvAAAAAA", "jit v1"},
		{0x1008, 200, "wwAAAAAA", "jit v2"},
		{0x100f, 0, "A", f1},
		{0x1010, 0, "", ""},
		{0xfff, 0, "", ""},
	}
	for _, tt := range tests {
		var buf [16]byte
		n, s := img.Read(buf[:], tt.ip, tt.tsc)
		got := string(buf[:n])
		if got != tt.want || (s == nil) != (tt.want == "") || (s != nil && s.Tag != tt.tag) {
			tag := ""
			if s != nil {
				tag = s.Tag
			}
			t.Errorf("Read(%#x @%d) = %q from %q, want %q from %q", tt.ip, tt.tsc, got, tag, tt.want, tt.tag)
		}
	}
}

func TestImageErrors(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "x.bin")
	if err := os.WriteFile(f, []byte("12345678"), 0o644); err != nil {
		t.Fatal(err)
	}
	img := NewImage()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{img.AddFile(filepath.Join(dir, "missing"), 0, 0, 0), "no such file"},
		{img.AddFile(f, 8, 0, 0), "beyond end of file"},
		{img.AddFile(f, 4, 5, 0), "beyond end of file"},
		{img.AddVersion(0x10, []byte{1}, 5, 5, "v"), "empty validity range"},
		{img.AddVersion(0x10, nil, 5, 6, "v"), "empty section"},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("error %v, want one containing %q", tt.err, tt.want)
		}
	}
	if err := img.AddVersion(0x10, []byte{1, 2}, 10, 20, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := img.AddVersion(0x11, []byte{1}, 15, 30, "v2"); err == nil || !strings.Contains(err.Error(), "overlaps") {
		t.Errorf("overlapping version accepted: %v", err)
	}
}
