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

	versioned bool // added with AddVersion or AddFileVersion
	file      bool // the bytes come from the file named by Tag
	shadowed  bool // static section overlapped by some versioned section
	cache     insnCache
	blocks    blockCache // runs of straight-line code (flow_block.go)
}

// End returns the first address after the section.
func (s *Section) End() uint64 { return s.Vaddr + uint64(len(s.Data)) }

func (s *Section) contains(ip uint64) bool {
	return ip >= s.Vaddr && ip-s.Vaddr < uint64(len(s.Data))
}

func (s *Section) validAt(tsc uint64) bool { return tsc >= s.FromTSC && tsc < s.ToTSC }

// Image is the memory the decoder reads instructions from (libipt's
// pt_image): static sections from files, which never overlap (a later one
// overlays earlier ones), plus versioned sections, each valid for a TSC range,
// which take precedence over static sections while valid.
//
// A miss is an error (CodeNomap), never a guess. An Image must not be changed
// while a decoder uses it; several decoders may read one Image concurrently
// only if each has its own copy (Clone), because sections carry decode caches.
type Image struct {
	static   []*Section // sorted by Vaddr, non-overlapping
	versions []*Section // sorted by Vaddr
	nextID   int
}

// NewImage returns an empty image.
func NewImage() *Image { return &Image{} }

// Sections returns all sections, static ones first, in address order.
func (im *Image) Sections() []*Section {
	out := make([]*Section, 0, len(im.static)+len(im.versions))
	out = append(out, im.static...)
	return append(out, im.versions...)
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
	if toTSC <= fromTSC {
		return fmt.Errorf("image: version %s at %#x: empty validity range [%#x, %#x)", tag, vaddr, fromTSC, toTSC)
	}
	if vaddr+uint64(len(data)) < vaddr {
		return fmt.Errorf("image: version %s: section at %#x size %#x wraps the address space", tag, vaddr, len(data))
	}
	im.nextID++
	s := &Section{ID: im.nextID, Vaddr: vaddr, Data: data, FromTSC: fromTSC, ToTSC: toTSC, Tag: tag, versioned: true}
	for _, o := range im.versions {
		if o.End() > s.Vaddr && o.Vaddr < s.End() && o.FromTSC < s.ToTSC && s.FromTSC < o.ToTSC {
			return fmt.Errorf("image: version %s at %#x-%#x [%#x, %#x) overlaps version %s at %#x-%#x [%#x, %#x)",
				tag, s.Vaddr, s.End(), fromTSC, toTSC, o.Tag, o.Vaddr, o.End(), o.FromTSC, o.ToTSC)
		}
	}
	i := sort.Search(len(im.versions), func(i int) bool { return im.versions[i].Vaddr > vaddr })
	im.versions = append(im.versions, nil)
	copy(im.versions[i+1:], im.versions[i:])
	im.versions[i] = s
	im.markShadowed()
	return nil
}

func (im *Image) markShadowed() {
	for _, s := range im.static {
		s.shadowed = false
		for _, v := range im.versions {
			if v.End() > s.Vaddr && v.Vaddr < s.End() {
				s.shadowed = true
				break
			}
		}
	}
}

// Clone returns an image with the same sections and fresh decode caches, for
// use by another goroutine.
func (im *Image) Clone() *Image {
	c := &Image{nextID: im.nextID}
	for _, s := range im.static {
		n := *s
		n.cache = insnCache{}
		n.blocks = blockCache{}
		c.static = append(c.static, &n)
	}
	for _, s := range im.versions {
		n := *s
		n.cache = insnCache{}
		n.blocks = blockCache{}
		c.versions = append(c.versions, &n)
	}
	return c
}

// Lookup returns the section holding ip for an instruction executed at tsc,
// or nil.
func (im *Image) Lookup(ip, tsc uint64) *Section {
	// Versions first: the newest start wins among (non-overlapping) ranges.
	if len(im.versions) > 0 {
		i := sort.Search(len(im.versions), func(i int) bool { return im.versions[i].Vaddr > ip })
		for j := i - 1; j >= 0; j-- {
			v := im.versions[j]
			if v.contains(ip) && v.validAt(tsc) {
				return v
			}
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
	for _, v := range im.versions {
		if v.Vaddr > ip {
			break
		}
		if v.contains(ip) && v.FromTSC > tsc && (best == nil || v.FromTSC < best.FromTSC) {
			best = v
		}
	}
	return best
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
	if err := im.AddVersion(vaddr, data, fromTSC, toTSC, path); err != nil {
		return err
	}
	for _, v := range im.versions {
		if v.ID == im.nextID {
			v.file, v.FileOff = true, fileOff
		}
	}
	return nil
}
