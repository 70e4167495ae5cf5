package decode

import (
	"fmt"
	"math"
	"os"
	"sort"
)

// AlwaysValid is the ToTSC of a section that never expires.
const AlwaysValid = math.MaxUint64

// Section is one piece of memory in an Image: Data is mapped at Vaddr and is
// valid for instructions executed at times in [FromTSC, ToTSC).
type Section struct {
	ID      int    // unique within the image, > 0
	Vaddr   uint64 // address of Data[0]
	Data    []byte // the code bytes
	FromTSC uint64 // first TSC at which the bytes are valid
	ToTSC   uint64 // first TSC at which they are no longer valid
	Tag     string // file name or code version label, for display
	FileOff uint64 // offset of Data[0] in the file named by Tag, if any

	versioned bool // added with AddVersion, AddLazyVersion or AddFileVersion
	file      bool // the bytes come from the file named by Tag
	shadowed  bool // static section overlapped by some versioned section
	cache     insnCache
	blocks    blockCache // runs of straight-line code (flow_block.go)

	// A lazy section (AddLazyVersion) in the image's index has no Data:
	// size is its length and src.Code(key) reads its bytes into the
	// materialised Section handed to decoders (lazy.go).
	size uint64
	src  CodeSource
	key  int64
}

// End returns the first address after the section.
func (s *Section) End() uint64 { return s.Vaddr + s.length() }

// length is the section's size: len(Data), or size for a lazy one.
func (s *Section) length() uint64 {
	if s.src != nil {
		return s.size
	}
	return uint64(len(s.Data))
}

func (s *Section) contains(ip uint64) bool {
	return ip >= s.Vaddr && ip-s.Vaddr < s.length()
}

func (s *Section) validAt(tsc uint64) bool { return tsc >= s.FromTSC && tsc < s.ToTSC }

// Image is the memory the decoder reads instructions from (libipt's
// pt_image): static sections from files, which never overlap (a later one
// overlays earlier ones), plus versioned sections, each valid for a TSC range,
// which take precedence over static sections while valid.
//
// Versioned sections are kept by extent: the sections of one address range
// [Vaddr, End) (the versions of a region, a file mapping) form one extent,
// sorted by time; extents are sorted by address. A lookup finds the
// extents holding the address (a binary search, then the few extents
// below it that reach it) and the version valid at the time by a binary
// search in each: O(log V) for V versions of one range, whatever V.
//
// A miss is an error (CodeNomap), never a guess. An Image must not be changed
// while a decoder uses it; several decoders may read one Image concurrently
// only if each has its own copy (Clone), because sections carry decode caches
// (and lazy sections the materialised bytes: lazy.go).
type Image struct {
	static  []*Section // sorted by Vaddr, non-overlapping
	extents []*extent  // sorted by vaddr, then end
	byRange map[[2]uint64]*extent
	maxLen  uint64 // the longest extent: how far below an address to look
	nver    int    // versioned sections
	nextID  int
	lazy    lazyCache
}

// extent holds the versioned sections of one address range, sorted by
// FromTSC; their validity ranges never overlap, so ToTSC is sorted too.
type extent struct {
	vaddr, end uint64
	secs       []*Section
}

// NewImage returns an empty image.
func NewImage() *Image { return &Image{byRange: map[[2]uint64]*extent{}} }

// Sections returns all sections, static ones first, then the versioned
// ones by address range and time (a lazy section's bytes are read).
func (im *Image) Sections() []*Section {
	out := make([]*Section, 0, len(im.static)+im.nver)
	out = append(out, im.static...)
	for _, e := range im.extents {
		for _, s := range e.secs {
			out = append(out, im.materialize(s))
		}
	}
	return out
}

// AddFile maps size bytes of the file at path, starting at file offset
// fileOff, at vaddr; size 0 means "to the end of the file". The section
// overlays any part of earlier static sections it overlaps.
func (im *Image) AddFile(path string, fileOff, size, vaddr uint64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	fsize := uint64(len(data))
	if fileOff >= fsize {
		return fmt.Errorf("image: %s: offset %#x beyond end of file (size %#x)", path, fileOff, fsize)
	}
	end := fsize
	if size != 0 {
		if size > fsize-fileOff {
			return fmt.Errorf("image: %s: range %#x-%#x beyond end of file (size %#x)", path, fileOff, fileOff+size, fsize)
		}
		end = fileOff + size
	}
	return im.AddBytes(data[fileOff:end], vaddr, path, fileOff)
}

// AddBytes maps data at vaddr as a static section labelled tag.
func (im *Image) AddBytes(data []byte, vaddr uint64, tag string, fileOff uint64) error {
	if len(data) == 0 {
		return fmt.Errorf("image: %s: empty section at %#x", tag, vaddr)
	}
	if vaddr+uint64(len(data)) < vaddr {
		return fmt.Errorf("image: %s: section at %#x size %#x wraps the address space", tag, vaddr, len(data))
	}
	im.nextID++
	s := &Section{ID: im.nextID, Vaddr: vaddr, Data: data, ToTSC: AlwaysValid, Tag: tag, FileOff: fileOff}
	lo, hi := s.Vaddr, s.End()
	var kept []*Section
	for _, o := range im.static {
		if o.End() <= lo || o.Vaddr >= hi {
			kept = append(kept, o)
			continue
		}
		// Keep the parts of o outside [lo, hi).
		if o.Vaddr < lo {
			kept = append(kept, im.slice(o, o.Vaddr, lo))
		}
		if o.End() > hi {
			kept = append(kept, im.slice(o, hi, o.End()))
		}
	}
	kept = append(kept, s)
	sort.Slice(kept, func(i, j int) bool { return kept[i].Vaddr < kept[j].Vaddr })
	im.static = kept
	im.markShadowed()
	return nil
}

// slice returns a new static section holding the part [from, to) of o.
func (im *Image) slice(o *Section, from, to uint64) *Section {
	im.nextID++
	off := from - o.Vaddr
	return &Section{ID: im.nextID, Vaddr: from, Data: o.Data[off : to-o.Vaddr], ToTSC: AlwaysValid,
		Tag: o.Tag, FileOff: o.FileOff + off}
}

// AddVersion maps data at vaddr for instructions executed at TSC values in
// [fromTSC, toTSC) — one recorded version of run-time generated or patched
// code. While valid it takes precedence over static sections; versions of the
// same address must not have overlapping validity ranges.
func (im *Image) AddVersion(vaddr uint64, data []byte, fromTSC, toTSC uint64, tag string) error {
	if len(data) == 0 {
		return fmt.Errorf("image: version %s: empty section at %#x", tag, vaddr)
	}
	_, err := im.addVersioned(&Section{Vaddr: vaddr, Data: data, FromTSC: fromTSC, ToTSC: toTSC, Tag: tag, versioned: true})
	return err
}

// addVersioned checks s (its range and time against every versioned
// section of an overlapping range) and adds it to its extent.
func (im *Image) addVersioned(s *Section) (*Section, error) {
	vaddr, size, tag := s.Vaddr, s.length(), s.Tag
	if s.ToTSC <= s.FromTSC {
		return nil, fmt.Errorf("image: version %s at %#x: empty validity range [%#x, %#x)", tag, vaddr, s.FromTSC, s.ToTSC)
	}
	if vaddr+size < vaddr {
		return nil, fmt.Errorf("image: version %s: section at %#x size %#x wraps the address space", tag, vaddr, size)
	}
	if im.byRange == nil {
		im.byRange = map[[2]uint64]*extent{}
	}
	var clash *Section
	im.overlapping(vaddr, s.End(), func(e *extent) bool {
		// the first section of e ending after s starts
		k := sort.Search(len(e.secs), func(k int) bool { return e.secs[k].ToTSC > s.FromTSC })
		if k < len(e.secs) && e.secs[k].FromTSC < s.ToTSC {
			clash = e.secs[k]
			return false
		}
		return true
	})
	if o := clash; o != nil {
		return nil, fmt.Errorf("image: version %s at %#x-%#x [%#x, %#x) overlaps version %s at %#x-%#x [%#x, %#x)",
			tag, s.Vaddr, s.End(), s.FromTSC, s.ToTSC, o.Tag, o.Vaddr, o.End(), o.FromTSC, o.ToTSC)
	}
	im.nextID++
	s.ID = im.nextID
	key := [2]uint64{vaddr, s.End()}
	e := im.byRange[key]
	if e == nil {
		e = &extent{vaddr: vaddr, end: s.End()}
		im.byRange[key] = e
		i := sort.Search(len(im.extents), func(i int) bool {
			o := im.extents[i]
			return o.vaddr > vaddr || o.vaddr == vaddr && o.end > e.end
		})
		im.extents = append(im.extents, nil)
		copy(im.extents[i+1:], im.extents[i:])
		im.extents[i] = e
		im.maxLen = max(im.maxLen, size)
	}
	// Versions come in time order as a rule: append, else insert.
	k := len(e.secs)
	if k > 0 && e.secs[k-1].FromTSC > s.FromTSC {
		k = sort.Search(len(e.secs), func(k int) bool { return e.secs[k].FromTSC > s.FromTSC })
	}
	e.secs = append(e.secs, nil)
	copy(e.secs[k+1:], e.secs[k:])
	e.secs[k] = s
	im.nver++
	// the static sections s overlaps are shadowed
	i := sort.Search(len(im.static), func(i int) bool { return im.static[i].End() > vaddr })
	for ; i < len(im.static) && im.static[i].Vaddr < s.End(); i++ {
		im.static[i].shadowed = true
	}
	return s, nil
}

// overlapping calls fn for each extent that overlaps [lo, hi), from the
// highest address down, until fn returns false.
func (im *Image) overlapping(lo, hi uint64, fn func(*extent) bool) {
	i := sort.Search(len(im.extents), func(i int) bool { return im.extents[i].vaddr >= hi })
	for j := i - 1; j >= 0; j-- {
		e := im.extents[j]
		if e.vaddr+im.maxLen <= lo {
			break // no extent this low reaches lo
		}
		if e.end > lo && !fn(e) {
			return
		}
	}
}

func (im *Image) markShadowed() {
	for _, s := range im.static {
		s.shadowed = false
		im.overlapping(s.Vaddr, s.End(), func(*extent) bool {
			s.shadowed = true
			return false
		})
	}
}

// Clone returns an image with the same sections and fresh decode caches, for
// use by another goroutine.
func (im *Image) Clone() *Image {
	c := &Image{nextID: im.nextID, maxLen: im.maxLen, nver: im.nver, byRange: make(map[[2]uint64]*extent, len(im.byRange)),
		lazy: lazyCache{maxBytes: im.lazy.maxBytes, maxLive: im.lazy.maxLive}}
	for _, s := range im.static {
		c.static = append(c.static, s.copy())
	}
	for _, e := range im.extents {
		n := &extent{vaddr: e.vaddr, end: e.end, secs: make([]*Section, len(e.secs))}
		for i, s := range e.secs {
			if s.src != nil {
				n.secs[i] = s // lazy: never changed, shared
			} else {
				n.secs[i] = s.copy()
			}
		}
		c.extents = append(c.extents, n)
		c.byRange[[2]uint64{e.vaddr, e.end}] = n
	}
	return c
}

// copy returns s with fresh decode caches.
func (s *Section) copy() *Section {
	n := *s
	n.cache = insnCache{}
	n.blocks = blockCache{}
	return &n
}

// Lookup returns the section holding ip for an instruction executed at tsc,
// or nil. A lazy section's bytes are read here (lazy.go).
func (im *Image) Lookup(ip, tsc uint64) *Section {
	// Versions first; at most one holds (ip, tsc): AddVersion refuses overlaps.
	if im.nver > 0 {
		var found *Section
		im.overlapping(ip, ip+1, func(e *extent) bool {
			k := sort.Search(len(e.secs), func(k int) bool { return e.secs[k].ToTSC > tsc })
			if k < len(e.secs) && e.secs[k].FromTSC <= tsc {
				found = e.secs[k]
				return false
			}
			return true
		})
		if found != nil {
			if s := im.materialize(found); s != nil {
				return s
			}
			return nil // its bytes cannot be read: a miss, never a guess
		}
	}
	i := sort.Search(len(im.static), func(i int) bool { return im.static[i].Vaddr > ip })
	if i > 0 && im.static[i-1].contains(ip) {
		return im.static[i-1]
	}
	return nil
}

// LookupNext returns the version holding ip that becomes valid first after
// tsc, or nil. The decoder's time for an instruction is the time of the
// last timing packet, which can be earlier than when the instruction ran;
// when no version is valid at that time, the next one to become valid is
// the code that ran (time only moves forward).
func (im *Image) LookupNext(ip, tsc uint64) *Section {
	var best *Section
	im.overlapping(ip, ip+1, func(e *extent) bool {
		k := sort.Search(len(e.secs), func(k int) bool { return e.secs[k].FromTSC > tsc })
		if k < len(e.secs) && (best == nil || e.secs[k].FromTSC < best.FromTSC) {
			best = e.secs[k]
		}
		return true
	})
	if best == nil {
		return nil
	}
	return im.materialize(best)
}

// Read copies up to len(buf) bytes at ip, as valid at tsc, into buf, crossing
// into adjacent sections when a read runs off the end of one. It returns the
// number of bytes copied and the section holding ip; n is 0 and s nil when ip
// is not mapped.
func (im *Image) Read(buf []byte, ip, tsc uint64) (n int, s *Section) {
	s = im.Lookup(ip, tsc)
	if s == nil {
		return 0, nil
	}
	n = copy(buf, s.Data[ip-s.Vaddr:])
	for n < len(buf) {
		next := im.Lookup(ip+uint64(n), tsc)
		if next == nil {
			break
		}
		m := copy(buf[n:], next.Data[ip+uint64(n)-next.Vaddr:])
		if m == 0 {
			break
		}
		n += m
	}
	return n, s
}

// ReadAt copies the section's bytes at ip into buf.
func (s *Section) ReadAt(buf []byte, ip uint64) (int, bool) {
	if s == nil || !s.contains(ip) {
		return 0, false
	}
	return copy(buf, s.Data[ip-s.Vaddr:]), true
}

// Versioned reports whether the section is a code version (AddVersion)
// rather than a file or raw mapping.
func (s *Section) Versioned() bool { return s.versioned }

// IsFile reports whether the section's bytes come from the file named by
// Tag, at FileOff (AddFile, AddBytes with a file, AddFileVersion).
func (s *Section) IsFile() bool { return s.file || !s.versioned }

// AddFileVersion maps data, the bytes of file path from offset fileOff, at
// vaddr for instructions executed at TSC values in [fromTSC, toTSC): a
// file-backed mapping of a recording, which exists only between its mmap
// and its munmap (an exec or a later mapping may put other code at the same
// address).
func (im *Image) AddFileVersion(path string, data []byte, fileOff, vaddr, fromTSC, toTSC uint64) error {
	if len(data) == 0 {
		return fmt.Errorf("image: version %s: empty section at %#x", path, vaddr)
	}
	_, err := im.addVersioned(&Section{Vaddr: vaddr, Data: data, FromTSC: fromTSC, ToTSC: toTSC, Tag: path, versioned: true,
		file: true, FileOff: fileOff})
	return err
}
