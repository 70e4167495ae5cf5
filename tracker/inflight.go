package tracker

import (
	"sort"

	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// A re-read of /proc/PID/maps after a syscall (Sync: brk, shmdt,
// remap_file_pages, a PROT_GROWSDOWN mprotect, a failed mprotect) shows
// the whole address space, also what other threads' syscalls changed
// while they are in flight: their effect is in the maps, but their exit
// stops have not been handled yet. Taken as the syncing call's, that
// memory would be recorded with its cause and thread (1000 threads that
// each mprotect a page while the main thread calls brk: hundreds of pages
// with cause brk and the main thread's tid, the adjacent pages of several
// threads merged into one version, as the kernel merges them into one
// mapping), and the other thread's exit would then find nothing changed.
// maskInFlight hides those changes from Sync; each call's own exit stop
// records them.

// inFlight is what other threads' syscalls in flight in one address
// space may have changed.
type inFlight struct {
	// busy: address ranges they may change (munmap, mprotect, madvise,
	// a MAP_FIXED mmap, the source and target of an mremap, an mmap whose
	// result is known because its thread is at its exit stop)
	busy []ival
	// fresh: one of them may map fresh memory at an address not known yet
	// (an mmap whose thread has not reached its exit stop, brk, shmat)
	fresh bool
}

// mergeIvals returns the union of rs, sorted, without empty ranges.
func mergeIvals(rs []ival) []ival {
	var in []ival
	for _, r := range rs {
		if r.s < r.e {
			in = append(in, r)
		}
	}
	sort.Slice(in, func(i, j int) bool { return in[i].s < in[j].s })
	var out []ival
	for _, r := range in {
		if n := len(out); n > 0 && r.s <= out[n-1].e {
			out[n-1].e = max(out[n-1].e, r.e)
			continue
		}
		out = append(out, r)
	}
	return out
}

// clipMapping narrows m to [lo, hi), adjusting the file offset.
func clipMapping(m snapshot.Mapping, lo, hi uint64) snapshot.Mapping {
	m.Offset += lo - m.Start
	m.Start, m.End = lo, hi
	return m
}

// maskInFlight returns maps as Sync must see them so that it records only
// the syncing call's effect: inside f.busy, maps says what the Space
// already holds (its pieces, and its live regions' other parts as mapped
// and not executable), so Sync changes nothing there; with f.fresh,
// executable memory that is neither tracked nor inside a live region
// (fresh memory) is left out unless own says the syncing call made it
// (brk: the [heap]). What is masked is recorded by the exit stop of the
// call that made it.
func (s *Space) maskInFlight(maps []snapshot.Mapping, f inFlight, own func(snapshot.Mapping) bool) []snapshot.Mapping {
	busy := mergeIvals(f.busy)
	if len(busy) == 0 && !f.fresh {
		return maps
	}
	var live []ival
	for _, r := range s.regions {
		live = append(live, r.live...)
	}
	live = mergeIvals(live)
	var out []snapshot.Mapping
	for _, m := range maps {
		parts := minus(m.Start, m.End, busy)
		if f.fresh && isExec(m.Prot) && (own == nil || !own(m)) {
			// drop the untracked parts outside live regions
			var drop []ival
			for _, g := range s.gaps(m.Start, m.End) {
				drop = append(drop, minus(g.s, g.e, live)...)
			}
			var kept []ival
			for _, p := range parts {
				kept = append(kept, minus(p.s, p.e, drop)...)
			}
			parts = kept
		}
		for _, p := range parts {
			out = append(out, clipMapping(m, p.s, p.e))
		}
	}
	for _, b := range busy {
		var covered []ival
		for k := s.first(b.s); k < len(s.pieces) && s.pieces[k].Start < b.e; k++ {
			p := clip(s.pieces[k], max(s.pieces[k].Start, b.s), min(s.pieces[k].End, b.e))
			covered = append(covered, ival{p.Start, p.End})
			m := snapshot.Mapping{Start: p.Start, End: p.End, Prot: p.Prot}
			if p.Kind == File {
				m.Path, m.Dev, m.Inode, m.Offset = p.File.Path, p.File.Dev, p.File.Inode, p.File.Offset
			}
			out = append(out, m)
		}
		for _, v := range live {
			if v.e <= b.s || v.s >= b.e {
				continue
			}
			for _, r := range minus(max(v.s, b.s), min(v.e, b.e), covered) {
				out = append(out, snapshot.Mapping{Start: r.s, End: r.e, Prot: unix.PROT_READ})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start < out[j].Start })
	return out
}
