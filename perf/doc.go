// Package perf reads and writes the files perf uses for Intel PT and JIT
// code: perf.data (file header, attributes, features, records, the
// AUXTRACE queues that hold the PT streams and the sideband around them),
// jitdump files (what perf inject --jit reads), and the export of ptjit's
// code versions as jitdump for perf. It also maps raw trace files.
//
// Layers, bottom up: OpenPerfData reads the header, attributes and feature
// sections (perfdata.go) of a file-mode or a pipe-mode perf.data (perf
// record -o -, saved to a file: perfdata_pipe.go), behind one API; Sniff
// tells a perf.data from a raw trace by its first 16 bytes; PerfRecordReader walks records with a reusable
// PerfRecord (perfdata_record.go); LoadPerfTrace assembles each AUX
// queue's PT stream and the sideband with the time conversion
// (perfdata_trace.go), and CheckIntelPT says, naming the recorded events,
// when a perf.data holds no PT; PerfDataWriter writes what perf record writes for
// an intel_pt workload (perfdata_write.go; the soft-PT backend uses it).
// Every struct that mirrors a kernel or perf layout says which one it
// must match, every size read from a file is checked against the file
// before anything is allocated, and every error names the file and the
// byte offset (PerfDataError).
//
// perf sits at the bottom of ptjit with ptpkt and x86: it imports neither
// the decoder, nor the recorder, nor anything above them; of its
// neighbours only ptpkt, for the type of the PT configuration that
// PerfTrace.PTConfig derives from AUXTRACE_INFO. A queue's
// stream is handed to the decoder as a QueueReader (io.ReaderAt with a
// Size), which decode's windows read without knowing perf.data.
//
// Must not import: any ptjit package but internal/platform, ptpkt.
package perf

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
