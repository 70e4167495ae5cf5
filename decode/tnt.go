package decode

// tntCache holds the taken/not-taken bits of one TNT packet until the
// instruction flow consumes them, oldest bit first (libipt's pt_tnt_cache).
//
// The zero value is an empty cache.
type tntCache struct {
	bits uint64 // the packet's payload; the oldest bit is the highest one
	mask uint64 // the bit answering the next query; zero when empty
}

// empty reports whether all bits have been consumed.
func (c *tntCache) empty() bool { return c.mask == 0 }

// add loads the size bits of a TNT payload. It fails with CodeBadContext if
// bits from a previous packet are still unused, and with CodeBadPacket for an
// empty or oversized payload.
func (c *tntCache) add(bits uint64, size int) Code {
	if c.mask != 0 {
		return CodeBadContext
	}
	if size <= 0 || size > 64 {
		return CodeBadPacket
	}
	c.bits = bits
	c.mask = 1 << uint(size-1)
	return 0
}

// query consumes the next bit. It fails with CodeBadQuery when the cache is
// empty.
func (c *tntCache) query() (taken bool, err Code) {
	if c.mask == 0 {
		return false, CodeBadQuery
	}
	taken = c.bits&c.mask != 0
	c.mask >>= 1
	return taken, 0
}

// reset drops any unused bits.
func (c *tntCache) reset() { *c = tntCache{} }
