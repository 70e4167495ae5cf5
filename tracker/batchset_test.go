package tracker

import (
	"fmt"
	"testing"
)

// TestBatchSet: pages one by one and runs of fresh pages, as W^X keeps
// them; each step is checked against a plain set of pages.
func TestBatchSet(t *testing.T) {
	const p = pageSize
	var b batchSet
	want := map[uint64]batchPage{}
	check := func(step string) {
		t.Helper()
		for a := uint64(0); a < 64*p; a += p {
			got, ok := b.get(a)
			w, wok := want[a]
			if ok != wok || got != w {
				t.Fatalf("%s: page %d: %v %v, want %v %v", step, a/p, got, ok, w, wok)
			}
		}
		var pages []uint64
		for a := uint64(0); a < 64*p; a += p {
			if _, ok := want[a]; ok {
				pages = append(pages, a)
			}
		}
		if got := b.in(0, 64*p, 0); fmt.Sprint(got) != fmt.Sprint(pages) {
			t.Fatalf("%s: in: %v, want %v", step, got, pages)
		}
		if got := b.in(5*p+7, 20*p, 0); len(pages) > 0 {
			var w []uint64
			for _, a := range pages {
				if a >= 5*p && a < 20*p {
					w = append(w, a)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(w) {
				t.Fatalf("%s: in(5.x, 20): %v, want %v", step, got, w)
			}
		}
		if b.empty() != (len(want) == 0) || b.any(0, 64*p) != (len(want) > 0) {
			t.Fatalf("%s: empty %v any %v with %d pages", step, b.empty(), b.any(0, 64*p), len(want))
		}
		for i := 1; i < len(b.fresh); i++ {
			if b.fresh[i-1].e >= b.fresh[i].s {
				t.Fatalf("%s: fresh runs not sorted, disjoint and apart: %v", step, b.fresh)
			}
		}
	}
	fresh := func(lo, hi uint64) {
		b.addFresh(lo*p, hi*p)
		for a := lo; a < hi; a++ {
			want[a*p] = batchPage{fresh: true}
		}
	}
	check("empty")
	fresh(10, 20)
	check("fresh 10-20")
	fresh(30, 40)
	fresh(20, 30) // joins both
	check("fresh 20-30")
	if len(b.fresh) != 1 {
		t.Fatalf("fresh runs %v, want one", b.fresh)
	}
	b.set(15*p, batchPage{tid: 7, ip: 0x100})
	want[15*p] = batchPage{tid: 7, ip: 0x100}
	check("set 15")
	b.del(25 * p)
	delete(want, 25*p)
	b.del(10 * p)
	delete(want, 10*p)
	b.del(39 * p)
	delete(want, 39*p)
	check("del 25, 10, 39")
	b.set(50*p, batchPage{tid: 8})
	want[50*p] = batchPage{tid: 8}
	b.clear(14*p, 27*p)
	for a := uint64(14); a < 27; a++ {
		delete(want, a*p)
	}
	check("clear 14-27")
	if !b.any(30*p, 31*p) || b.any(26*p, 27*p) || !b.any(50*p, 51*p) {
		t.Fatalf("any: wrong around the cleared range")
	}
	c := b.clone()
	c.del(50 * p)
	if !b.has(50 * p) {
		t.Fatalf("clone shares its pages with the original")
	}
	fresh(0, 64)
	check("fresh over everything")
	b.clear(0, 64*p)
	want = map[uint64]batchPage{}
	check("clear all")
}
