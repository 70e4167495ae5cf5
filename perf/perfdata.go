package perf

// perf.data reading: the file header, the attribute section and the feature
// sections. Records are read by PerfRecordReader (perfdata_record.go); the
// PT streams and sideband of a recording are assembled by LoadPerfTrace
// (perfdata_trace.go). The layout is perf's tools/perf/Documentation/
// perf.data-file-format.txt; every struct mirrored here says which kernel
// or perf struct it must match. Little-endian PERFILE2 files are read, in
// file mode (a 104-byte header locating attrs, data and features) and in
// pipe mode (perf record -o -, saved to a file; perfdata_pipe.go).
//
// Every size or count read from the file is checked against the file size
// (or the enclosing section) before anything is allocated, so a corrupt or
// hostile file costs at most its own size in memory.
//
// Use:
//
//	p, err := OpenPerfData(path) // header, attrs, features
//	defer p.Close()
//	rr := p.Records()            // records in file order
//	var r PerfRecord
//	for rr.Next(&r) == nil { ... } // io.EOF at the end; r is reused
//	tr, err := LoadPerfTrace(p)  // PT stream per queue, sideband, time conversion
//
// A header whose data size is 0 (a writer that never fixed it up) means
// "records up to the end of the file" (PerfData.Unterminated); a record cut
// short there ends the stream with ErrPerfDataTruncated, and LoadPerfTrace
// keeps everything before it (PerfTrace.Truncated).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"
)

// perfMagic is "PERFILE2" read as a little-endian u64.
const perfMagic = 0x32454c4946524550

// perfMagicSwapped is the magic of a big-endian file.
const perfMagicSwapped = 0x50455246494c4532

// perfHeaderSize is sizeof(struct perf_file_header).
const perfHeaderSize = 104

// perfPipeHeaderSize is sizeof(struct perf_pipe_file_header).
const perfPipeHeaderSize = 16

// perfAttrSizeVer0 is PERF_ATTR_SIZE_VER0, the smallest attr perf accepts.
const perfAttrSizeVer0 = 64

// perfAttrSize is PERF_ATTR_SIZE_VER7 (perf 6.1): the attr size ptjit
// writes. perf 6.1 refuses larger attrs as "incompatible file format".
const perfAttrSize = 128

// perfMaxRecordSize bounds one record: header.size is a u16.
const perfMaxRecordSize = 1<<16 - 1

// ErrPerfDataTruncated reports a record cut short at the end of a file whose
// data size was never fixed up (a writer that crashed). Everything before
// that record is valid.
var ErrPerfDataTruncated = errors.New("record truncated at end of unterminated file")

// PerfDataError is a malformed or unsupported perf.data. Where names the
// part (header, attrs, record, feature ...), Offset is the file offset of
// that part.
type PerfDataError struct {
	File   string
	Where  string
	Offset int64
	Msg    string
	Err    error // optional cause (ErrPerfDataTruncated, an I/O error)
}

func (e *PerfDataError) Error() string {
	return fmt.Sprintf("%s: %s at %#x: %s", e.File, e.Where, e.Offset, e.Msg)
}

func (e *PerfDataError) Unwrap() error { return e.Err }

// PerfSection is a part of the file (must match struct perf_file_section).
type PerfSection struct {
	Offset, Size uint64
}

// PerfFileHeader mirrors struct perf_file_header.
type PerfFileHeader struct {
	Magic      uint64
	Size       uint64
	AttrSize   uint64
	Attrs      PerfSection
	Data       PerfSection
	EventTypes PerfSection
	Features   [4]uint64 // HEADER_FEAT_BITS = 256 bits
}

// HasFeature reports whether feature bit f is set.
func (h *PerfFileHeader) HasFeature(f PerfFeature) bool {
	if f < 0 || f >= 256 {
		return false
	}
	return h.Features[f/64]&(1<<(uint(f)%64)) != 0
}

// perf_event_attr.sample_type bits (enum perf_event_sample_format).
const (
	SampleIP         = 1 << 0
	SampleTID        = 1 << 1
	SampleTime       = 1 << 2
	SampleAddr       = 1 << 3
	SampleRead       = 1 << 4
	SampleCallchain  = 1 << 5
	SampleID         = 1 << 6
	SampleCPU        = 1 << 7
	SamplePeriod     = 1 << 8
	SampleStreamID   = 1 << 9
	SampleRaw        = 1 << 10
	SampleIdentifier = 1 << 16
)

// perf_event_attr flag bits ptjit uses.
const (
	AttrFlagDisabled    = 1 << 0
	AttrFlagSampleIDAll = 1 << 18
	AttrFlagMmap2       = 1 << 23
	AttrFlagContextSw   = 1 << 26
)

// PerfAttr is one event of the recording: the fields of struct
// perf_event_attr that matter to a reader, and the event's ids.
type PerfAttr struct {
	Type         uint32
	Size         uint32
	Config       uint64
	SamplePeriod uint64
	SampleType   uint64
	ReadFormat   uint64
	Flags        uint64
	Config1      uint64
	Config2      uint64
	IDs          []uint64
	// Raw is the attr as stored in the file (header.attr_size - 16 bytes).
	Raw []byte
}

// SampleIDAll reports whether non-sample records carry a sample_id trailer.
func (a *PerfAttr) SampleIDAll() bool { return a.Flags&AttrFlagSampleIDAll != 0 }

// PerfFeature is a feature section number (HEADER_* in perf's header.h).
type PerfFeature int

// Feature numbers.
const (
	FeatTracingData PerfFeature = 1
	FeatBuildID     PerfFeature = 2
	FeatHostname    PerfFeature = 3
	FeatOSRelease   PerfFeature = 4
	FeatVersion     PerfFeature = 5
	FeatArch        PerfFeature = 6
	FeatNrCPUs      PerfFeature = 7
	FeatCPUDesc     PerfFeature = 8
	FeatCPUID       PerfFeature = 9
	FeatTotalMem    PerfFeature = 10
	FeatCmdline     PerfFeature = 11
	FeatEventDesc   PerfFeature = 12
	FeatAuxtrace    PerfFeature = 18
	FeatClockID     PerfFeature = 23
)

// PerfBuildID is one entry of the build-id feature (struct
// perf_record_header_build_id).
type PerfBuildID struct {
	Misc     uint16
	Pid      int32
	ID       []byte
	Filename string
}

// PerfAuxIndexEntry is one entry of the auxtrace feature: the file offset
// and size of an AUXTRACE record.
type PerfAuxIndexEntry struct {
	Offset, Size uint64
}

// PerfFeatures holds the parsed feature sections. Sections holds the
// location of every feature present, parsed or not.
type PerfFeatures struct {
	Sections                  map[PerfFeature]PerfSection
	BuildIDs                  []PerfBuildID
	Hostname                  string
	OSRelease                 string
	Version                   string
	Arch                      string
	CPUDesc                   string
	CPUID                     string
	NrCPUsAvail, NrCPUsOnline uint32
	TotalMem                  uint64
	Cmdline                   []string
	AuxIndex                  []PerfAuxIndexEntry
	ClockID                   uint64
	// EventDesc is the event-desc feature (in a pipe-mode file, also the
	// EVENT_UPDATE records that name an event): each event's name and ids.
	EventDesc []PerfEventDesc
}

// PerfEventDesc names the event whose ids are IDs (an entry of the
// event-desc feature).
type PerfEventDesc struct {
	Name string
	IDs  []uint64
}

// PerfData is an open perf.data file. Its methods may be used from one
// goroutine at a time; several PerfRecordReaders over one PerfData are
// independent.
type PerfData struct {
	Name     string // file name used in errors
	Header   PerfFileHeader
	Attrs    []PerfAttr
	Features PerfFeatures

	// DataStart and DataEnd delimit the record stream. Unterminated is true
	// when the header's data size is 0: a writer did not fix the header up
	// (it crashed or is still writing), and the records run to the end of
	// the file; a record cut short there ends the stream with
	// ErrPerfDataTruncated.
	DataStart, DataEnd int64
	Unterminated       bool
	// CutShort is true when the file ends before the data section the
	// header names (a copy or a write cut short): the records run to the
	// end of the file, as for Unterminated, and the feature sections
	// after the data are gone.
	CutShort bool
	cutErr   error // what the header says that the file contradicts
	// Pipe is true for a pipe-mode file (perf record -o -): a 16-byte
	// header, then records to the end of the file. Its attrs, features and
	// build ids come from HEADER_ATTR, HEADER_FEATURE and HEADER_BUILD_ID
	// records (Header holds only Magic and Size); a record cut short at the
	// end of the file ends the stream with ErrPerfDataTruncated.
	Pipe bool

	r      io.ReaderAt
	size   int64
	closer io.Closer

	// idAttr maps an event id to its attr when attrs differ in sample_type.
	idAttr map[uint64]*PerfAttr
	// common is the attr whose sample_type all attrs share, or nil.
	common *PerfAttr
}

// OpenPerfData opens and parses the header, attrs and features of a
// perf.data file. Close releases it.
func OpenPerfData(path string) (*PerfData, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	p, err := NewPerfData(f, st.Size(), path)
	if err != nil {
		f.Close()
		return nil, err
	}
	p.closer = f
	return p, nil
}

// Close closes the file opened by OpenPerfData.
func (p *PerfData) Close() error {
	if p.closer == nil {
		return nil
	}
	err := p.closer.Close()
	p.closer = nil
	return err
}

// Size is the size of the underlying file.
func (p *PerfData) Size() int64 { return p.size }

// NewPerfData parses a perf.data held by r (size bytes); name is used in
// errors.
func NewPerfData(r io.ReaderAt, size int64, name string) (*PerfData, error) {
	p := &PerfData{Name: name, r: r, size: size}
	if err := p.readHeader(); err != nil {
		return nil, err
	}
	if p.Pipe {
		if err := p.readPipeHeaders(); err != nil {
			return nil, err
		}
		return p, nil
	}
	if err := p.readAttrs(); err != nil {
		return nil, err
	}
	if err := p.readFeatures(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *PerfData) errf(where string, off int64, format string, args ...any) error {
	return &PerfDataError{File: p.Name, Where: where, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// readAt reads exactly n bytes at off after checking the range against the
// file size.
func (p *PerfData) readAt(where string, off int64, n uint64) ([]byte, error) {
	if off < 0 || n > uint64(p.size) || uint64(off) > uint64(p.size)-n {
		return nil, p.errf(where, off, "%#x bytes exceed file size %#x", n, p.size)
	}
	b := make([]byte, n)
	if _, err := p.r.ReadAt(b, off); err != nil && !(err == io.EOF && n == 0) {
		return nil, &PerfDataError{File: p.Name, Where: where, Offset: off, Msg: err.Error(), Err: err}
	}
	return b, nil
}

// inFile reports whether the section lies inside the file.
func (p *PerfData) inFile(s PerfSection) bool {
	return s.Size <= uint64(p.size) && s.Offset <= uint64(p.size)-s.Size
}

func (p *PerfData) readHeader() error {
	if p.size < 16 {
		return p.errf("header", 0, "file of %d bytes is too small for a perf.data header", p.size)
	}
	b, err := p.readAt("header", 0, 16)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	h := &p.Header
	h.Magic = le.Uint64(b)
	h.Size = le.Uint64(b[8:])
	switch h.Magic {
	case perfMagic:
	case perfMagicSwapped:
		return p.errf("header", 0, "big-endian perf.data is not supported")
	default:
		if string(b[:8]) == "PERFFILE" {
			return p.errf("header", 0, "legacy PERFFILE format is not supported")
		}
		return p.errf("header", 0, "bad magic %q (not a perf.data file)", b[:8])
	}
	if h.Size == perfPipeHeaderSize {
		p.Pipe = true
		p.DataStart, p.DataEnd = perfPipeHeaderSize, p.size
		return nil
	}
	if h.Size != perfHeaderSize {
		return p.errf("header", 8, "header size %d, want %d", h.Size, perfHeaderSize)
	}
	b, err = p.readAt("header", 0, perfHeaderSize)
	if err != nil {
		return err
	}
	h.AttrSize = le.Uint64(b[16:])
	sec := func(o int) PerfSection { return PerfSection{le.Uint64(b[o:]), le.Uint64(b[o+8:])} }
	h.Attrs = sec(24)
	h.Data = sec(40)
	h.EventTypes = sec(56)
	for i := range h.Features {
		h.Features[i] = le.Uint64(b[72+8*i:])
	}
	if h.Data.Offset < perfHeaderSize || h.Data.Offset > uint64(p.size) {
		return p.errf("header", 40, "data offset %#x outside file of size %#x", h.Data.Offset, p.size)
	}
	p.DataStart = int64(h.Data.Offset)
	if h.Data.Size == 0 {
		p.Unterminated = true
		p.DataEnd = p.size
	} else {
		p.DataEnd = int64(h.Data.Offset + h.Data.Size)
		if !p.inFile(h.Data) {
			p.CutShort, p.DataEnd = true, p.size
			p.cutErr = p.errf("header", 48, "data section %#x+%#x exceeds file size %#x", h.Data.Offset, h.Data.Size, p.size)
		}
	}
	return nil
}

func (p *PerfData) readAttrs() error {
	h := &p.Header
	if h.AttrSize < perfAttrSizeVer0+16 || h.AttrSize > 4096 {
		return p.errf("header", 16, "attr size %d out of range", h.AttrSize)
	}
	if !p.inFile(h.Attrs) {
		return p.errf("attrs", int64(min(h.Attrs.Offset, uint64(p.size))), "attr section %#x+%#x exceeds file size %#x", h.Attrs.Offset, h.Attrs.Size, p.size)
	}
	if h.Attrs.Size%h.AttrSize != 0 {
		return p.errf("attrs", int64(h.Attrs.Offset), "attr section size %#x is not a multiple of attr size %d", h.Attrs.Size, h.AttrSize)
	}
	n := h.Attrs.Size / h.AttrSize
	if n == 0 {
		return p.errf("attrs", int64(h.Attrs.Offset), "no event attributes")
	}
	raw, err := p.readAt("attrs", int64(h.Attrs.Offset), h.Attrs.Size)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	p.Attrs = make([]PerfAttr, n)
	for i := range p.Attrs {
		off := int64(h.Attrs.Offset) + int64(uint64(i)*h.AttrSize)
		e := raw[uint64(i)*h.AttrSize : uint64(i+1)*h.AttrSize]
		a := &p.Attrs[i]
		a.parse(e[:len(e)-16])
		ids := PerfSection{le.Uint64(e[len(e)-16:]), le.Uint64(e[len(e)-8:])}
		if ids.Size%8 != 0 || !p.inFile(ids) {
			return p.errf("attrs", off, "ids section %#x+%#x of attr %d is invalid for file size %#x", ids.Offset, ids.Size, i, p.size)
		}
		if ids.Size > 0 {
			b, err := p.readAt("attrs", int64(ids.Offset), ids.Size)
			if err != nil {
				return err
			}
			a.IDs = make([]uint64, ids.Size/8)
			for j := range a.IDs {
				a.IDs[j] = le.Uint64(b[8*j:])
			}
		}
	}
	return p.indexAttrs(func(i int) int64 { return int64(h.Attrs.Offset) + int64(uint64(i)*h.AttrSize) })
}

// parse fills a from the attr bytes ab (struct perf_event_attr as stored,
// of any size: one smaller than ours is zero-extended so every field
// reads). Raw aliases ab.
func (a *PerfAttr) parse(ab []byte) {
	le := binary.LittleEndian
	var full [perfAttrSize]byte
	copy(full[:], ab)
	a.Raw = ab
	a.Type = le.Uint32(full[0:])
	a.Size = le.Uint32(full[4:])
	a.Config = le.Uint64(full[8:])
	a.SamplePeriod = le.Uint64(full[16:])
	a.SampleType = le.Uint64(full[24:])
	a.ReadFormat = le.Uint64(full[32:])
	a.Flags = le.Uint64(full[40:])
	a.Config1 = le.Uint64(full[56:])
	a.Config2 = le.Uint64(full[64:])
}

// indexAttrs decides how records find their attr: all attrs share a
// sample_type (p.common), or each must sample IDENTIFIER so that its ids
// name it (p.idAttr). attrOff gives the file offset of attr i for errors.
func (p *PerfData) indexAttrs(attrOff func(i int) int64) error {
	p.common = &p.Attrs[0]
	for i := range p.Attrs {
		if p.Attrs[i].SampleType != p.common.SampleType || p.Attrs[i].SampleIDAll() != p.common.SampleIDAll() {
			p.common = nil
			break
		}
	}
	if p.common == nil {
		p.idAttr = make(map[uint64]*PerfAttr)
		for i := range p.Attrs {
			a := &p.Attrs[i]
			if a.SampleType&SampleIdentifier == 0 {
				return p.errf("attrs", attrOff(i), "events differ in sample_type and attr %d lacks PERF_SAMPLE_IDENTIFIER", i)
			}
			for _, id := range a.IDs {
				p.idAttr[id] = a
			}
		}
	}
	return nil
}

// AttrByID returns the attr that owns event id, or nil.
func (p *PerfData) AttrByID(id uint64) *PerfAttr {
	for i := range p.Attrs {
		for _, x := range p.Attrs[i].IDs {
			if x == id {
				return &p.Attrs[i]
			}
		}
	}
	return nil
}

func (p *PerfData) readFeatures() error {
	h := &p.Header
	f := &p.Features
	f.Sections = make(map[PerfFeature]PerfSection)
	nfeat := 0
	for _, w := range h.Features {
		nfeat += bits.OnesCount64(w)
	}
	if h.HasFeature(0) {
		nfeat-- // HEADER_RESERVED has no section
	}
	if nfeat <= 0 || p.Unterminated || p.CutShort {
		// An unterminated file has no feature sections: they follow the
		// data, which runs to the end of the file.
		return nil
	}
	tableOff := int64(h.Data.Offset + h.Data.Size)
	table, err := p.readAt("feature table", tableOff, uint64(nfeat)*16)
	if err != nil {
		return err
	}
	le := binary.LittleEndian
	i := 0
	for feat := PerfFeature(1); feat < 256; feat++ {
		if !h.HasFeature(feat) {
			continue
		}
		s := PerfSection{le.Uint64(table[16*i:]), le.Uint64(table[16*i+8:])}
		where := fmt.Sprintf("feature %d section entry", feat)
		entryOff := tableOff + int64(16*i)
		i++
		if !p.inFile(s) {
			return p.errf(where, entryOff, "section %#x+%#x exceeds file size %#x", s.Offset, s.Size, p.size)
		}
		f.Sections[feat] = s
		if !featureParsed(feat) {
			continue
		}
		if s.Size > 64<<20 {
			return p.errf(where, entryOff, "section size %#x too large", s.Size)
		}
		b, err := p.readAt(where, int64(s.Offset), s.Size)
		if err != nil {
			return err
		}
		if err := p.parseFeature(feat, int64(s.Offset), b); err != nil {
			return err
		}
	}
	return nil
}

func featureParsed(f PerfFeature) bool {
	switch f {
	case FeatBuildID, FeatHostname, FeatOSRelease, FeatVersion, FeatArch, FeatNrCPUs,
		FeatCPUDesc, FeatCPUID, FeatTotalMem, FeatCmdline, FeatAuxtrace, FeatClockID, FeatEventDesc:
		return true
	}
	return false
}

// featCursor reads a feature section with bounds checks.
type featCursor struct {
	p     *PerfData
	where string
	base  int64
	b     []byte
	off   int
}

func (c *featCursor) fail(format string, args ...any) error {
	return c.p.errf(c.where, c.base+int64(c.off), format, args...)
}

func (c *featCursor) u32() (uint32, error) {
	if len(c.b)-c.off < 4 {
		return 0, c.fail("section ends inside a u32")
	}
	v := binary.LittleEndian.Uint32(c.b[c.off:])
	c.off += 4
	return v, nil
}

func (c *featCursor) u64() (uint64, error) {
	if len(c.b)-c.off < 8 {
		return 0, c.fail("section ends inside a u64")
	}
	v := binary.LittleEndian.Uint64(c.b[c.off:])
	c.off += 8
	return v, nil
}

// str reads a perf header string: u32 length, then length bytes holding a
// NUL-terminated (padded) string.
func (c *featCursor) str() (string, error) {
	n, err := c.u32()
	if err != nil {
		return "", err
	}
	if uint64(n) > uint64(len(c.b)-c.off) {
		return "", c.fail("string length %#x exceeds section", n)
	}
	s := cString(c.b[c.off : c.off+int(n)])
	c.off += int(n)
	return s, nil
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	for i, x := range b {
		if x == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func (p *PerfData) parseFeature(feat PerfFeature, off int64, b []byte) error {
	c := &featCursor{p: p, where: featureName(feat), base: off, b: b}
	f := &p.Features
	var err error
	switch feat {
	case FeatBuildID:
		return p.parseBuildIDs(c)
	case FeatHostname:
		f.Hostname, err = c.str()
	case FeatOSRelease:
		f.OSRelease, err = c.str()
	case FeatVersion:
		f.Version, err = c.str()
	case FeatArch:
		f.Arch, err = c.str()
	case FeatCPUDesc:
		f.CPUDesc, err = c.str()
	case FeatCPUID:
		f.CPUID, err = c.str()
	case FeatNrCPUs:
		if f.NrCPUsAvail, err = c.u32(); err == nil {
			f.NrCPUsOnline, err = c.u32()
		}
	case FeatTotalMem:
		f.TotalMem, err = c.u64()
	case FeatClockID:
		f.ClockID, err = c.u64()
	case FeatCmdline:
		var n uint32
		if n, err = c.u32(); err != nil {
			return err
		}
		if uint64(n) > uint64(len(b)-c.off)/4 {
			return c.fail("cmdline count %d exceeds section", n)
		}
		f.Cmdline = make([]string, 0, n)
		for i := uint32(0); i < n; i++ {
			s, err := c.str()
			if err != nil {
				return err
			}
			f.Cmdline = append(f.Cmdline, s)
		}
	case FeatEventDesc:
		return p.parseEventDesc(c)
	case FeatAuxtrace:
		var n uint64
		if n, err = c.u64(); err != nil {
			return err
		}
		if n > uint64(len(b)-c.off)/16 {
			return c.fail("auxtrace index count %d exceeds section", n)
		}
		f.AuxIndex = make([]PerfAuxIndexEntry, n)
		for i := range f.AuxIndex {
			f.AuxIndex[i].Offset, _ = c.u64()
			f.AuxIndex[i].Size, _ = c.u64()
		}
	}
	return err
}

// perfRecordMiscBuildIDSize is PERF_RECORD_MISC_BUILD_ID_SIZE.
const perfRecordMiscBuildIDSize = 1 << 15

func (p *PerfData) parseBuildIDs(c *featCursor) error {
	le := binary.LittleEndian
	for c.off < len(c.b) {
		rest := c.b[c.off:]
		if len(rest) < 8 {
			return c.fail("build-id record header cut short")
		}
		misc := le.Uint16(rest[4:])
		size := int(le.Uint16(rest[6:]))
		// header 8, pid 4, build_id 24 (20 bytes, size, 3 reserved)
		if size < 36 || size > len(rest) {
			return c.fail("build-id record size %d invalid (%d bytes left)", size, len(rest))
		}
		p.Features.BuildIDs = append(p.Features.BuildIDs, parseBuildID(misc, rest[:size]))
		c.off += size
	}
	return nil
}

// parseBuildID parses one struct perf_record_header_build_id of at least
// 36 bytes (header included).
func parseBuildID(misc uint16, r []byte) PerfBuildID {
	n := 20
	if misc&perfRecordMiscBuildIDSize != 0 && int(r[32]) <= 20 {
		n = int(r[32])
	}
	return PerfBuildID{
		Misc:     misc,
		Pid:      int32(binary.LittleEndian.Uint32(r[8:])),
		ID:       append([]byte(nil), r[12:12+n]...),
		Filename: cString(r[36:]),
	}
}

func featureName(f PerfFeature) string {
	switch f {
	case FeatBuildID:
		return "feature build-id"
	case FeatHostname:
		return "feature hostname"
	case FeatOSRelease:
		return "feature osrelease"
	case FeatVersion:
		return "feature version"
	case FeatArch:
		return "feature arch"
	case FeatNrCPUs:
		return "feature nrcpus"
	case FeatCPUDesc:
		return "feature cpudesc"
	case FeatCPUID:
		return "feature cpuid"
	case FeatTotalMem:
		return "feature total-mem"
	case FeatCmdline:
		return "feature cmdline"
	case FeatAuxtrace:
		return "feature auxtrace"
	case FeatClockID:
		return "feature clockid"
	case FeatEventDesc:
		return "feature event-desc"
	}
	return fmt.Sprintf("feature %d", f)
}

// parseEventDesc parses the event-desc feature (perf's write_event_desc):
// u32 count, u32 attr size, then per event the attr, u32 id count, the
// name (a header string) and the ids.
func (p *PerfData) parseEventDesc(c *featCursor) error {
	n, err := c.u32()
	if err != nil {
		return err
	}
	sz, err := c.u32()
	if err != nil {
		return err
	}
	// Each event takes at least its attr, its id count and a string length.
	if n > 0 && uint64(n) > uint64(len(c.b)-c.off)/(uint64(sz)+8) {
		return c.fail("event-desc count %d with attr size %d exceeds section", n, sz)
	}
	descs := make([]PerfEventDesc, 0, n)
	for i := uint32(0); i < n; i++ {
		c.off += int(sz) // checked above
		nids, err := c.u32()
		if err != nil {
			return err
		}
		name, err := c.str()
		if err != nil {
			return err
		}
		if uint64(nids) > uint64(len(c.b)-c.off)/8 {
			return c.fail("event-desc id count %d exceeds section", nids)
		}
		d := PerfEventDesc{Name: name, IDs: make([]uint64, nids)}
		for j := range d.IDs {
			d.IDs[j], _ = c.u64()
		}
		descs = append(descs, d)
	}
	p.Features.EventDesc = descs
	return nil
}

// Generic event names (perf's event_symbols_hw and event_symbols_sw).
var (
	hwEventNames = []string{"cycles", "instructions", "cache-references", "cache-misses",
		"branch-instructions", "branch-misses", "bus-cycles", "stalled-cycles-frontend",
		"stalled-cycles-backend", "ref-cycles"}
	swEventNames = []string{"cpu-clock", "task-clock", "page-faults", "context-switches",
		"cpu-migrations", "minor-faults", "major-faults", "alignment-faults", "emulation-faults",
		"dummy", "bpf-output", "cgroup-switches"}
)

// EventName names attr i as perf does: its name in the event-desc feature
// (or a pipe-mode EVENT_UPDATE record), else the generic name of a
// hardware or software event, else its type and config.
func (p *PerfData) EventName(i int) string {
	a := &p.Attrs[i]
	for _, d := range p.Features.EventDesc {
		for _, id := range d.IDs {
			if slices.Contains(a.IDs, id) && d.Name != "" {
				return d.Name
			}
		}
	}
	if len(p.Features.EventDesc) == len(p.Attrs) && p.Features.EventDesc[i].Name != "" {
		return p.Features.EventDesc[i].Name
	}
	switch {
	case a.Type == 0 && a.Config < uint64(len(hwEventNames)):
		return hwEventNames[a.Config]
	case a.Type == 1 && a.Config < uint64(len(swEventNames)):
		return swEventNames[a.Config]
	}
	return fmt.Sprintf("type %d config %#x", a.Type, a.Config)
}
