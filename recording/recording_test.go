package recording

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
)

func at(tsc uint64) clock.Stamp { return clock.Stamp{TSC: tsc, MonoNS: int64(tsc)} }

// TestBuildImageVfork builds images from a code.db made here: process 1
// maps a file and JIT code; process 2 is its vfork child (in 1's address
// space from TSC 50 until its exec at TSC 60), then runs code of its own.
func TestBuildImageVfork(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.so")
	if err := os.WriteFile(lib, bytes.Repeat([]byte{0x90}, 0x2000), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := db.Create(filepath.Join(dir, "code.db"), db.Meta{})
	if err != nil {
		t.Fatal(err)
	}
	r.ProcessStart(1, 0, at(1))
	r.Exec(1, "/a", []string{"a"}, at(2))
	fm := r.FileMap(db.FileMapping{PID: 1, TID: 1, Addr: 0x10000, Size: 0x1000, Offset: 0x1000, Path: lib, At: at(10), Cause: "mmap"})
	r.FileMap(db.FileMapping{PID: 1, TID: 1, Addr: 0x30000, Size: 0x1000, Path: filepath.Join(dir, "gone.so"), At: at(10), Cause: "mmap"})
	reg := r.NewRegion(1, 0x20000, db.PageSize, at(20))
	r.AddVersion(db.Version{Region: reg, PID: 1, TID: 1, Addr: 0x20000, Size: db.PageSize, Data: bytes.Repeat([]byte{0xc3}, db.PageSize), At: at(20), Cause: "mprotect"})
	r.ProcessStart(2, 1, at(50)) // vfork
	r.SharesVM(2, 1)
	r.Exec(2, "/b", []string{"b"}, at(60))
	reg2 := r.NewRegion(2, 0x40000, db.PageSize, at(70))
	r.AddVersion(db.Version{Region: reg2, PID: 2, TID: 2, Addr: 0x40000, Size: db.PageSize, Data: bytes.Repeat([]byte{0xcc}, db.PageSize), At: at(70), Cause: "mprotect"})
	r.FileUnmap(fm, at(90))
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	cdb, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cdb.Close()

	var warnings []string
	warn := func(m string) { warnings = append(warnings, m) }
	img1, err := BuildImage(cdb, 1, 0, warn)
	if err != nil {
		t.Fatal(err)
	}
	img2, err := BuildImage(cdb, 2, 0, warn)
	if err != nil {
		t.Fatal(err)
	}
	// The vanished file is reported once per image, through warn.
	if len(warnings) != 2 || !strings.Contains(warnings[0], "gone.so") {
		t.Errorf("warnings %q, want two about gone.so", warnings)
	}

	tests := []struct {
		name string
		pid  int
		ip   uint64
		tsc  uint64
		want string // section tag, "" for none
	}{
		{"file mapped", 1, 0x10010, 10, lib},
		{"file before its mmap", 1, 0x10010, 9, ""},
		{"file after munmap", 1, 0x10010, 90, ""},
		{"version", 1, 0x20010, 100, "region 1 v1"},
		{"version before valid", 1, 0x20010, 19, ""},
		{"vanished file", 1, 0x30000, 20, ""},
		{"vfork child: parent's file", 2, 0x10010, 55, lib},
		{"vfork child: parent's version", 2, 0x20010, 50, "region 1 v1"},
		{"vfork child: before the vfork", 2, 0x20010, 49, ""},
		{"vfork child: after exec", 2, 0x20010, 60, ""},
		{"after exec: own version", 2, 0x40010, 70, "region 2 v1"},
		{"parent: not the child's version", 1, 0x40010, 70, ""},
	}
	for _, tt := range tests {
		img := img1
		if tt.pid == 2 {
			img = img2
		}
		got := ""
		if s := img.Lookup(tt.ip, tt.tsc); s != nil {
			got = s.Tag
		}
		if got != tt.want {
			t.Errorf("%s: pid %d ip %#x tsc %d: section %q, want %q", tt.name, tt.pid, tt.ip, tt.tsc, got, tt.want)
		}
	}
	// The file section holds the mapped part of the file.
	if s := img1.Lookup(0x10010, 10); s != nil && (s.FileOff != 0x1000 || len(s.Data) != 0x1000) {
		t.Errorf("file section: offset %#x, %#x bytes; want 0x1000, 0x1000", s.FileOff, len(s.Data))
	}
}

func TestMappedFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		m    db.FileMapInfo
		want string
		err  string
	}{
		{m: db.FileMapInfo{Path: f, Offset: 2, Size: 4}, want: "2345"},
		{m: db.FileMapInfo{Path: f, Offset: 8, Size: 4096}, want: "89"}, // the rest of the page is not code
		{m: db.FileMapInfo{Path: f, Offset: 10, Size: 1}, err: "beyond the end of the file"},
		{m: db.FileMapInfo{Path: f + "x", Size: 1}, err: "no such file"},
	}
	for _, tt := range tests {
		got, err := mappedFile(map[string][]byte{}, &tt.m)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%+v: err %v, want %q", tt.m, err, tt.err)
			}
			continue
		}
		if err != nil || string(got) != tt.want {
			t.Errorf("%+v = %q, %v; want %q", tt.m, got, err, tt.want)
		}
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "perf.data") {
		t.Errorf("Open of an empty directory: %v", err)
	}
}
