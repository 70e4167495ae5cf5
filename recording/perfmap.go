package recording

import (
	"io"
	"os"

	"golang.org/x/sys/unix"

	"github.com/ptjit/ptjit/perf"
)

// mappedPerfData is a recording's perf.data mapped read-only
// as the perf.data reader's io.ReaderAt: the trace windows and the
// sideband are copied from the page cache in user space instead of a
// pread each (on this project's VM the kernel's copy cost 10–13% of
// decoding a soft-PT recording; see BENCHMARKS.md). The reader copies
// whatever it reads, so nothing refers to the mapping once Close unmaps it;
// a read after Close fails with os.ErrClosed.
type mappedPerfData struct {
	data   []byte
	mapped bool // data is a mapping (not a regular file: read whole)
}

// openMappedPerfData maps path and opens it as a perf.data.
func openMappedPerfData(path string) (*perf.PerfData, *mappedPerfData, error) {
	m := &mappedPerfData{}
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	st, err := f.Stat()
	if err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		// Not populated: a decode of a time window reads only its
		// part of a large recording (and populating measured no
		// faster: the kernel maps page-cache pages 16 at a fault).
		m.data, err = unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
		m.mapped = err == nil
	}
	f.Close()
	if !m.mapped {
		// A pipe, an empty file, or no mapping: read it.
		if m.data, err = os.ReadFile(path); err != nil {
			return nil, nil, err
		}
	}
	data := m.data
	pd, err := perf.NewPerfData(m, int64(len(data)), path)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return pd, m, nil
}

// ReadAt implements io.ReaderAt.
func (m *mappedPerfData) ReadAt(b []byte, off int64) (int, error) {
	if m.data == nil {
		return 0, os.ErrClosed
	}
	if off < 0 || off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(b, m.data[off:])
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

// Bytes returns the file's bytes (nil once closed): the perf package reads
// records from them without copying.
func (m *mappedPerfData) Bytes() []byte { return m.data }

// Close unmaps the file.
func (m *mappedPerfData) Close() error {
	data := m.data
	m.data = nil
	if data == nil || !m.mapped {
		return nil
	}
	return unix.Munmap(data)
}
