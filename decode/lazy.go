package decode

import "fmt"

// Lazy sections. A recording may hold tens of thousands of versions of one
// range (a JIT patching an immediate and running the code after each
// store), most of them run once, some never. AddLazyVersion adds a version
// by its range, time and a function that reads its bytes: nothing is read
// until a lookup lands on it, and the image keeps the bytes of at most
// maxLive lazy sections, maxBytes in all, evicting the least recently
// looked up. The decoder's memory then follows the code it is running, not
// the number of versions, and the decode time the trace.
//
// A lookup that lands on a lazy section returns a materialised Section: a
// copy holding the bytes and its own decode caches. Eviction drops the
// image's reference to it and never changes it, so a decoder or a sink
// that still holds it (FlowInsn.Section, a parallel chunk waiting to be
// replayed) reads it safely; it is freed when the last holder lets go, and
// a later lookup reads the bytes again into a new copy (same ID, Tag and
// range).

// Default bounds of the materialised lazy sections of one image (each
// Clone has its own).
const (
	defaultLazyBytes = 64 << 20
	defaultLazyLive  = 256
)

// lazyCache is an image's materialised lazy sections, most recently used
// first. The index's lazy sections never change once added, so Clones
// share them; what each clone has materialised is its own (live).
type lazyCache struct {
	live       map[*Section]*lazyLive // by index entry
	head, tail *lazyLive
	bytes      uint64
	// bounds; zero means the default
	maxBytes uint64
	maxLive  int
	// loads counts the sections read (tests)
	loads int
}

// lazyLive is one materialised lazy section.
type lazyLive struct {
	entry, sec *Section
	prev, next *lazyLive
}

// CodeSource reads the bytes of lazy sections (AddLazyVersion), by the key
// each was added with. Code must be safe for concurrent use when Clones of
// the image decode on several goroutines, and must return the section's
// size bytes, which the image does not change. A section whose bytes
// cannot be read is a miss (CodeNomap) wherever it is looked up, so the
// source should report its error itself (once).
type CodeSource interface {
	Code(key int64) ([]byte, error)
}

// AddLazyVersion is AddVersion for a version of size bytes that src reads
// (src.Code(key)) when a lookup first lands on it, and again after its
// bytes were evicted.
func (im *Image) AddLazyVersion(vaddr, size, fromTSC, toTSC uint64, tag string, src CodeSource, key int64) error {
	if size == 0 {
		return fmt.Errorf("image: version %s: empty section at %#x", tag, vaddr)
	}
	_, err := im.addVersioned(&Section{Vaddr: vaddr, size: size, src: src, key: key, FromTSC: fromTSC, ToTSC: toTSC, Tag: tag, versioned: true})
	return err
}

// SetLazyBounds sets how many lazy sections' bytes the image (and each
// later Clone) keeps, and how many bytes in all; zero keeps the default.
func (im *Image) SetLazyBounds(maxLive int, maxBytes uint64) {
	im.lazy.maxLive, im.lazy.maxBytes = maxLive, maxBytes
}

// materialize returns the section a decoder reads for index entry s: s
// itself, or for a lazy one its materialised copy (read now if it has
// none), or nil if its bytes cannot be read.
func (im *Image) materialize(s *Section) *Section {
	if s.src == nil {
		return s
	}
	c := &im.lazy
	if l := c.live[s]; l != nil {
		c.unlink(l)
		c.pushFront(l)
		return l.sec
	}
	data, err := s.src.Code(s.key)
	if err != nil || uint64(len(data)) != s.size {
		return nil
	}
	c.loads++
	m := &Section{ID: s.ID, Vaddr: s.Vaddr, Data: data, FromTSC: s.FromTSC, ToTSC: s.ToTSC, Tag: s.Tag, FileOff: s.FileOff,
		versioned: true, file: s.file}
	if c.live == nil {
		c.live = map[*Section]*lazyLive{}
	}
	l := &lazyLive{entry: s, sec: m}
	c.live[s] = l
	c.pushFront(l)
	c.bytes += s.size
	maxLive, maxBytes := c.maxLive, c.maxBytes
	if maxLive <= 0 {
		maxLive = defaultLazyLive
	}
	if maxBytes == 0 {
		maxBytes = defaultLazyBytes
	}
	for (len(c.live) > maxLive || c.bytes > maxBytes) && c.tail != l {
		old := c.tail
		c.unlink(old)
		delete(c.live, old.entry)
		c.bytes -= old.entry.size
	}
	return m
}

func (c *lazyCache) pushFront(l *lazyLive) {
	l.prev, l.next = nil, c.head
	if c.head != nil {
		c.head.prev = l
	}
	c.head = l
	if c.tail == nil {
		c.tail = l
	}
}

func (c *lazyCache) unlink(l *lazyLive) {
	if l.prev != nil {
		l.prev.next = l.next
	} else {
		c.head = l.next
	}
	if l.next != nil {
		l.next.prev = l.prev
	} else {
		c.tail = l.prev
	}
	l.prev, l.next = nil, nil
}
