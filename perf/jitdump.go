package perf

// jitdump files: the format JITs write for perf (tools/perf/Documentation/
// jitdump-specification.txt). ptjit writes one per process from the code
// versions it recorded, so that `perf inject --jit` can give perf the JIT
// code no running JIT told it about. Only the records ptjit writes are
// produced; the reader accepts every record type and skips the ones it
// does not decode.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// jitdump constants (jitdump.h).
const (
	JitDumpMagic          = 0x4A695444
	JitDumpVersion        = 1
	JitDumpHeaderSize     = 40
	JitDumpElfMachX86_64  = 62
	JitDumpFlagArchTime   = 1 // JITDUMP_FLAGS_ARCH_TIMESTAMP: timestamps are TSC
	JitCodeLoad           = 0
	JitCodeMove           = 1
	JitCodeDebugInfo      = 2
	JitCodeClose          = 3
	JitCodeUnwindingInfo  = 4
	jitRecordHeaderSize   = 16
	jitCodeLoadFixedSize  = jitRecordHeaderSize + 40
	jitDumpMaxRecordBytes = 1 << 30 // a single JIT code load larger than 1 GiB is refused
)

// JitDumpHeader mirrors struct jitheader.
type JitDumpHeader struct {
	Magic     uint32
	Version   uint32
	TotalSize uint32
	ElfMach   uint32
	Pid       uint32
	Timestamp uint64
	Flags     uint64
}

// JitLoad is one JIT_CODE_LOAD record: Code was made executable at
// CodeAddr by thread Tid of Pid at time Timestamp (TSC when the dump has
// JitDumpFlagArchTime).
type JitLoad struct {
	Pid, Tid  uint32
	VMA       uint64
	CodeAddr  uint64
	Index     uint64
	Name      string
	Code      []byte
	Timestamp uint64
}

// JitDumpWriter writes a jitdump file with TSC timestamps.
type JitDumpWriter struct {
	path string
	f    *os.File
	bw   *bufio.Writer
	err  error
}

// CreateJitDump creates path and writes the jitdump header for pid with
// the TSC timestamp tsc.
func CreateJitDump(path string, pid int, tsc uint64) (*JitDumpWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w := &JitDumpWriter{path: path, f: f, bw: bufio.NewWriter(f)}
	le := binary.LittleEndian
	h := make([]byte, 0, JitDumpHeaderSize)
	h = le.AppendUint32(h, JitDumpMagic)
	h = le.AppendUint32(h, JitDumpVersion)
	h = le.AppendUint32(h, JitDumpHeaderSize)
	h = le.AppendUint32(h, JitDumpElfMachX86_64)
	h = le.AppendUint32(h, 0) // pad1
	h = le.AppendUint32(h, uint32(pid))
	h = le.AppendUint64(h, tsc)
	h = le.AppendUint64(h, JitDumpFlagArchTime)
	w.write(h)
	if w.err != nil {
		f.Close()
		return nil, w.err
	}
	return w, nil
}

func (w *JitDumpWriter) write(b []byte) {
	if w.err != nil {
		return
	}
	if _, err := w.bw.Write(b); err != nil {
		w.err = fmt.Errorf("%s: %w", w.path, err)
	}
}

// Load writes a JIT_CODE_LOAD record (struct jr_code_load, then the
// NUL-terminated name, then the code bytes).
func (w *JitDumpWriter) Load(l *JitLoad) {
	total := uint64(jitCodeLoadFixedSize) + uint64(len(l.Name)) + 1 + uint64(len(l.Code))
	if total > jitDumpMaxRecordBytes {
		if w.err == nil {
			w.err = fmt.Errorf("%s: code load %q of %d bytes is too large for a jitdump record", w.path, l.Name, len(l.Code))
		}
		return
	}
	le := binary.LittleEndian
	b := make([]byte, 0, jitCodeLoadFixedSize+len(l.Name)+1)
	b = le.AppendUint32(b, JitCodeLoad)
	b = le.AppendUint32(b, uint32(total))
	b = le.AppendUint64(b, l.Timestamp)
	b = le.AppendUint32(b, l.Pid)
	b = le.AppendUint32(b, l.Tid)
	b = le.AppendUint64(b, l.VMA)
	b = le.AppendUint64(b, l.CodeAddr)
	b = le.AppendUint64(b, uint64(len(l.Code)))
	b = le.AppendUint64(b, l.Index)
	b = append(b, l.Name...)
	b = append(b, 0)
	w.write(b)
	w.write(l.Code)
}

// Close writes a JIT_CODE_CLOSE record with timestamp tsc and closes the
// file.
func (w *JitDumpWriter) Close(tsc uint64) error {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, JitCodeClose)
	b = le.AppendUint32(b, jitRecordHeaderSize)
	b = le.AppendUint64(b, tsc)
	w.write(b)
	if w.err == nil {
		if err := w.bw.Flush(); err != nil {
			w.err = fmt.Errorf("%s: %w", w.path, err)
		}
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = fmt.Errorf("%s: %w", w.path, err)
	}
	return w.err
}

// JitDumpError is a malformed jitdump: the file and the offset of the bad
// header or record.
type JitDumpError struct {
	File   string
	Offset int64
	Msg    string
}

func (e *JitDumpError) Error() string {
	return fmt.Sprintf("%s: jitdump at %#x: %s", e.File, e.Offset, e.Msg)
}

// JitDump is a parsed jitdump file: its header and its code loads (other
// record types are counted in Skipped).
type JitDump struct {
	Header  JitDumpHeader
	Loads   []JitLoad
	Closed  bool // a JIT_CODE_CLOSE record was seen
	Skipped int
}

// ReadJitDump parses the jitdump held by r (size bytes); name is used in
// errors. Every record size is checked against the file before its bytes
// are read.
func ReadJitDump(r io.ReaderAt, size int64, name string) (*JitDump, error) {
	fail := func(off int64, format string, args ...any) error {
		return &JitDumpError{File: name, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if size < JitDumpHeaderSize {
		return nil, fail(0, "file of %d bytes is too small for a header", size)
	}
	var hb [JitDumpHeaderSize]byte
	if _, err := r.ReadAt(hb[:], 0); err != nil {
		return nil, fail(0, "%v", err)
	}
	h, err := ParseJitHeader(hb[:], name)
	if err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	d := &JitDump{Header: h}
	if h.TotalSize < JitDumpHeaderSize || int64(h.TotalSize) > size {
		return nil, fail(8, "header size %d invalid for file size %d", h.TotalSize, size)
	}
	off := int64(h.TotalSize)
	var rh [jitRecordHeaderSize]byte
	for off < size {
		if size-off < jitRecordHeaderSize {
			return nil, fail(off, "record header cut short (%d bytes left)", size-off)
		}
		if _, err := r.ReadAt(rh[:], off); err != nil {
			return nil, fail(off, "%v", err)
		}
		id := le.Uint32(rh[0:])
		total := int64(le.Uint32(rh[4:]))
		if total < jitRecordHeaderSize || total > size-off {
			return nil, fail(off, "record id %d size %d exceeds file (%d bytes left)", id, total, size-off)
		}
		switch id {
		case JitCodeLoad:
			b := make([]byte, total)
			if _, err := r.ReadAt(b, off); err != nil {
				return nil, fail(off, "%v", err)
			}
			l, msg := decodeJitLoad(b)
			if msg != "" {
				return nil, fail(off, "%s", msg)
			}
			d.Loads = append(d.Loads, l)
		case JitCodeClose:
			d.Closed = true
		default:
			d.Skipped++
		}
		off += total
	}
	return d, nil
}

// decodeJitLoad decodes the JIT_CODE_LOAD record b (its header
// included); msg says what is wrong with a record that cannot be one.
func decodeJitLoad(b []byte) (l JitLoad, msg string) {
	le := binary.LittleEndian
	if len(b) < jitCodeLoadFixedSize+1 {
		return l, fmt.Sprintf("JIT_CODE_LOAD size %d too small", len(b))
	}
	l.Timestamp = le.Uint64(b[8:])
	l.Pid = le.Uint32(b[16:])
	l.Tid = le.Uint32(b[20:])
	l.VMA = le.Uint64(b[24:])
	l.CodeAddr = le.Uint64(b[32:])
	codeSize := le.Uint64(b[40:])
	l.Index = le.Uint64(b[48:])
	rest := b[jitCodeLoadFixedSize:]
	nameLen := bytes.IndexByte(rest, 0)
	if nameLen < 0 {
		return l, "JIT_CODE_LOAD name not NUL-terminated"
	}
	if codeSize != uint64(len(rest)-nameLen-1) {
		return l, fmt.Sprintf("JIT_CODE_LOAD code size %d does not match record size %d", codeSize, len(b))
	}
	l.Name = string(rest[:nameLen])
	l.Code = rest[nameLen+1:]
	return l, ""
}

// ParseJitHeader parses the header at the start of b, the first bytes of
// a jitdump file called name.
func ParseJitHeader(b []byte, name string) (JitDumpHeader, error) {
	var h JitDumpHeader
	if len(b) < JitDumpHeaderSize {
		return h, &JitDumpError{File: name, Msg: fmt.Sprintf("%d bytes are too few for a header", len(b))}
	}
	le := binary.LittleEndian
	h.Magic = le.Uint32(b[0:])
	h.Version = le.Uint32(b[4:])
	h.TotalSize = le.Uint32(b[8:])
	h.ElfMach = le.Uint32(b[12:])
	h.Pid = le.Uint32(b[20:])
	h.Timestamp = le.Uint64(b[24:])
	h.Flags = le.Uint64(b[32:])
	if h.Magic != JitDumpMagic {
		return h, &JitDumpError{File: name, Msg: fmt.Sprintf("bad magic %#x (not a little-endian jitdump)", h.Magic)}
	}
	if h.TotalSize < JitDumpHeaderSize {
		return h, &JitDumpError{File: name, Offset: 8, Msg: fmt.Sprintf("header size %d too small", h.TotalSize)}
	}
	return h, nil
}

// ParseJitRecords parses the complete records at the start of b, the
// bytes of jitdump file name from offset off on (a record boundary), as a
// reader of a file its JIT is still writing does: it returns the code
// loads, the bytes they and the other records used (up to the first
// record not complete yet), and an error at a record that cannot be one.
// Loads alias b.
func ParseJitRecords(b []byte, off int64, name string) (loads []JitLoad, used int, err error) {
	le := binary.LittleEndian
	for len(b)-used >= jitRecordHeaderSize {
		rec := b[used:]
		id, total := le.Uint32(rec[0:]), int(le.Uint32(rec[4:]))
		if total < jitRecordHeaderSize || total > jitDumpMaxRecordBytes {
			return loads, used, &JitDumpError{File: name, Offset: off + int64(used), Msg: fmt.Sprintf("record id %d size %d invalid", id, total)}
		}
		if total > len(rec) {
			break // still being written
		}
		if id == JitCodeLoad {
			l, msg := decodeJitLoad(rec[:total])
			if msg != "" {
				return loads, used, &JitDumpError{File: name, Offset: off + int64(used), Msg: msg}
			}
			loads = append(loads, l)
		}
		used += total
	}
	return loads, used, nil
}

// OpenJitDump reads a jitdump file.
func OpenJitDump(path string) (*JitDump, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return ReadJitDump(f, st.Size(), path)
}
