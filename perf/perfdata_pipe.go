package perf

// Pipe-mode perf.data (perf record -o -, saved to a file) and recognising
// a perf.data by its first bytes.
//
// A pipe-mode file is struct perf_pipe_file_header (magic "PERFILE2", size
// 16) followed by records up to the end of the file. What a file-mode
// header locates is carried by records instead (perf's
// Documentation/perf.data-file-format.txt, util/header.c):
//
//	HEADER_ATTR     struct perf_record_header_attr: the attr (attr.size
//	                bytes), then the event's ids (u64) to the record end
//	HEADER_FEATURE  struct perf_record_header_feature: u64 feature id, then
//	                the feature's section, as in a file-mode file
//	HEADER_BUILD_ID struct perf_record_header_build_id, as in the build-id
//	                feature
//	EVENT_UPDATE    an event's name (type PERF_EVENT_UPDATE__NAME), which a
//	                file-mode file keeps in the event-desc feature
//
// AUXTRACE records carry their data inline, as in file mode. perf writes
// the attrs before the records that need them, but perf inject may add an
// attr later; records are parsed with the attrs, so NewPerfData walks the
// whole file once (headers only: AUXTRACE and tracing data are skipped,
// not read) to collect them before any record is parsed.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// perfEventUpdateName is PERF_EVENT_UPDATE__NAME.
const perfEventUpdateName = 2

// maxPipeAttrs bounds the HEADER_ATTR records of a pipe-mode file (perf
// records a handful of events).
const maxPipeAttrs = 1 << 12

// readPipeHeaders reads the HEADER_ATTR, HEADER_FEATURE and
// HEADER_BUILD_ID records of a pipe-mode file.
func (p *PerfData) readPipeHeaders() error {
	p.Features.Sections = make(map[PerfFeature]PerfSection)
	rr := p.Records()
	rr.headersOnly = true
	le := binary.LittleEndian
	var rec PerfRecord
	var attrOffs []int64
	for {
		err := rr.Next(&rec)
		if err == io.EOF || errors.Is(err, ErrPerfDataTruncated) {
			// A cut record is reported again when the records are read.
			break
		}
		if err != nil {
			return err
		}
		switch rec.Type {
		case RecHeaderAttr:
			if len(p.Attrs) >= maxPipeAttrs {
				return rr.fail(rec.Offset, nil, "more than %d HEADER_ATTR records", maxPipeAttrs)
			}
			pl := rec.Raw
			if len(pl) < perfAttrSizeVer0 {
				return rr.fail(rec.Offset, nil, "HEADER_ATTR payload %d bytes is smaller than an attr (%d)", len(pl), perfAttrSizeVer0)
			}
			// attr.size 0 means PERF_ATTR_SIZE_VER0 (the kernel's rule).
			n := int(le.Uint32(pl[4:]))
			if n == 0 {
				n = perfAttrSizeVer0
			}
			if n < perfAttrSizeVer0 || n%8 != 0 || n > len(pl) {
				return rr.fail(rec.Offset, nil, "HEADER_ATTR attr size %d invalid for a %d-byte payload", n, len(pl))
			}
			if (len(pl)-n)%8 != 0 {
				return rr.fail(rec.Offset, nil, "HEADER_ATTR ids of %d bytes are not a multiple of 8", len(pl)-n)
			}
			var a PerfAttr
			a.parse(append([]byte(nil), pl[:n]...))
			a.IDs = make([]uint64, (len(pl)-n)/8)
			for j := range a.IDs {
				a.IDs[j] = le.Uint64(pl[n+8*j:])
			}
			p.Attrs = append(p.Attrs, a)
			attrOffs = append(attrOffs, rec.Offset)
		case RecHeaderFeature:
			if len(rec.Raw) < 8 {
				return rr.fail(rec.Offset, nil, "HEADER_FEATURE payload %d bytes, need 8", len(rec.Raw))
			}
			id := le.Uint64(rec.Raw)
			if id == 0 || id >= 256 {
				return rr.fail(rec.Offset, nil, "HEADER_FEATURE feature %d out of range", id)
			}
			feat := PerfFeature(id)
			off := rec.Offset + 16
			sec := rec.Raw[8:]
			p.Features.Sections[feat] = PerfSection{Offset: uint64(off), Size: uint64(len(sec))}
			if featureParsed(feat) {
				// The record buffer is reused: parse a copy.
				if err := p.parseFeature(feat, off, append([]byte(nil), sec...)); err != nil {
					return err
				}
			}
		case RecEventUpdate:
			// struct perf_record_event_update: u64 type, u64 id, then the
			// data; type PERF_EVENT_UPDATE__NAME (2) names the event.
			if len(rec.Raw) >= 16 && le.Uint64(rec.Raw) == perfEventUpdateName {
				p.Features.EventDesc = append(p.Features.EventDesc,
					PerfEventDesc{Name: cString(rec.Raw[16:]), IDs: []uint64{le.Uint64(rec.Raw[8:])}})
			}
		case RecHeaderBuildID:
			if int(rec.Size) < 36 {
				return rr.fail(rec.Offset, nil, "HEADER_BUILD_ID size %d is smaller than 36", rec.Size)
			}
			// parseBuildID reads the record with its 8-byte header.
			full := make([]byte, 8, rec.Size)
			full = append(full, rec.Raw...)
			p.Features.BuildIDs = append(p.Features.BuildIDs, parseBuildID(rec.Misc, full))
		}
	}
	if len(p.Attrs) == 0 {
		return p.errf("header", 0, "pipe-mode perf.data has no HEADER_ATTR record")
	}
	return p.indexAttrs(func(i int) int64 { return attrOffs[i] })
}

// Kind is what the first bytes of a file say it is.
type Kind int

const (
	// NotPerfData is anything else: a raw trace, an empty file.
	NotPerfData Kind = iota
	// PerfDataFile is a file-mode perf.data (perf record -o FILE).
	PerfDataFile
	// PerfDataPipe is a pipe-mode perf.data (perf record -o -).
	PerfDataPipe
	// PerfDataUnsupported has a perf magic in a form ptjit does not read
	// (big-endian, the legacy PERFFILE format, an unknown header size):
	// OpenPerfData says which.
	PerfDataUnsupported
)

func (k Kind) String() string {
	switch k {
	case NotPerfData:
		return "not a perf.data"
	case PerfDataFile:
		return "perf.data"
	case PerfDataPipe:
		return "pipe-mode perf.data"
	case PerfDataUnsupported:
		return "unsupported perf.data"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// IsPerfData reports whether the file is some perf.data, to be opened with
// OpenPerfData (which reports an unsupported one), not read as raw trace.
func (k Kind) IsPerfData() bool { return k != NotPerfData }

// Sniff tells a perf.data from anything else by its first 16 bytes: the
// magic "PERFILE2" (or its byte-swapped or legacy forms) and the header
// size, 104 for file mode and 16 for pipe mode. A file too short for a
// magic is NotPerfData; only a read error is returned as an error.
func Sniff(r io.ReaderAt) (Kind, error) {
	var b [16]byte
	n, err := r.ReadAt(b[:], 0)
	if err != nil && err != io.EOF {
		return NotPerfData, err
	}
	if n < 8 {
		return NotPerfData, nil
	}
	switch magic := binary.LittleEndian.Uint64(b[:]); {
	case magic == perfMagicSwapped, string(b[:8]) == "PERFFILE":
		return PerfDataUnsupported, nil
	case magic != perfMagic:
		return NotPerfData, nil
	}
	if n < 16 {
		// Cut inside the header: OpenPerfData reports it.
		return PerfDataFile, nil
	}
	switch binary.LittleEndian.Uint64(b[8:]) {
	case perfHeaderSize:
		return PerfDataFile, nil
	case perfPipeHeaderSize:
		return PerfDataPipe, nil
	}
	return PerfDataUnsupported, nil
}

// SniffFile is Sniff on the file at path.
func SniffFile(path string) (Kind, error) {
	f, err := os.Open(path)
	if err != nil {
		return NotPerfData, err
	}
	defer f.Close()
	k, err := Sniff(f)
	if err != nil {
		return NotPerfData, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}
