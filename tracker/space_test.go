package tracker

import (
	"fmt"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// logSink records the state machine's decisions as text lines:
//
//	R+ 1 0x1000-0x2000     new region 1
//	R- 1                   region 1 unmapped
//	V+ 2 r1 0x1000-0x2000 r-x mmap
//	V- 2
//	F+ 3 0x1000-0x2000 r-x /bin/x@0x0 mmap
//	F- 3
//
// A split version (SplitVersion) logs like any other; splits counts them
// and read counts the bytes AddVersion would read from the program.
type logSink struct {
	next   int64
	log    []string
	splits []string // "ID from FROM@ADDR"
	read   uint64
}

// why is a Change with cause and no stamp (the log shows causes only).
func why(cause string) Change { return Change{Cause: cause} }

func (l *logSink) id() int64 { l.next++; return l.next }

func (l *logSink) NewRegion(s, e uint64, _ Change) int64 {
	id := l.id()
	l.log = append(l.log, fmt.Sprintf("R+ %d %#x-%#x", id, s, e))
	return id
}
func (l *logSink) EndRegion(id int64, _ Change) { l.log = append(l.log, fmt.Sprintf("R- %d", id)) }
func (l *logSink) AddVersion(r int64, s, e uint64, prot int, c Change) int64 {
	id := l.id()
	l.log = append(l.log, fmt.Sprintf("V+ %d r%d %#x-%#x %s %s", id, r, s, e, protString(prot), c.Cause))
	l.read += e - s
	return id
}
func (l *logSink) SplitVersion(r, from int64, fromStart, s, e uint64, prot int, c Change) int64 {
	id := l.id()
	l.log = append(l.log, fmt.Sprintf("V+ %d r%d %#x-%#x %s %s", id, r, s, e, protString(prot), c.Cause))
	l.splits = append(l.splits, fmt.Sprintf("%d from %d@%#x", id, from, fromStart))
	return id
}
func (l *logSink) EndVersion(id int64, inexact bool, _ Change) {
	if inexact {
		l.log = append(l.log, fmt.Sprintf("V- %d inexact", id))
		return
	}
	l.log = append(l.log, fmt.Sprintf("V- %d", id))
}
func (l *logSink) AddFile(s, e uint64, prot int, f FileInfo, c Change) int64 {
	id := l.id()
	l.log = append(l.log, fmt.Sprintf("F+ %d %#x-%#x %s %s@%#x %s", id, s, e, protString(prot), f.Path, f.Offset, c.Cause))
	return id
}
func (l *logSink) EndFile(id int64, _ Change) { l.log = append(l.log, fmt.Sprintf("F- %d", id)) }

const (
	rx  = unix.PROT_READ | unix.PROT_EXEC
	rw  = unix.PROT_READ | unix.PROT_WRITE
	rwx = rx | unix.PROT_WRITE
	pg  = 0x1000
)

// step is one operation on a Space and the records it must produce.
type step struct {
	do   func(s *Space)
	want []string
}

func mmap(a, b uint64, prot int) func(*Space) {
	return func(s *Space) { s.Map(a, b, prot, nil, why("mmap")) }
}
func mmapFile(a, b uint64, path string, off uint64) func(*Space) {
	return func(s *Space) { s.Map(a, b, rx, &FileInfo{Path: path, Offset: off}, why("mmap")) }
}
func mprotect(a, b uint64, prot int) func(*Space) {
	return func(s *Space) { s.Protect(a, b, prot, why("mprotect")) }
}
func munmap(a, b uint64) func(*Space) { return func(s *Space) { s.Unmap(a, b, why("munmap")) } }
func mremap(old, oldSize, newSize, flags, to uint64) func(*Space) {
	return func(s *Space) { s.Remap(old, oldSize, newSize, flags, to, why("mremap")) }
}
func madvise(a, b uint64) func(*Space) {
	return func(s *Space) { s.Refresh(a, b, true, why("madvise")) }
}

func TestSpace(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
		final string // pieces after the last step
	}{
		{"uBPF: 677 bytes rounded to a page, RW then RX", []step{
			{mmap(0x10000, 0x10000+pg, rw), nil},
			{mprotect(0x10000, 0x11000, rx), []string{"R+ 1 0x10000-0x11000", "V+ 2 r1 0x10000-0x11000 r-x mprotect"}},
		}, "0x10000-0x11000 r-x V2"},
		{"RX→RW→RX keeps the region, numbers versions", []step{
			{mmap(0x10000, 0x12000, rx), []string{"R+ 1 0x10000-0x12000", "V+ 2 r1 0x10000-0x12000 r-x mmap"}},
			{mprotect(0x10000, 0x12000, rw), []string{"V- 2"}},
			{mprotect(0x10000, 0x12000, rx), []string{"V+ 3 r1 0x10000-0x12000 r-x mprotect"}},
			{mprotect(0x10000, 0x12000, rx), nil}, // no change: no version
		}, "0x10000-0x12000 r-x V3"},
		{"address reused after munmap is a new region", []step{
			{mmap(0x10000, 0x11000, rx), []string{"R+ 1 0x10000-0x11000", "V+ 2 r1 0x10000-0x11000 r-x mmap"}},
			{munmap(0x10000, 0x11000), []string{"V- 2", "R- 1"}},
			{mmap(0x10000, 0x11000, rx), []string{"R+ 3 0x10000-0x11000", "V+ 4 r3 0x10000-0x11000 r-x mmap"}},
		}, "0x10000-0x11000 r-x V4"},
		{"MAP_FIXED commits inside a PROT_NONE reservation (V8, HotSpot)", []step{
			{mmap(0x100000, 0x200000, unix.PROT_NONE), nil},
			{mmap(0x110000, 0x112000, rwx), []string{"R+ 1 0x110000-0x112000", "V+ 2 r1 0x110000-0x112000 rwx mmap"}},
			{mmap(0x112000, 0x113000, rx), []string{"R+ 3 0x112000-0x113000", "V+ 4 r3 0x112000-0x113000 r-x mmap"}},
			// uncommit: PROT_NONE MAP_FIXED over the first
			{mmap(0x110000, 0x112000, unix.PROT_NONE), []string{"V- 2", "R- 1"}},
		}, "0x112000-0x113000 r-x V4"},
		{"file MAP_FIXED inside an anonymous reservation (node builtins)", []step{
			{mmap(0x100000, 0x200000, unix.PROT_NONE), nil},
			{mmapFile(0x120000, 0x130000, "/usr/bin/node", 0x5000), []string{"F+ 1 0x120000-0x130000 r-x /usr/bin/node@0x5000 mmap"}},
			{munmap(0x100000, 0x200000), []string{"F- 1"}},
		}, ""},
		{"partial mprotect splits a version", []step{
			{mmap(0x10000, 0x14000, rx), []string{"R+ 1 0x10000-0x14000", "V+ 2 r1 0x10000-0x14000 r-x mmap"}},
			{mprotect(0x11000, 0x12000, rw), []string{"V- 2",
				"V+ 3 r1 0x10000-0x11000 r-x mprotect", "V+ 4 r1 0x12000-0x14000 r-x mprotect"}},
			{mprotect(0x11000, 0x12000, rx), []string{"V+ 5 r1 0x11000-0x12000 r-x mprotect"}},
		}, "0x10000-0x11000 r-x V3, 0x11000-0x12000 r-x V5, 0x12000-0x14000 r-x V4"},
		{"partial munmap splits a version; the region lives on", []step{
			{mmap(0x10000, 0x13000, rx), []string{"R+ 1 0x10000-0x13000", "V+ 2 r1 0x10000-0x13000 r-x mmap"}},
			{munmap(0x11000, 0x12000), []string{"V- 2",
				"V+ 3 r1 0x10000-0x11000 r-x munmap", "V+ 4 r1 0x12000-0x13000 r-x munmap"}},
			{munmap(0x10000, 0x11000), []string{"V- 3"}},
			{munmap(0x12000, 0x13000), []string{"V- 4", "R- 1"}},
		}, ""},
		{"munmap of a non-executable part of a region", []step{
			{mmap(0x10000, 0x12000, rx), []string{"R+ 1 0x10000-0x12000", "V+ 2 r1 0x10000-0x12000 r-x mmap"}},
			{mprotect(0x10000, 0x12000, rw), []string{"V- 2"}},
			{munmap(0x10000, 0x12000), []string{"R- 1"}},
		}, ""},
		{"mremap moves code", []step{
			{mmap(0x10000, 0x12000, rx), []string{"R+ 1 0x10000-0x12000", "V+ 2 r1 0x10000-0x12000 r-x mmap"}},
			{mremap(0x10000, 0x2000, 0x2000, 3, 0x50000), []string{"V- 2", "R- 1",
				"R+ 3 0x50000-0x52000", "V+ 4 r3 0x50000-0x52000 r-x mremap"}},
		}, "0x50000-0x52000 r-x V4"},
		{"mremap grows in place and shrinks", []step{
			{mmap(0x10000, 0x11000, rx), []string{"R+ 1 0x10000-0x11000", "V+ 2 r1 0x10000-0x11000 r-x mmap"}},
			{mremap(0x10000, 0x1000, 0x3000, 1, 0x10000), []string{"R+ 3 0x11000-0x13000", "V+ 4 r3 0x11000-0x13000 r-x mremap"}},
			{mremap(0x10000, 0x3000, 0x1000, 0, 0x10000), []string{"V- 4", "R- 3"}},
		}, "0x10000-0x11000 r-x V2"},
		{"mremap grows and moves a file mapping", []step{
			{mmapFile(0x10000, 0x11000, "/lib/x.so", 0x3000), []string{"F+ 1 0x10000-0x11000 r-x /lib/x.so@0x3000 mmap"}},
			{mremap(0x10000, 0x1000, 0x2000, 1, 0x40000), []string{"F- 1",
				"F+ 2 0x40000-0x41000 r-x /lib/x.so@0x3000 mremap", "F+ 3 0x41000-0x42000 r-x /lib/x.so@0x4000 mremap"}},
		}, "0x40000-0x41000 r-x F2, 0x41000-0x42000 r-x F3"},
		{"RWX stays RWX: new version (bytes may have changed)", []step{
			{mmap(0x10000, 0x11000, rwx), []string{"R+ 1 0x10000-0x11000", "V+ 2 r1 0x10000-0x11000 rwx mmap"}},
			{mprotect(0x10000, 0x11000, rwx), []string{"V- 2", "V+ 3 r1 0x10000-0x11000 rwx mprotect"}},
			{mprotect(0x10000, 0x11000, rx), []string{"V- 3", "V+ 4 r1 0x10000-0x11000 r-x mprotect"}},
			{mprotect(0x10000, 0x11000, unix.PROT_EXEC), nil}, // RX→X: same bytes, no version
		}, "0x10000-0x11000 --x V4"},
		{"patched text: file RX→RW→RX becomes a copied version", []step{
			{mmapFile(0x400000, 0x402000, "/bin/prog", 0), []string{"F+ 1 0x400000-0x402000 r-x /bin/prog@0x0 mmap"}},
			{mprotect(0x401000, 0x402000, rw), []string{"F- 1", "F+ 2 0x400000-0x401000 r-x /bin/prog@0x0 mprotect"}},
			{mprotect(0x401000, 0x402000, rx), []string{"R+ 3 0x401000-0x402000", "V+ 4 r3 0x401000-0x402000 r-x mprotect"}},
		}, "0x400000-0x401000 r-x F2, 0x401000-0x402000 r-x V4"},
		{"file RX→RWX is copied", []step{
			{mmapFile(0x400000, 0x401000, "/bin/prog", 0), []string{"F+ 1 0x400000-0x401000 r-x /bin/prog@0x0 mmap"}},
			{mprotect(0x400000, 0x401000, rwx), []string{"F- 1", "R+ 2 0x400000-0x401000", "V+ 3 r2 0x400000-0x401000 rwx mprotect"}},
		}, "0x400000-0x401000 rwx V3"},
		{"mprotect over several pieces and a gap", []step{
			{mmap(0x10000, 0x11000, rx), []string{"R+ 1 0x10000-0x11000", "V+ 2 r1 0x10000-0x11000 r-x mmap"}},
			{mmap(0x12000, 0x13000, rx), []string{"R+ 3 0x12000-0x13000", "V+ 4 r3 0x12000-0x13000 r-x mmap"}},
			{mprotect(0x10000, 0x13000, rx), []string{"R+ 5 0x11000-0x12000", "V+ 6 r5 0x11000-0x12000 r-x mprotect"}},
			{mprotect(0x10000, 0x13000, unix.PROT_NONE), []string{"V- 2", "V- 6", "V- 4"}},
		}, ""},
		{"madvise(DONTNEED) re-snapshots anonymous code, not file code", []step{
			{mmap(0x10000, 0x12000, rx), []string{"R+ 1 0x10000-0x12000", "V+ 2 r1 0x10000-0x12000 r-x mmap"}},
			{mmapFile(0x12000, 0x13000, "/lib/y.so", 0), []string{"F+ 3 0x12000-0x13000 r-x /lib/y.so@0x0 mmap"}},
			{madvise(0x11000, 0x13000), []string{"V- 2", "V+ 4 r1 0x10000-0x11000 r-x madvise", "F- 3",
				"V+ 5 r1 0x11000-0x12000 r-x madvise", "F+ 6 0x12000-0x13000 r-x /lib/y.so@0x0 madvise"}},
		}, "0x10000-0x11000 r-x V4, 0x11000-0x12000 r-x V5, 0x12000-0x13000 r-x F6"},
		{"MAP_FIXED over the middle of code", []step{
			{mmap(0x10000, 0x13000, rx), []string{"R+ 1 0x10000-0x13000", "V+ 2 r1 0x10000-0x13000 r-x mmap"}},
			{mmap(0x11000, 0x12000, rw), []string{"V- 2",
				"V+ 3 r1 0x10000-0x11000 r-x mmap", "V+ 4 r1 0x12000-0x13000 r-x mmap"}},
			{mprotect(0x10000, 0x13000, rx), []string{"R+ 5 0x11000-0x12000", "V+ 6 r5 0x11000-0x12000 r-x mprotect"}},
		}, "0x10000-0x11000 r-x V3, 0x11000-0x12000 r-x V6, 0x12000-0x13000 r-x V4"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &logSink{}
			s := NewSpace(l)
			for i, st := range c.steps {
				l.log = nil
				st.do(s)
				if got, want := strings.Join(l.log, "\n"), strings.Join(st.want, "\n"); got != want {
					t.Fatalf("step %d:\ngot:\n%s\nwant:\n%s", i, got, want)
				}
				checkSpace(t, s)
			}
			if got := describe(s); got != c.final {
				t.Errorf("final pieces:\ngot  %s\nwant %s", got, c.final)
			}
		})
	}
}

// TestSpaceRemovalUnseen: while mprotect calls that add no PROT_EXEC run
// unseen (Space.RemovalUnseen), every call that adds PROT_EXEC records a
// new version of every piece in its range, read again (the bytes may have
// changed, a file mapping's too), and every piece recorded meanwhile ends
// inexact and is read again at its next PROT_EXEC — also after the full
// filter came (RemovalUnseen false), which makes only later pieces exact.
func TestSpaceRemovalUnseen(t *testing.T) {
	seen := func(s *Space) { s.RemovalUnseen = false }
	steps := []step{
		{mmap(0x10000, 0x20000, rw), nil},
		{mprotect(0x10000, 0x20000, rx), []string{"R+ 1 0x10000-0x20000", "V+ 2 r1 0x10000-0x20000 r-x mprotect"}},
		// RX→RW (unseen), written, RX again: the same call as RX→RX
		{mprotect(0x10000, 0x20000, rx), []string{"V- 2 inexact", "V+ 3 r1 0x10000-0x20000 r-x mprotect"}},
		// a part: the rest is split off, still loose
		{mprotect(0x10000, 0x11000, rx), []string{"V- 3 inexact", "V+ 4 r1 0x11000-0x20000 r-x mprotect", "V+ 5 r1 0x10000-0x11000 r-x mprotect"}},
		// patched text made executable again is copied, not a file mapping
		{mmapFile(0x400000, 0x401000, "/bin/prog", 0), []string{"F+ 6 0x400000-0x401000 r-x /bin/prog@0x0 mmap"}},
		{mprotect(0x400000, 0x401000, rx), []string{"F- 6", "R+ 7 0x400000-0x401000", "V+ 8 r7 0x400000-0x401000 r-x mprotect"}},
		// the full filter: later versions end exact, earlier ones not
		// (a loose piece is read again: it may have been written before)
		{seen, nil},
		{mprotect(0x10000, 0x11000, rx), []string{"V- 5 inexact", "V+ 9 r1 0x10000-0x11000 r-x mprotect"}},
		{mprotect(0x10000, 0x11000, rx), nil},
		{mprotect(0x10000, 0x11000, rw), []string{"V- 9"}},
		{mprotect(0x10000, 0x11000, rx), []string{"V+ 10 r1 0x10000-0x11000 r-x mprotect"}},
		{munmap(0x11000, 0x20000), []string{"V- 4 inexact"}},
	}
	l := &logSink{}
	s := NewSpace(l)
	s.RemovalUnseen = true
	for i, st := range steps {
		l.log = nil
		st.do(s)
		if got, want := strings.Join(l.log, "\n"), strings.Join(st.want, "\n"); got != want {
			t.Fatalf("step %d:\ngot:\n%s\nwant:\n%s", i, got, want)
		}
		checkSpace(t, s)
	}
	if got, want := describe(s), "0x10000-0x11000 r-x V10, 0x400000-0x401000 r-x V8"; got != want {
		t.Errorf("final pieces:\ngot  %s\nwant %s", got, want)
	}
}

func describe(s *Space) string {
	var out []string
	for _, p := range s.Pieces() {
		k := "V"
		if p.Kind == File {
			k = "F"
		}
		out = append(out, fmt.Sprintf("%#x-%#x %s %s%d", p.Start, p.End, protString(p.Prot), k, p.ID))
	}
	return strings.Join(out, ", ")
}

// checkSpace verifies the invariants listed in space.go.
func checkSpace(t *testing.T, s *Space) {
	t.Helper()
	ids := map[int64]bool{}
	for i, p := range s.pieces {
		if p.Start >= p.End || p.Start%pg != 0 || p.End%pg != 0 {
			t.Fatalf("piece %d: bad range %#x-%#x", i, p.Start, p.End)
		}
		if i > 0 && s.pieces[i-1].End > p.Start {
			t.Fatalf("pieces %d and %d overlap or are unsorted", i-1, i)
		}
		if !isExec(p.Prot) {
			t.Fatalf("piece %d is not executable", i)
		}
		if ids[p.ID] {
			t.Fatalf("id %d covers two pieces", p.ID)
		}
		ids[p.ID] = true
		if p.Kind == Anon && !s.Mapped(p.Start, p.End) {
			t.Fatalf("piece %#x-%#x outside its live region", p.Start, p.End)
		}
	}
}

// TestSpaceSync: Sync from /proc/PID/maps text (exec, fork, brk).
func TestSpaceSync(t *testing.T) {
	maps := func(text string) []snapshot.Mapping {
		m, err := snapshot.ParseMaps("maps", []byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	l := &logSink{}
	s := NewSpace(l)
	fileOK := func(m snapshot.Mapping) bool { return m.IsFile() }
	s.Sync(maps(`00400000-00401000 r--p 00000000 fd:01 100 /bin/prog
00401000-00403000 r-xp 00001000 fd:01 100 /bin/prog
7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0 [vdso]
7ffd00000000-7ffd00001000 rwxp 00000000 00:00 0
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
`), fileOK, why("exec"))
	want := []string{
		"F+ 1 0x401000-0x403000 r-x /bin/prog@0x1000 exec",
		"R+ 2 0x7ffc00000000-0x7ffc00002000", "V+ 3 r2 0x7ffc00000000-0x7ffc00002000 r-x exec",
		"R+ 4 0x7ffd00000000-0x7ffd00001000", "V+ 5 r4 0x7ffd00000000-0x7ffd00001000 rwx exec",
	}
	if got := strings.Join(l.log, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("exec sync:\ngot:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	// The heap code went away (brk shrank), the vdso is unchanged, part of
	// the text became non-executable.
	l.log = nil
	s.Sync(maps(`00401000-00402000 r-xp 00001000 fd:01 100 /bin/prog
00402000-00403000 rw-p 00002000 fd:01 100 /bin/prog
7ffc00000000-7ffc00002000 r-xp 00000000 00:00 0 [vdso]
`), fileOK, why("brk"))
	want = []string{"F- 1", "F+ 6 0x401000-0x402000 r-x /bin/prog@0x1000 brk", "V- 5", "R- 4"}
	if got := strings.Join(l.log, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("brk sync:\ngot:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	checkSpace(t, s)
	l.log = nil
	s.Clear(why("exit"))
	want = []string{"F- 6", "V- 3", "R- 2"}
	if got := strings.Join(l.log, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("clear:\ngot:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
}
