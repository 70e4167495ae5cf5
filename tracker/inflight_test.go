package tracker

import (
	"strings"
	"testing"

	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// TestMaskInFlight: a brk's Sync while other threads' calls are in
// flight records only what brk did, not their pages.
func TestMaskInFlight(t *testing.T) {
	const (
		a = 0x10000 // tracked RX page (an earlier mprotect)
		b = 0x11000 // made RX by another thread's mprotect in flight
		c = 0x20000 // tracked RX page another thread's munmap in flight removed
		d = 0x30000 // fresh RX memory of another thread's mmap in flight
		h = 0x40000 // the heap, made executable by brk itself
	)
	maps, err := snapshot.ParseMaps("maps", []byte(`00010000-00012000 r-xp 00000000 00:00 0
00030000-00031000 r-xp 00000000 00:00 0
00040000-00041000 rwxp 00000000 00:00 0 [heap]
`))
	if err != nil {
		t.Fatal(err)
	}
	rx := unix.PROT_READ | unix.PROT_EXEC
	setup := func() (*Space, *logSink) {
		l := &logSink{}
		s := NewSpace(l)
		s.Map(a, a+pageSize, rx, nil, why("mmap"))
		s.Map(c, c+pageSize, rx, nil, why("mmap"))
		l.log = nil
		return s, l
	}
	for _, tc := range []struct {
		name string
		f    inFlight
		want []string
	}{
		{"nothing in flight", inFlight{}, []string{
			// b merged into the mapping with a is taken for brk's, c is
			// ended by brk, d and the heap are brk's
			"V- 4",
			"R+ 5 0x11000-0x12000", "V+ 6 r5 0x11000-0x12000 r-x brk",
			"R+ 7 0x30000-0x31000", "V+ 8 r7 0x30000-0x31000 r-x brk",
			"R+ 9 0x40000-0x41000", "V+ 10 r9 0x40000-0x41000 rwx brk",
			"R- 3"}},
		{"mprotect, munmap and mmap in flight", inFlight{busy: []ival{{b, b + pageSize}, {c, c + pageSize}}, fresh: true}, []string{
			"R+ 5 0x40000-0x41000", "V+ 6 r5 0x40000-0x41000 rwx brk"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, l := setup()
			own := func(m snapshot.Mapping) bool { return m.Path == "[heap]" }
			s.Sync(s.maskInFlight(maps, tc.f, own), nil, why("brk"))
			if got := strings.Join(l.log, "\n"); got != strings.Join(tc.want, "\n") {
				t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(tc.want, "\n"))
			}
			checkSpace(t, s)
		})
	}
}

func TestMergeIvals(t *testing.T) {
	got := mergeIvals([]ival{{5, 7}, {1, 3}, {3, 4}, {6, 9}, {10, 10}})
	want := []ival{{1, 4}, {5, 9}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %v, want %v", got, want)
	}
}
