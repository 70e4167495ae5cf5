package db

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// Page deltas (schema 7). A page that differs little from the page stored
// at the same address in the previous version of its range is stored as a
// delta against that page instead of whole: pages.base_id names the base
// page's row and pages.data holds the delta, a sequence of runs
//
//	uvarint skip   bytes kept from the base since the previous run's end
//	uvarint n      bytes replaced (n ≥ 1)
//	n bytes        the new bytes
//
// after which the rest of the base is kept; the page has the base's length.
// A 4-byte store into a page costs a 6-byte delta, not 4 KiB.
//
// Chains are bounded: a page is stored whole when its base is already
// maxDeltaDepth deltas from a whole page (a checkpoint), so that reading any
// page applies at most maxDeltaDepth deltas to a whole page, and a delta
// larger than maxDelta bytes is not worth its base's chain: the page is
// stored whole. With a 4-byte store per version, a checkpoint every 64
// versions costs 64 bytes per version on average.
const (
	maxDeltaDepth = 64
	maxDelta      = PageSize / 4
)

// makeDelta appends to dst the delta that turns base into page (of the same
// length), or returns nil when it would be longer than maxDelta bytes.
func makeDelta(dst, base, page []byte) []byte {
	if len(base) != len(page) {
		return nil
	}
	var tmp [binary.MaxVarintLen64]byte
	prev := 0 // end of the previous run
	for i := 0; i < len(page); {
		if i = nextDiff(page, base, i); i == len(page) {
			break
		}
		// a run of changed bytes; equal stretches shorter than 4 bytes
		// stay inside it (a new run costs at least 2 bytes of header)
		j := i + 1
		for j < len(page) {
			if page[j] != base[j] {
				j++
				continue
			}
			k := j
			for k < len(page) && k < j+4 && page[k] == base[k] {
				k++
			}
			if k == len(page) || k == j+4 {
				break
			}
			j = k
		}
		dst = append(dst, tmp[:binary.PutUvarint(tmp[:], uint64(i-prev))]...)
		dst = append(dst, tmp[:binary.PutUvarint(tmp[:], uint64(j-i))]...)
		dst = append(dst, page[i:j]...)
		if len(dst) > maxDelta {
			return nil
		}
		prev, i = j, j
	}
	if dst == nil {
		dst = []byte{} // identical pages: an empty delta (not stored: same hash)
	}
	return dst
}

// nextDiff returns the first index from i on where page and base (of the
// same length) differ, or their length: eight bytes a compare, as most of
// a JIT's page is what it was (a byte a compare was a seventh of ptjit's
// CPU on LuaJIT's bench.lua, 2026-11-26).
func nextDiff(page, base []byte, i int) int {
	for ; i+8 <= len(page); i += 8 {
		if x := binary.LittleEndian.Uint64(page[i:]) ^ binary.LittleEndian.Uint64(base[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < len(page) && page[i] == base[i] {
		i++
	}
	return i
}

// applyDelta returns base with delta applied (a new slice), or an error
// naming the byte of the delta that does not fit.
func applyDelta(base, delta []byte) ([]byte, error) {
	out := append([]byte(nil), base...)
	pos, off := 0, 0
	for off < len(delta) {
		skip, k := binary.Uvarint(delta[off:])
		if k <= 0 {
			return nil, fmt.Errorf("delta byte %d: bad run offset", off)
		}
		n, m := binary.Uvarint(delta[off+k:])
		if m <= 0 || n == 0 {
			return nil, fmt.Errorf("delta byte %d: bad run length", off+k)
		}
		start := off
		off += k + m
		if skip > uint64(len(out)-pos) || n > uint64(len(out)-pos)-skip || n > uint64(len(delta)-off) {
			return nil, fmt.Errorf("delta byte %d: run of %d bytes at page offset %d beyond the page (%d bytes) or the delta", start, n, uint64(pos)+skip, len(out))
		}
		pos += int(skip)
		copy(out[pos:], delta[off:off+int(n)])
		pos += int(n)
		off += int(n)
	}
	return out, nil
}
