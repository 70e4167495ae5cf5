package tracker

import "fmt"

// image is the bytes of [addr, addr+len(b)) as a call left them (an
// event's copy): versions inside it are taken from it.
type image struct {
	addr uint64
	b    []byte
	// gens numbers b's pages: two pages with the same number have the
	// same bytes (bpfev.Event.Gens); nil when unknown
	gens []uint64
}

// covers reports whether the image holds [start, end).
func (m *image) covers(start, end uint64) bool {
	return m != nil && m.addr <= start && end <= m.addr+uint64(len(m.b)) && start <= end
}

// read copies [addr, addr+len(b)) out of the image.
func (m *image) read(addr uint64, b []byte) error {
	if !m.covers(addr, addr+uint64(len(b))) {
		return fmt.Errorf("event bytes: %#x+%#x outside %#x+%#x", addr, len(b), m.addr, len(m.b))
	}
	copy(b, m.b[addr-m.addr:])
	return nil
}

// pageGens returns the page numbers of [start, end), page-aligned and
// inside the image, or nil.
func (m *image) pageGens(start, end uint64) []uint64 {
	if !m.covers(start, end) || m.gens == nil || (start-m.addr)%pageSize != 0 || (end-start)%pageSize != 0 ||
		uint64(len(m.gens))*pageSize != uint64(len(m.b)) {
		return nil
	}
	return m.gens[(start-m.addr)/pageSize : (end-m.addr)/pageSize]
}
