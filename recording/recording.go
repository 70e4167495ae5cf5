package recording

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/decode"
	"github.com/ptjit/ptjit/internal/elfnote"
	"github.com/ptjit/ptjit/perf"
	"github.com/ptjit/ptjit/ptfmt"
	"github.com/ptjit/ptjit/ptpkt"
)

// Options configure Open.
type Options struct {
	// Warn receives what a decode can go on without (a mapped file that
	// vanished or changed since the recording), one message at a time,
	// without a trailing newline. Nil drops them.
	Warn func(msg string)
	// Incomplete receives the one warning that code.db may not hold all
	// the run did (db.OpenChecked); nil sends it to Warn.
	Incomplete func(msg string)
}

// Recording is an opened recording: the PT streams of DIR/perf.data and
// the code history of DIR/code.db. Its methods are for one goroutine.
type Recording struct {
	PerfPath string
	Trace    *perf.PerfTrace // the PT queues, loaded lazily
	DB       *db.DB

	pd     *perf.PerfData
	mapped *mappedPerfData // pd's bytes
	pidOf  map[int]int     // thread → process
	images map[int]*decode.Image
	// tracedFrom: per process, the TSC its trace starts at (Traces)
	tracedFrom map[int]uint64
	// Unattributed lists, after Traces of a per-CPU recording, the
	// stretches of CPU queues that no thread could be given (DemuxError).
	Unattributed []*DemuxError
	syms         *Symbolizer
	// namesLoaded: the JIT-published names are in syms
	namesLoaded bool
	warn        func(string)
}

// Thread is one PT stream of a recording: a queue of perf.data with the
// thread (and its process) that it traced, or, in a per-CPU recording, the
// thread's stretches of the CPU queues joined in time order (Queue nil,
// CPUs the CPUs it ran on).
type Thread struct {
	TID, PID int
	Queue    *perf.PerfAuxQueue
	CPUs     []int
	Trace    decode.TraceReader // the PT bytes, read from perf.data on demand
}

// String names the stream: "queue N (cpu C, tid T), pid P", or for a
// thread of a per-CPU recording "tid T (cpus C,D of per-CPU queues), pid
// P".
func (t *Thread) String() string {
	if t.Queue == nil {
		cs := make([]string, len(t.CPUs))
		for i, c := range t.CPUs {
			cs[i] = strconv.Itoa(c)
		}
		return fmt.Sprintf("tid %d (cpus %s of per-CPU queues), pid %d", t.TID, strings.Join(cs, ","), t.PID)
	}
	return fmt.Sprintf("%s, pid %d", t.Queue.String(), t.PID)
}

// Origin maps an offset of t's stream to the stretch around it that came
// from one CPU queue: for a per-CPU recording's thread, the CPU and the
// offsets in its queue; for a queue of its own, the queue's CPU (-1) and
// the stream's own offsets.
func (t *Thread) Origin(off uint64) ptfmt.OriginSpan {
	if s, ok := t.Trace.(*threadStream); ok {
		if sp, ok := s.Origin(off); ok {
			return sp
		}
	}
	cpu := -1
	if t.Queue != nil {
		cpu = int(t.Queue.CPU)
	}
	return ptfmt.OriginSpan{From: 0, To: ^uint64(0), CPU: cpu}
}

// Open opens the recording in dir: DIR/perf.data and DIR/code.db. The
// caller closes it.
func Open(dir string, opts Options) (*Recording, error) {
	r := &Recording{PerfPath: filepath.Join(dir, "perf.data"), pidOf: map[int]int{}, images: map[int]*decode.Image{}, tracedFrom: map[int]uint64{}, warn: opts.Warn}
	if r.warn == nil {
		r.warn = func(string) {}
	}
	var err error
	if r.pd, r.mapped, err = openMappedPerfData(r.PerfPath); err != nil {
		return nil, err
	}
	if r.Trace, err = perf.LoadPerfTraceLazy(r.pd); err != nil {
		r.mapped.Close()
		return nil, fmt.Errorf("%s: %v", r.PerfPath, err)
	}
	if r.Trace.Truncated {
		r.warn(r.PerfPath + " is cut short (its writer was killed or met a write error): decoding up to the cut")
	}
	incomplete := opts.Incomplete
	if incomplete == nil {
		incomplete = r.warn
	}
	if r.DB, err = db.OpenChecked(filepath.Join(dir, "code.db"), incomplete); err != nil {
		r.mapped.Close()
		return nil, err
	}
	threads, err := r.DB.Threads()
	if err != nil {
		r.Close()
		return nil, err
	}
	for _, t := range threads {
		r.pidOf[t.TID] = t.PID
	}
	return r, nil
}

// Close releases the files.
func (r *Recording) Close() error {
	err := r.DB.Close()
	if err2 := r.mapped.Close(); err == nil {
		err = err2
	}
	return err
}

// Threads returns the PT streams that hold data, in queue order, each with
// the process its thread belonged to (0 when code.db does not know it).
func (r *Recording) Threads() []Thread {
	var out []Thread
	for _, q := range r.Trace.Queues {
		if q.CPU >= 0 {
			continue // a CPU's queue: see PerCPU and Traces
		}
		if q.Size() == 0 {
			continue
		}
		tid := int(q.Tid)
		out = append(out, Thread{TID: tid, PID: r.pidOf[tid], Queue: q, Trace: q.Reader(r.pd)})
	}
	return out
}

// ThreadTrace is a Thread with the image of its process.
type ThreadTrace struct {
	Thread
	Image *decode.Image
}

// PerCPU reports whether the recording's trace is per CPU (perf record
// -e intel_pt//u on hardware, ptjit run --pt=soft --soft-layout=per-cpu):
// a CPU's queue holds every thread that ran there.
func (r *Recording) PerCPU() bool {
	for _, q := range r.Trace.Queues {
		if q.CPU >= 0 && q.Size() > 0 {
			return true
		}
	}
	return false
}

// Traces returns the streams of Threads, only thread tid's when tid > 0,
// each with its process's image. In a per-CPU recording each thread's
// stream is demultiplexed from the CPU queues by the sideband (demux.go;
// what could not be attributed is in Unattributed). A recording with no
// such stream is an error, except in a PT recording whose trace holds no
// bytes (--pt=soft --soft-filter=jit on a program that ran no JIT code):
// that is a trace of nothing, and decodes to no instruction.
func (r *Recording) Traces(tid int) ([]ThreadTrace, error) {
	var out []ThreadTrace
	threads := r.Threads()
	if r.PerCPU() {
		var cfg ptpkt.Config
		r.PTConfig(&cfg, func(string) bool { return false })
		ds, problems, err := r.demux(&cfg)
		if err != nil {
			return nil, err
		}
		r.Unattributed = problems
		threads = threads[:0]
		for _, d := range ds {
			threads = append(threads, Thread{TID: d.tid, PID: d.pid, CPUs: d.cpus, Trace: d.stream})
		}
	}
	var cfg ptpkt.Config
	r.PTConfig(&cfg, func(string) bool { return false })
	for _, t := range threads {
		// when each process's trace starts (its earliest thread's first
		// PSB): what was gone before has no code the trace runs through
		if first, ok, err := decode.FirstTSC(t.Trace, &cfg); err == nil && ok {
			if s, seen := r.tracedFrom[t.PID]; !seen || first < s {
				r.tracedFrom[t.PID] = first
			}
		}
	}
	for _, t := range threads {
		if tid > 0 && t.TID != tid {
			continue
		}
		img, err := r.Image(t.PID)
		if err != nil {
			return nil, err
		}
		out = append(out, ThreadTrace{t, img})
	}
	switch {
	case len(out) > 0:
		return out, nil
	case tid <= 0 && len(r.Unattributed) > 0:
		return nil, nil // nothing attributed: Sources reports why
	case tid > 0:
		return nil, fmt.Errorf("%s: no trace for thread %d", r.PerfPath, tid)
	case r.Trace.PTAttr != nil && r.Trace.Info != nil:
		return nil, nil // an Intel PT recording that traced nothing
	}
	return nil, fmt.Errorf("%s: no Intel PT trace in the file", r.PerfPath)
}

// PTConfig sets in c the PT timing configuration the recording was made
// with (perf.PerfTrace.PTConfig), except what given reports as given.
func (r *Recording) PTConfig(c *ptpkt.Config, given func(option string) bool) {
	r.Trace.PTConfig(c, given)
}

// Symbolizer returns the recording's symbolizer (shared, safe for
// concurrent use).
func (r *Recording) Symbolizer() *Symbolizer {
	if r.syms == nil {
		r.syms = NewSymbolizer()
	}
	return r.syms
}

// Image returns the image of process pid, built on first use (BuildImage).
func (r *Recording) Image(pid int) (*decode.Image, error) {
	if img, ok := r.images[pid]; ok {
		return img, nil
	}
	img, err := BuildImage(r.DB, pid, r.tracedFrom[pid], r.warn)
	if err != nil {
		return nil, err
	}
	if !r.namesLoaded {
		// every process's names at once: tags are unique in a recording
		// and a vfork child runs its owner's code
		r.namesLoaded = true
		names, err := LoadNames(r.DB, 0, nil)
		if err != nil {
			return nil, err
		}
		r.Symbolizer().AddNames(names)
	}
	r.images[pid] = img
	return img, nil
}

// BuildImage loads what pid executed from code.db: its file-backed
// mappings (bytes read from the files, each valid from its mmap to its
// munmap) and its code versions (valid for their TSC ranges). A vfork child
// runs in its parent's address space until it execs: for that time the
// owner's mappings and versions are its own. A mapped file that cannot be
// read as it was mapped is reported through warn and left out, so its code
// decodes as unmapped, never guessed; when it was gone by tracedFrom (the
// TSC at which the process's trace starts; 0: unknown), no instruction of
// the trace can have run there, and it is left out without a warning (ld.so
// maps a library's whole span at its first segment's offset and then its
// later segments over it: for some microseconds a piece of that first
// mapping lies past the end of the file, as libLLVM's did).
func BuildImage(cdb *db.DB, pid int, tracedFrom uint64, warn func(string)) (*decode.Image, error) {
	img := decode.NewImage()
	src := &versionSource{cdb: cdb, warn: warn}
	files := map[string][]byte{}
	procs, err := cdb.Processes()
	if err != nil {
		return nil, err
	}
	for _, sp := range addressSpaces(procs, pid) {
		maps, err := cdb.FileMaps(sp.pid)
		if err != nil {
			return nil, err
		}
		for _, m := range maps {
			from, to := max(m.Map.TSC, sp.from), uint64(decode.AlwaysValid)
			if m.HasUnmap {
				to = m.Unmap.TSC
			}
			to = min(to, sp.to)
			if to <= from {
				continue
			}
			data, err := mappedFile(files, &m)
			if err == nil {
				err = img.AddFileVersion(m.Path, data, m.Offset, m.Addr, from, to)
			}
			if err != nil && to > tracedFrom {
				// The file vanished, changed or shrank since the
				// recording, or was mapped past its end while the
				// trace ran.
				warn(fmt.Sprintf("%s: %v", cdb.Path(), err))
			}
		}
		// versions one at a time: a recording may hold tens of thousands
		err = cdb.EachVersion(db.VersionFilter{PID: sp.pid}, func(v *db.VersionInfo) error {
			from, to := max(v.Valid.TSC, sp.from), uint64(decode.AlwaysValid)
			if v.HasEnd {
				to = v.End.TSC
			}
			to = min(to, sp.to)
			if to <= from {
				return nil // never valid (for this process)
			}
			// Read when the trace first runs there (decode/lazy.go): a
			// recording of many versions costs what its trace runs
			// through.
			if err := img.AddLazyVersion(v.Addr, v.Size, from, to, versionTag(v.Region, v.Vno), src, v.ID); err != nil {
				return fmt.Errorf("%s: %v", cdb.Path(), err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return img, nil
}

// versionSource reads code versions for an image (decode.CodeSource): an
// unreadable version (a damaged code.db) is told through warn once and
// decodes as unmapped.
type versionSource struct {
	cdb    *db.DB
	warn   func(string)
	warned sync.Once
}

func (s *versionSource) Code(id int64) ([]byte, error) {
	data, err := s.cdb.VersionBytes(id)
	if err != nil {
		s.warned.Do(func() { s.warn(err.Error() + " (its code decodes as unmapped)") })
	}
	return data, err
}

// space is a TSC range during which a process ran in pid's address space.
type space struct {
	pid      int
	from, to uint64
}

// addressSpaces returns the address spaces process pid ran in: its own,
// always, and, for each image of pid that is a vfork child before its exec,
// the owner's for the life of that image.
func addressSpaces(procs []db.ProcessInfo, pid int) []space {
	spaces := []space{{pid, 0, decode.AlwaysValid}}
	for _, p := range procs {
		if p.PID == pid && p.VMOwner != 0 {
			to := uint64(decode.AlwaysValid)
			if p.HasEnd {
				to = p.End.TSC
			}
			spaces = append(spaces, space{p.VMOwner, p.Start.TSC, to})
		}
	}
	return spaces
}

// mappedFile returns the bytes a file mapping mapped, reading each file
// once, after checking that the file is still the one that was mapped
// (its GNU build-id, when the recording has one).
func mappedFile(cache map[string][]byte, m *db.FileMapInfo) ([]byte, error) {
	data, ok := cache[m.Path]
	if !ok {
		var err error
		// Mapped, not read: only the pages the trace runs through
		// are touched (reading libc whole was 4% of decoding a
		// small recording).
		if data, err = perf.MapFile(m.Path); err != nil {
			return nil, err
		}
		if len(m.BuildID) > 0 {
			id, err := elfnote.BuildID(m.Path)
			if err == nil && !bytes.Equal(id, m.BuildID) {
				return nil, fmt.Errorf("%s: build-id %x, the recording mapped build-id %x", m.Path, id, m.BuildID)
			}
		}
		cache[m.Path] = data
	}
	if m.Offset >= uint64(len(data)) {
		return nil, fmt.Errorf("%s: mapped at offset %#x, beyond the end of the file (%#x bytes)", m.Path, m.Offset, len(data))
	}
	// A mapping may extend past the end of the file (the rest of the last
	// page): only the file's bytes are code.
	return data[m.Offset:min(uint64(len(data)), m.Offset+m.Size)], nil
}
