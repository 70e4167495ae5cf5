package tracker

import (
	"slices"
	"sort"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// This file is the region state machine: what is executable in one address
// space, and which recorded version or file mapping each executable byte
// belongs to. It knows nothing about ptrace; the tracker feeds it the
// effect of each successful syscall (already decoded into page-aligned
// ranges) and it calls a Sink for everything to record. space_test.go
// drives it with tables.
//
// Invariants (checked by check() in the tests):
//   - pieces are sorted, page-aligned, non-empty and do not overlap;
//   - every piece is executable memory; memory that is not executable is
//     not tracked at all (except by region liveness, below);
//   - a version or file mapping covers exactly one piece: when part of a
//     piece changes, the whole version is ended and the parts that stay
//     executable get fresh versions. Where the bytes cannot have changed
//     unseen (keepsBytes) those are split versions (Sink.SplitVersion: a
//     row naming the old version's pages, nothing read), so a one-page
//     change in a large mapping costs the same as in a small one; a large
//     mapping changed in a few places is a few versions, page sized only
//     where pages changed;
//   - an anonymous piece lies inside one live region; a region stays live
//     while any of its pages is mapped (mprotect to non-executable and back
//     keeps the region and numbers the versions 1, 2, 3...).

// Kind tells where the decoder finds a piece's bytes.
type Kind uint8

const (
	// Anon: the bytes were copied into a version (JIT code, vdso, patched
	// text, memfd or deleted files).
	Anon Kind = iota
	// File: the bytes are those of a file the decoder can open by name.
	File
)

// FileInfo identifies the file behind a File piece.
type FileInfo struct {
	Path       string
	Dev, Inode uint64
	Offset     uint64 // file offset of the piece's start
}

// Piece is a maximal range of executable memory recorded as one version or
// one file mapping.
type Piece struct {
	Start, End uint64
	Prot       int // the program's protection (PROT_EXEC always set)
	Kind       Kind
	ID         int64 // version id (Anon) or file mapping id (File)
	Region     int64 // Anon only
	File       FileInfo
	// Anon: the version whose pages hold this piece's bytes (ID, unless
	// the piece was split off a larger one), and where that version
	// starts.
	pages   int64
	pagesAt uint64
	// loose: recorded while the program could take PROT_EXEC away
	// unseen (Space.RemovalUnseen), so its end is inexact.
	loose bool
}

// Change is what every record of one change of the Space carries: its
// cause, and the stop it is stamped with.
type Change struct {
	Cause string
	Stamp
	// data, when set, holds the bytes of the call's range as the call
	// left them (a BPF event's copy): versions inside it are taken from
	// it, not read from the program.
	data *image
	// zero is memory the call made anew and nothing wrote since (an
	// anonymous mmap's, at its exit stop): versions inside it are zeros,
	// recorded without reading the program (which would also populate
	// its pages)
	zero ival
}

// Stamp is the stop a record is made at: its time, the thread and the
// instruction recorded, and the stopped thread whose memory new versions
// are read through.
type Stamp struct {
	At  clock.Stamp
	IP  uint64 // the syscall's or the store's instruction (0: none)
	TID int    // the thread recorded (0: none)
	Via int    // a stopped thread to read through when it is in the space (0: the space's owner)
}

// because returns the Change of cause made at st.
func (st Stamp) because(cause string) Change { return Change{Cause: cause, Stamp: st} }

// because returns c with another cause.
func (c Change) because(cause string) Change {
	c.Cause = cause
	return c
}

// Sink records what the state machine decides, each record stamped with
// the Change that made it. The tracker's sink reads the bytes of new
// versions from the tracee.
type Sink interface {
	NewRegion(start, end uint64, c Change) int64
	EndRegion(id int64, c Change)
	// AddVersion snapshots [start, end) as a new version of region.
	AddVersion(region int64, start, end uint64, prot int, c Change) int64
	// SplitVersion records [start, end) as a new version of region with
	// the bytes that version from (which starts at fromStart, and was
	// recorded by AddVersion) has there, without reading them: the part
	// of a version a change left alone.
	SplitVersion(region, from int64, fromStart, start, end uint64, prot int, c Change) int64
	// EndVersion ends a version; inexact: the program may have taken
	// PROT_EXEC away earlier, unseen, so the end is the last time it was
	// known executable (or the next version's start).
	EndVersion(id int64, inexact bool, c Change)
	AddFile(start, end uint64, prot int, f FileInfo, c Change) int64
	EndFile(id int64, c Change)
}

type region struct {
	id   int64
	live []ival // still-mapped parts
}

type ival struct{ s, e uint64 }

// Space is the executable memory of one address space (one mm: shared by
// the threads of a process and by CLONE_VM children until they exec).
type Space struct {
	sink    Sink
	pieces  []Piece
	regions []*region
	// gen counts the changes of the recorded code (a version or file
	// mapping begun or ended): software PT re-times a thread whose
	// code changed under it since its last step (Gen).
	gen uint64
	// WritesSeen: every change to tracked memory is seen (W^X is
	// enforced), so the parts of a piece a change leaves alone keep
	// their recorded bytes even where the program may write. Without
	// it, writable pieces are read again.
	WritesSeen bool
	// RemovalUnseen: mprotect calls that add no PROT_EXEC run without a
	// stop (the process has not got the filter that stops them all,
	// tracker/doc.go), so a piece may have been made non-executable,
	// written and made executable again unseen. Every piece recorded
	// meanwhile is loose: its end is inexact, and a call that adds
	// PROT_EXEC over it records a new version, read again (the bytes may
	// have changed, a File piece's too), also after RemovalUnseen went
	// false.
	RemovalUnseen bool
	// Seen: ranges where every mprotect is seen even while RemovalUnseen
	// (the process has filters for them: fullprotect_linux_amd64.go); a
	// piece inside them is not loose.
	Seen []ival
}

// unseen reports whether an mprotect of [start, end) may run without a
// stop that takes PROT_EXEC away (RemovalUnseen, outside Seen).
func (s *Space) unseen(start, end uint64) bool {
	return s.RemovalUnseen && !ivalsCover(s.Seen, start, end)
}

// ivalsCover reports whether [lo, hi) lies inside the union of rs (an
// empty range does).
func ivalsCover(rs []ival, lo, hi uint64) bool {
	for lo < hi {
		next := lo
		for _, r := range rs {
			if r.s <= lo && lo < r.e {
				next = max(next, r.e)
			}
		}
		if next == lo {
			return false
		}
		lo = next
	}
	return true
}

// NewSpace returns an empty address space recording into sink.
func NewSpace(sink Sink) *Space { return &Space{sink: sink} }

// Pieces returns a copy of the tracked executable pieces, sorted.
func (s *Space) Pieces() []Piece { return append([]Piece(nil), s.pieces...) }

// Overlaps reports whether [start, end) touches tracked executable memory.
func (s *Space) Overlaps(start, end uint64) bool {
	i := s.first(start)
	return i < len(s.pieces) && s.pieces[i].Start < end
}

// Touches reports whether [start, end) touches tracked executable memory
// or a live region (whose unmapping must be recorded).
func (s *Space) Touches(start, end uint64) bool {
	if s.Overlaps(start, end) {
		return true
	}
	for _, r := range s.regions {
		for _, v := range r.live {
			if v.s < end && start < v.e {
				return true
			}
		}
	}
	return false
}

// Mapped reports whether [start, end) lies inside the mapped part of one
// live region: memory ptjit saw mapped and has seen nothing unmap since.
func (s *Space) Mapped(start, end uint64) bool {
	_, ok := s.liveRegion(start, end)
	return ok
}

// liveRegion returns the live region whose mapped parts cover [start, end).
func (s *Space) liveRegion(start, end uint64) (int64, bool) {
	r, _, ok := s.livePart(start, end)
	if !ok {
		return 0, false
	}
	return r.id, true
}

// livePart returns the live region and its mapped part that cover
// [start, end).
func (s *Space) livePart(start, end uint64) (*region, ival, bool) {
	for _, r := range s.regions {
		for _, v := range r.live {
			if v.s <= start && end <= v.e {
				return r, v, true
			}
		}
	}
	return nil, ival{}, false
}

// AnonOutside reports whether any anonymous piece or live region lies
// outside [lo, hi) (used to skip brk's exit stop when the only copied
// code is the vdso).
func (s *Space) AnonOutside(lo, hi uint64) bool {
	for _, p := range s.pieces {
		if p.Kind == Anon && (p.Start < lo || p.End > hi) {
			return true
		}
	}
	for _, r := range s.regions {
		for _, v := range r.live {
			if v.s < lo || v.e > hi {
				return true
			}
		}
	}
	return false
}

// first returns the index of the first piece ending after addr.
func (s *Space) first(addr uint64) int {
	return sort.Search(len(s.pieces), func(i int) bool { return s.pieces[i].End > addr })
}

func isExec(prot int) bool { return prot&unix.PROT_EXEC != 0 }

// cut removes [start, end) from the tracked pieces. Every piece touched is
// ended; the parts of it outside [start, end) get fresh versions (or file
// mappings) with cause. It returns the removed parts, clipped, with their
// old attributes (File offsets adjusted to the clipped start).
func (s *Space) cut(start, end uint64, c Change) []Piece {
	return s.cutAs(start, end, c)
}

// cutAs is cut with c, whose cause is recorded for the surviving parts.
// Its work is in the pieces it touches: the list is spliced in place.
func (s *Space) cutAs(start, end uint64, c Change) []Piece {
	i := s.first(start)
	j := i
	for j < len(s.pieces) && s.pieces[j].Start < end {
		j++
	}
	if i == j {
		return nil
	}
	old := append([]Piece(nil), s.pieces[i:j]...)
	var keep, removed []Piece
	for _, p := range old {
		s.end(p, c)
		if p.Start < start {
			keep = append(keep, s.readd(p, p.Start, start, c))
		}
		lo, hi := max(p.Start, start), min(p.End, end)
		removed = append(removed, clip(p, lo, hi))
		if p.End > end {
			keep = append(keep, s.readd(p, end, p.End, c))
		}
	}
	s.pieces = slices.Replace(s.pieces, i, j, keep...)
	return removed
}

// keepsBytes reports whether p's bytes are still those recorded: memory
// the program cannot write, or W^X memory, whose every change ptjit sees.
func (s *Space) keepsBytes(p Piece) bool {
	return p.Prot&unix.PROT_WRITE == 0 || s.WritesSeen
}

// clip narrows p to [lo, hi), adjusting the file offset.
func clip(p Piece, lo, hi uint64) Piece {
	if p.Kind == File {
		p.File.Offset += lo - p.Start
	}
	p.Start, p.End = lo, hi
	return p
}

// Gen is the number of changes of the recorded code so far.
func (s *Space) Gen() uint64 { return s.gen }

func (s *Space) end(p Piece, c Change) {
	s.gen++
	if p.Kind == File {
		s.sink.EndFile(p.ID, c)
	} else {
		s.sink.EndVersion(p.ID, p.loose, c)
	}
}

// readd records [lo, hi), a part of piece p that survives a cut, as a
// fresh version or file mapping.
func (s *Space) readd(p Piece, lo, hi uint64, c Change) Piece {
	q := clip(p, lo, hi)
	q.loose = p.loose || s.unseen(q.Start, q.End)
	s.gen++
	switch {
	case p.Kind == File:
		q.ID = s.sink.AddFile(q.Start, q.End, q.Prot, q.File, c)
	case s.keepsBytes(p):
		q.ID = s.sink.SplitVersion(p.Region, p.pages, p.pagesAt, q.Start, q.End, q.Prot, c)
	default:
		q.ID = s.sink.AddVersion(q.Region, q.Start, q.End, q.Prot, c)
	}
	return q
}

// insert adds a piece that overlaps nothing.
func (s *Space) insert(p Piece) {
	i := s.first(p.Start)
	s.pieces = append(s.pieces, Piece{})
	copy(s.pieces[i+1:], s.pieces[i:])
	s.pieces[i] = p
}

// subIval returns rs without [lo, hi).
func subIval(rs []ival, lo, hi uint64) []ival {
	var out []ival
	for _, r := range rs {
		if r.e <= lo || r.s >= hi {
			out = append(out, r)
			continue
		}
		if r.s < lo {
			out = append(out, ival{r.s, lo})
		}
		if r.e > hi {
			out = append(out, ival{hi, r.e})
		}
	}
	return out
}

// unmapRegions subtracts [start, end) from every region and ends the ones
// left with nothing mapped.
func (s *Space) unmapRegions(start, end uint64, c Change) {
	out := s.regions[:0]
	for _, r := range s.regions {
		live := subIval(r.live, start, end)
		r.live = live
		if len(live) == 0 {
			s.sink.EndRegion(r.id, c)
			continue
		}
		out = append(out, r)
	}
	s.regions = out
}

// regionFor returns a live region whose mapped parts cover [start, end),
// creating one for exactly that range if there is none.
func (s *Space) regionFor(start, end uint64, c Change) int64 {
	if id, ok := s.liveRegion(start, end); ok {
		return id
	}
	r := &region{id: s.sink.NewRegion(start, end, c), live: []ival{{start, end}}}
	s.regions = append(s.regions, r)
	return r.id
}

// addAnon records [start, end) as new anonymous executable memory in a new
// region (fresh memory: mmap, shmat, mremap target, exec, fork).
func (s *Space) addAnon(start, end uint64, prot int, c Change) {
	r := &region{id: s.sink.NewRegion(start, end, c), live: []ival{{start, end}}}
	s.regions = append(s.regions, r)
	s.addVersion(r.id, start, end, prot, c)
}

// addVersion records [start, end) of region reg as a new version and
// tracks it.
func (s *Space) addVersion(reg int64, start, end uint64, prot int, c Change) {
	q := Piece{Start: start, End: end, Prot: prot, Kind: Anon, Region: reg, loose: s.unseen(start, end)}
	s.gen++
	q.ID = s.sink.AddVersion(reg, start, end, prot, c)
	q.pages, q.pagesAt = q.ID, start
	s.insert(q)
}

func (s *Space) addFile(start, end uint64, prot int, f FileInfo, c Change) {
	p := Piece{Start: start, End: end, Prot: prot, Kind: File, File: f, loose: s.unseen(start, end)}
	s.gen++
	p.ID = s.sink.AddFile(start, end, prot, f, c)
	s.insert(p)
}

// Unmap: [start, end) is no longer mapped (munmap, shmdt, brk shrinking,
// the old place of a moving mremap).
func (s *Space) Unmap(start, end uint64, c Change) {
	s.cut(start, end, c)
	s.unmapRegions(start, end, c)
}

// Map: fresh memory now occupies [start, end) (mmap, MAP_FIXED or not,
// shmat). Whatever was there is gone. file is non-nil when the decoder can
// read the bytes from a file (a private, non-writable mapping of a regular
// file); otherwise executable memory is copied.
func (s *Space) Map(start, end uint64, prot int, file *FileInfo, c Change) {
	s.Unmap(start, end, c)
	if !isExec(prot) {
		return
	}
	if file != nil {
		s.addFile(start, end, prot, *file, c)
		return
	}
	s.addAnon(start, end, prot, c)
}

// Protect: mprotect/pkey_mprotect set [start, end) (all of it mapped, the
// syscall succeeded) to prot.
func (s *Space) Protect(start, end uint64, prot int, c Change) {
	if !isExec(prot) {
		s.cut(start, end, c)
		return
	}
	// Pieces that need no new version: entirely inside the range, same
	// kind of content before and after (nothing could have been written
	// through a writable protection, and a File piece stays read-only).
	i := s.first(start)
	var redo []ival
	for k := i; k < len(s.pieces) && s.pieces[k].Start < end; k++ {
		p := &s.pieces[k]
		inside := p.Start >= start && p.End <= end
		wasW := p.Prot&unix.PROT_WRITE != 0
		fileW := p.Kind == File && prot&unix.PROT_WRITE != 0
		switch {
		case p.loose || s.unseen(max(p.Start, start), min(p.End, end)):
			// it may have been made writable, written and made
			// executable again unseen (also before the full filter
			// came): a new version, read
			redo = append(redo, ival{max(p.Start, start), min(p.End, end)})
			continue
		case p.Prot == prot:
			// unchanged
		case inside && !wasW && !fileW:
			p.Prot = prot // protection changed, bytes did not
		default:
			redo = append(redo, ival{max(p.Start, start), min(p.End, end)})
		}
		if wasW && p.Prot == prot {
			// RWX stays RWX: bytes may have changed since the last
			// snapshot; the program asking again is the only moment we
			// get (without W^X), so take a new version.
			redo = append(redo, ival{max(p.Start, start), min(p.End, end)})
		}
	}
	for _, r := range redo {
		for _, p := range s.cut(r.s, r.e, c) {
			if p.Kind == File && prot&unix.PROT_WRITE == 0 && !s.unseen(p.Start, p.End) && !p.loose {
				s.addFile(p.Start, p.End, prot, p.File, c)
				continue
			}
			reg := p.Region
			if p.Kind == File {
				reg = s.regionFor(p.Start, p.End, c)
			}
			s.addVersion(reg, p.Start, p.End, prot, c)
		}
	}
	// Gaps: memory that just became executable.
	for _, g := range s.gaps(start, end) {
		reg := s.regionFor(g.s, g.e, c)
		s.addVersion(reg, g.s, g.e, prot, c)
	}
}

// gaps returns the parts of [start, end) not covered by pieces.
func (s *Space) gaps(start, end uint64) []ival {
	var out []ival
	at := start
	for k := s.first(start); k < len(s.pieces) && s.pieces[k].Start < end; k++ {
		if s.pieces[k].Start > at {
			out = append(out, ival{at, s.pieces[k].Start})
		}
		at = max(at, s.pieces[k].End)
	}
	if at < end {
		out = append(out, ival{at, end})
	}
	return out
}

// Refresh: the bytes of [start, end) may have changed without a protection
// change (madvise(MADV_DONTNEED) zeroing anonymous pages,
// process_vm_writev). Anonymous pieces there get new versions; File pieces
// stay File when fileUnchanged (a dropped private page reads back from the
// file), else they become copied versions.
func (s *Space) Refresh(start, end uint64, fileUnchanged bool, c Change) {
	for _, p := range s.cut(start, end, c) {
		if p.Kind == File && fileUnchanged {
			s.addFile(p.Start, p.End, p.Prot, p.File, c)
			continue
		}
		reg := p.Region
		if p.Kind == File {
			reg = s.regionFor(p.Start, p.End, c)
		}
		s.addVersion(reg, p.Start, p.End, p.Prot, c)
	}
}

// Remap applies a successful mremap(old, oldSize, newSize, flags, ...) that
// returned to. mremap works inside one mapping, so the grown part takes
// the protection of the tracked piece ending the old range (none: the
// mapping was not executable and neither is the growth).
func (s *Space) Remap(old, oldSize, newSize, flags uint64, to uint64, c Change) {
	oldEnd := old + oldSize
	// What was executable in the part that moves (or stays).
	keep := min(oldSize, newSize)
	var moved []Piece
	for _, p := range s.pieces {
		if p.End > old && p.Start < old+keep {
			moved = append(moved, clip(p, max(p.Start, old), min(p.End, old+keep)))
		}
	}
	// The grown part gets the protection of the mapping's last page.
	growProt := 0
	var growFile *FileInfo
	if newSize > oldSize {
		for _, p := range s.pieces {
			if p.Start < oldEnd && p.End >= oldEnd {
				growProt = p.Prot
				if p.Kind == File {
					f := p.File
					f.Offset += oldEnd - p.Start
					growFile = &f
				}
			}
		}
	}
	if to == old {
		if newSize < oldSize {
			s.Unmap(old+newSize, oldEnd, c)
		} else if newSize > oldSize {
			s.Map(oldEnd, old+newSize, growProt, growFile, c)
		}
		return
	}
	const mremapDontunmap = 4
	if flags&mremapDontunmap != 0 {
		// The old range stays mapped with the same protection, but its
		// pages moved away: an anonymous private mapping reads as zeros.
		s.Refresh(old, oldEnd, true, c)
	} else {
		s.Unmap(old, oldEnd, c)
	}
	s.Unmap(to, to+newSize, c) // MREMAP_FIXED replaced whatever was there
	var anonReg int64
	for _, p := range moved {
		ns, ne := to+(p.Start-old), to+(p.End-old)
		if p.Kind == File {
			s.addFile(ns, ne, p.Prot, p.File, c)
			continue
		}
		if anonReg == 0 {
			r := &region{id: s.sink.NewRegion(to, to+newSize, c), live: []ival{{to, to + newSize}}}
			s.regions = append(s.regions, r)
			anonReg = r.id
		}
		s.addVersion(anonReg, ns, ne, p.Prot, c)
	}
	if newSize > oldSize && isExec(growProt) {
		gs, ge := to+oldSize, to+newSize
		if growFile != nil {
			s.addFile(gs, ge, growProt, *growFile, c)
		} else {
			if anonReg == 0 {
				anonReg = s.regionFor(gs, ge, c)
			}
			s.addVersion(anonReg, gs, ge, growProt, c)
		}
	}
}

// PieceAt returns the tracked piece containing addr.
func (s *Space) PieceAt(addr uint64) (Piece, bool) {
	i := s.first(addr)
	if i < len(s.pieces) && s.pieces[i].Start <= addr {
		return s.pieces[i], true
	}
	return Piece{}, false
}

// RefreshSplit: the bytes of [start, end) changed (a store W^X let
// through, or a batch page executed). Every piece there gets a new copied
// version with cause; the parts of those pieces outside the range get
// fresh versions with cause "split".
func (s *Space) RefreshSplit(start, end uint64, c Change) {
	for _, p := range s.cutAs(start, end, c.because("split")) {
		reg := p.Region
		if p.Kind == File {
			reg = s.regionFor(p.Start, p.End, c)
		}
		s.addVersion(reg, p.Start, p.End, p.Prot, c)
	}
}

// ProtOf returns the protection of the tracked piece containing addr, or
// 0 when addr is not tracked executable memory.
func (s *Space) ProtOf(addr uint64) int {
	i := s.first(addr)
	if i < len(s.pieces) && s.pieces[i].Start <= addr {
		return s.pieces[i].Prot
	}
	return 0
}

// Sync makes the state agree with a fresh /proc/PID/maps: tracked memory
// no longer executable there is ended, executable memory not tracked is
// added (File when fileOK says the mapping can be read from its file).
// Used at exec and fork (from an empty Space), and after syscalls whose
// effect cannot be computed from their arguments (brk, a failed mprotect
// that may have changed a prefix, shmat).
func (s *Space) Sync(maps []snapshot.Mapping, fileOK func(snapshot.Mapping) bool, c Change) {
	var exec []snapshot.Mapping
	for _, m := range maps {
		if isExec(m.Prot) && m.Path != "[vsyscall]" {
			exec = append(exec, m)
		}
	}
	// Pass 1: end what is no longer executable (or changed protection).
	// exec is sorted (as /proc/PID/maps is): each piece looks up the
	// mappings it overlaps.
	for _, p := range s.Pieces() {
		at := p.Start
		for _, m := range exec[sort.Search(len(exec), func(i int) bool { return exec[i].End > p.Start }):] {
			if m.Start >= p.End {
				break
			}
			if m.Start > at {
				s.cut(at, m.Start, c)
			}
			at = min(m.End, p.End)
			if m.Prot != p.Prot {
				// the protection changed behind our back (mprotect that
				// failed halfway): take it as a fresh mprotect
				s.Protect(max(m.Start, p.Start), at, m.Prot, c)
			}
		}
		if at < p.End {
			s.cut(at, p.End, c)
		}
	}
	// Pass 2: add what is executable and untracked.
	for _, m := range exec {
		for _, g := range s.gaps(m.Start, m.End) {
			if fileOK != nil && fileOK(m) {
				f := FileInfo{Path: m.Path, Dev: m.Dev, Inode: m.Inode, Offset: m.Offset + (g.s - m.Start)}
				s.addFile(g.s, g.e, m.Prot, f, c)
				continue
			}
			if s.Mapped(g.s, g.e) {
				reg := s.regionFor(g.s, g.e, c)
				s.addVersion(reg, g.s, g.e, m.Prot, c)
				continue
			}
			s.addAnon(g.s, g.e, m.Prot, c)
		}
	}
	// Regions whose memory is gone entirely.
	var mapped []ival
	for _, m := range maps {
		mapped = append(mapped, ival{m.Start, m.End})
	}
	for _, r := range append([]*region(nil), s.regions...) {
		for _, v := range r.live {
			at := v.s
			for _, m := range mapped {
				if m.e <= at || m.s >= v.e {
					continue
				}
				if m.s > at {
					s.unmapRegions(at, m.s, c)
				}
				at = max(at, m.e)
			}
			if at < v.e {
				s.unmapRegions(at, v.e, c)
			}
		}
	}
}

// Clear ends everything (the address space is gone: exec replaced it, or
// its last process exited).
func (s *Space) Clear(c Change) {
	for _, p := range s.pieces {
		s.end(p, c)
	}
	s.pieces = nil
	for _, r := range s.regions {
		s.sink.EndRegion(r.id, c)
	}
	s.regions = nil
}
