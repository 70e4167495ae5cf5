package tracker

import (
	"slices"
	"sort"
)

// batchSet is the set of a space's W^X batch pages (wxState.batch):
// pages ptjit keeps writable and not executable until code runs there.
// A page a store sent batch is kept one by one, with the store's thread
// and IP; fresh memory (wxFreshEffect: no store seen) is kept as runs of
// pages, so that a mapping of a gigabyte (SBCL's dynamic space, a JIT's
// reservation) costs one entry until its pages run, not one per page.
// A page is in pages or in fresh, never both.
type batchSet struct {
	pages map[uint64]batchPage
	fresh []ival // sorted, disjoint, page-aligned
}

// get returns the batch page at page.
func (b *batchSet) get(page uint64) (batchPage, bool) {
	if bp, ok := b.pages[page]; ok {
		return bp, true
	}
	if inSorted(b.fresh, page) {
		return batchPage{fresh: true}, true
	}
	return batchPage{}, false
}

// has reports whether page is a batch page.
func (b *batchSet) has(page uint64) bool {
	_, ok := b.get(page)
	return ok
}

// set makes page a batch page bp.
func (b *batchSet) set(page uint64, bp batchPage) {
	b.fresh = subSorted(b.fresh, page, page+pageSize)
	if b.pages == nil {
		b.pages = map[uint64]batchPage{}
	}
	b.pages[page] = bp
}

// addFresh makes [lo, hi) batch pages of fresh memory.
func (b *batchSet) addFresh(lo, hi uint64) {
	b.clear(lo, hi)
	i := sort.Search(len(b.fresh), func(i int) bool { return b.fresh[i].s >= lo })
	b.fresh = slices.Insert(b.fresh, i, ival{lo, hi})
	// merge with the neighbours it touches
	if i+1 < len(b.fresh) && b.fresh[i+1].s == hi {
		b.fresh[i].e = b.fresh[i+1].e
		b.fresh = slices.Delete(b.fresh, i+1, i+2)
	}
	if i > 0 && b.fresh[i-1].e == lo {
		b.fresh[i-1].e = b.fresh[i].e
		b.fresh = slices.Delete(b.fresh, i, i+1)
	}
}

// del drops page.
func (b *batchSet) del(page uint64) {
	delete(b.pages, page)
	b.fresh = subSorted(b.fresh, page, page+pageSize)
}

// clear drops the batch pages in [lo, hi).
func (b *batchSet) clear(lo, hi uint64) {
	if uint64(len(b.pages)) < (hi-lo)/pageSize {
		for p := range b.pages {
			if p >= lo && p < hi {
				delete(b.pages, p)
			}
		}
	} else {
		for p := lo &^ (pageSize - 1); p < hi; p += pageSize {
			delete(b.pages, p)
		}
	}
	b.fresh = subSorted(b.fresh, lo, hi)
}

// any reports whether [lo, hi) holds a batch page.
func (b *batchSet) any(lo, hi uint64) bool {
	i := sort.Search(len(b.fresh), func(i int) bool { return b.fresh[i].e > lo })
	if i < len(b.fresh) && b.fresh[i].s < hi {
		return true
	}
	return len(b.in(lo, hi, 1)) > 0
}

// in returns the batch pages in [lo, hi), in address order, at most max
// of them when limit > 0.
func (b *batchSet) in(lo, hi uint64, limit int) []uint64 {
	var pages []uint64
	if hi <= lo {
		return nil
	}
	if (hi-lo)/pageSize < uint64(len(b.pages)) {
		for p := lo &^ (pageSize - 1); p < hi; p += pageSize {
			if _, ok := b.pages[p]; ok {
				pages = append(pages, p)
			}
		}
	} else {
		for p := range b.pages {
			if p >= lo && p < hi {
				pages = append(pages, p)
			}
		}
	}
	i := sort.Search(len(b.fresh), func(i int) bool { return b.fresh[i].e > lo })
	for ; i < len(b.fresh) && b.fresh[i].s < hi; i++ {
		for p := max(b.fresh[i].s, lo&^(pageSize-1)); p < min(b.fresh[i].e, hi); p += pageSize {
			pages = append(pages, p)
		}
	}
	slices.Sort(pages)
	if limit > 0 && len(pages) > limit {
		pages = pages[:limit]
	}
	return pages
}

// empty reports whether the set holds no page.
func (b *batchSet) empty() bool { return len(b.pages) == 0 && len(b.fresh) == 0 }

// clone returns a copy of the set.
func (b *batchSet) clone() batchSet {
	c := batchSet{fresh: slices.Clone(b.fresh)}
	if len(b.pages) > 0 {
		c.pages = make(map[uint64]batchPage, len(b.pages))
		for p, bp := range b.pages {
			c.pages[p] = bp
		}
	}
	return c
}

// subSorted subtracts [lo, hi) from sorted, disjoint runs.
func subSorted(rs []ival, lo, hi uint64) []ival {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].e > lo })
	if i == len(rs) || rs[i].s >= hi {
		return rs
	}
	return slices.Concat(rs[:i], subIval(rs[i:], lo, hi))
}
