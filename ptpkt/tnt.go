package ptpkt

import "errors"

// ErrBadQuery is the TNT cache's answer to a query when it holds no bits
// (libipt's pte_bad_query text): the trace does not match the code.
var ErrBadQuery = errors.New("trace stream does not match query")

// TNTCache holds the taken/not-taken bits of one TNT packet until the
// instruction flow consumes them, oldest bit first (libipt's pt_tnt_cache).
//
// The zero value is an empty cache.
type TNTCache struct {
	bits uint64 // the packet's payload; the oldest bit is the highest one
	mask uint64 // the bit answering the next query; zero when empty
}

// Empty reports whether all bits have been consumed.
func (c *TNTCache) Empty() bool { return c.mask == 0 }

// Add loads the size bits of a TNT payload (Packet.TNTPayload and
// Packet.TNTBits). It fails with ErrBadContext if bits from a previous
// packet are still unused, and with ErrBadPacket for an empty or oversized
// payload.
func (c *TNTCache) Add(bits uint64, size int) error {
	if c.mask != 0 {
		return ErrBadContext
	}
	if size <= 0 || size > 64 {
		return ErrBadPacket
	}
	c.bits = bits
	c.mask = 1 << uint(size-1)
	return nil
}

// Query consumes the next bit. It fails with ErrBadQuery when the cache is
// empty.
func (c *TNTCache) Query() (taken bool, err error) {
	if c.mask == 0 {
		return false, ErrBadQuery
	}
	taken = c.bits&c.mask != 0
	c.mask >>= 1
	return taken, nil
}

// Reset drops any unused bits.
func (c *TNTCache) Reset() { *c = TNTCache{} }
