package decode

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// codeOf is a CodeSource whose version k is 16 bytes holding k (its
// truth), counting reads; a negative key fails.
type codeOf struct {
	mu    sync.Mutex
	reads int
	size  int // 0: 16
}

func (c *codeOf) Code(k int64) ([]byte, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	if k < 0 {
		return nil, fmt.Errorf("version %d: damaged", k)
	}
	b := make([]byte, max(c.size, 16))
	binary.LittleEndian.PutUint64(b, uint64(k))
	return b, nil
}

// TestImageLazyVersions: many versions of one address, each valid for
// 10 TSC ticks, read lazily: each lookup gives the version valid then
// (bytes and tag), LookupNext the next one, a version is read once while
// it stays materialised, at most maxLive are kept, and a materialised
// section a caller holds stays whole after it was evicted.
func TestImageLazyVersions(t *testing.T) {
	const n = 5000
	src := &codeOf{}
	img := NewImage()
	img.SetLazyBounds(8, 0)
	// a file-like section elsewhere and one around, as a recording has
	if err := img.AddFileVersion("libc", make([]byte, 64), 0, 0x9000, 0, AlwaysValid); err != nil {
		t.Fatal(err)
	}
	for k := int64(1); k <= n; k++ {
		if err := img.AddLazyVersion(0x1000, 16, uint64(10*k), uint64(10*k+10), fmt.Sprintf("v%d", k), src, k); err != nil {
			t.Fatal(err)
		}
	}
	var first *Section
	for k := int64(1); k <= n; k++ {
		for _, tsc := range []uint64{uint64(10 * k), uint64(10*k + 9)} {
			s := img.Lookup(0x1004, tsc)
			if s == nil || s.Tag != fmt.Sprintf("v%d", k) || binary.LittleEndian.Uint64(s.Data) != uint64(k) || !s.Versioned() {
				t.Fatalf("Lookup(0x1004, %d) = %+v, want v%d", tsc, s, k)
			}
			var buf [4]byte
			if m, ok := s.ReadAt(buf[:], 0x1000); m != 4 || !ok || binary.LittleEndian.Uint32(buf[:]) != uint32(k) {
				t.Fatalf("v%d: ReadAt %d %v %x", k, m, ok, buf)
			}
		}
		if k == 1 {
			first = img.Lookup(0x1000, 10)
		}
	}
	if src.reads != n {
		t.Errorf("%d reads for %d versions looked up twice each in turn, want %d", src.reads, n, n)
	}
	if len(img.lazy.live) != 8 {
		t.Errorf("%d versions kept materialised, want the bound, 8", len(img.lazy.live))
	}
	if binary.LittleEndian.Uint64(first.Data) != 1 {
		t.Errorf("a held section changed after its eviction: %x", first.Data)
	}
	if s := img.Lookup(0x1000, 5); s != nil {
		t.Errorf("before the first version: %s", s.Tag)
	}
	if s := img.Lookup(0x1010, 20); s != nil {
		t.Errorf("past the range: %s", s.Tag)
	}
	if s := img.LookupNext(0x1000, 5); s == nil || s.Tag != "v1" {
		t.Errorf("LookupNext before the first: %v", s)
	}
	if s := img.LookupNext(0x1000, 15); s == nil || s.Tag != "v2" {
		t.Errorf("LookupNext(15): %v", s)
	}
	if s := img.Lookup(0x9010, 1<<40); s == nil || s.Tag != "libc" {
		t.Errorf("the file section: %v", s)
	}
	// an overlapping version, of the same range or another, is refused
	if err := img.AddLazyVersion(0x1000, 16, 15, 16, "x", src, 1); err == nil || !strings.Contains(err.Error(), "overlaps version v1") {
		t.Errorf("same range: %v", err)
	}
	if err := img.AddLazyVersion(0x1008, 0x1000, 100, 101, "y", src, 1); err == nil || !strings.Contains(err.Error(), "overlaps version v10 ") {
		t.Errorf("overlapping range: %v", err)
	}
	// Clones share the versions and read them on their own.
	c := img.Clone()
	if s := c.Lookup(0x1000, 30); s == nil || binary.LittleEndian.Uint64(s.Data) != 3 || s == img.Lookup(0x1000, 30) {
		t.Errorf("clone: %v", s)
	}
	// a version whose bytes cannot be read is a miss, not a guess
	if err := img.AddLazyVersion(0x5000, 16, 0, AlwaysValid, "bad", src, -1); err != nil {
		t.Fatal(err)
	}
	if s := img.Lookup(0x5000, 7); s != nil {
		t.Errorf("an unreadable version looked up: %v", s)
	}
}

// BenchmarkImageManyVersions: looking up each of b.N versions of one
// address at its time (as a decoder running each version once does),
// and, per lookup, the other sections of the image: the cost per lookup
// must not grow with the number of versions.
func BenchmarkImageManyVersions(b *testing.B) {
	for _, n := range []int{2000, 20000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			src := &codeOf{size: 4096}
			img := NewImage()
			for k := 0; k < 64; k++ {
				img.AddFileVersion(fmt.Sprintf("lib%d", k), make([]byte, 4096), 0, 0x7f0000000000+uint64(k)<<20, 0, AlwaysValid)
			}
			for k := int64(1); k <= int64(n); k++ {
				img.AddLazyVersion(0x7e0000000000, 4096, uint64(10*k), uint64(10*k+10), "v", src, k)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				k := uint64(i%n + 1)
				if img.Lookup(0x7e0000000004, 10*k) == nil || img.Lookup(0x7f0000000004+uint64(i%64)<<20, 10*k) == nil {
					b.Fatal("miss")
				}
			}
		})
	}
}
