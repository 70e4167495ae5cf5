package tracker

import (
	"strconv"
	"time"

	"github.com/ptjit/ptjit/db"
)

// Stats are the summary numbers of a trace. The tracker counts them while
// it runs (Result.Stats); the caller that ran the trace adds what only it
// sees (the last group) and stores them with WriteMeta. Every field has a
// key in the recording's meta table (Meta).
type Stats struct {
	Processes, Threads int
	Regions, Versions  int
	FileMaps           int
	Stops              int64
	StopNS             int64
	Bytes              int64
	ReadErrors         int
	Pinned             bool
	// W^X
	Writes      int // stores recorded (precise)
	Emulated    int // of which emulated
	Stepped     int // of which single-stepped
	BatchWrites int // pages made writable in batch mode
	// KernelWrites: pages made writable (batch) for a kernel copy into
	// code W^X protects (kwrite_linux_amd64.go)
	KernelWrites int
	// Fresh memory (wxFreshEffect): pages of new RWX mappings started
	// as batch pages, and of those the ones recorded at a first execution
	FreshMapped, FreshExecuted int
	// Thread stacks and control blocks in W^X memory
	// (wx_tcb_linux_amd64.go): their writable-and-executable pages, kept
	// writable for the kernel's writes, and of those the ones executed
	// (then left writable and executable)
	TCBPages, TCBExecuted int
	Injected              int // syscalls ptjit ran in the tracee
	// Proxies: protection proxies made (proxy_linux_amd64.go); ProxyCalls:
	// the mprotect calls they ran instead of an injection
	Proxies, ProxyCalls int
	// FullProtect: processes given the filter that stops every mprotect
	// (memory ptjit manages; fullprotect_linux_amd64.go)
	FullProtect int
	// RangeProtect: processes given filters that stop the mprotects of
	// the memory ptjit manages there only; RangeFilters: those filters
	RangeProtect, RangeFilters int
	// Names the program published (perf-map lines and jitdump code loads read)
	Names int
	// WriterWaits and WriterWaitNS: how often and how long the tracker
	// (so the stopped program) waited for the database writer, which
	// happens only when db's back-pressure bound of queued code is reached
	WriterWaits  int
	WriterWaitNS int64
	// Copy: how versions were read (pages_linux_amd64.go)
	Copy CopyStats
	// Events: the BPF event source's numbers (events_linux_amd64.go):
	// events read, applied from the ring, bytes of versions taken from
	// them, fallbacks, records the ring had no room for
	Events EventStats

	// Set by the caller that ran the trace (ptrun), not by the tracker:
	// the --wx mode (Options.WX; "" is off), the wall time from the start
	// of the trace to the program's end, and ptjit's own peak resident
	// set size (not the program's) and CPU time (user, system; all its
	// threads, not the program) up to then: what the recording cost.
	WX             WXMode
	Wall           time.Duration
	TracerMaxRSSKB int64
	TracerUser     time.Duration
	TracerSys      time.Duration
}

// MetaRow is one row of a recording's meta table.
type MetaRow struct{ Key, Value string }

// Meta returns every field of s as a meta row, in a fixed order: numbers
// in decimal, durations in nanoseconds, booleans as true or false. The
// keys are part of the recording's format (ptjit-bench and the tests read
// them by name); TestStatsMeta fails when a field has no row.
func (s *Stats) Meta() []MetaRow {
	i := strconv.Itoa
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	ns := func(d time.Duration) string { return i64(d.Nanoseconds()) }
	return []MetaRow{
		{"processes", i(s.Processes)},
		{"threads", i(s.Threads)},
		{"regions", i(s.Regions)},
		{"versions", i(s.Versions)},
		{"file_maps", i(s.FileMaps)},
		{"stops", i64(s.Stops)},
		{"stop_ns", i64(s.StopNS)},
		{"snapshot_bytes", i64(s.Bytes)},
		{"read_errors", i(s.ReadErrors)},
		{"pinned", strconv.FormatBool(s.Pinned)},
		{"wx_writes", i(s.Writes)},
		{"wx_emulated", i(s.Emulated)},
		{"wx_stepped", i(s.Stepped)},
		{"wx_batch_pages", i(s.BatchWrites)},
		{"wx_kernel_write_pages", i(s.KernelWrites)},
		{"wx_fresh_pages", i(s.FreshMapped)},
		{"wx_fresh_executed", i(s.FreshExecuted)},
		{"wx_tcb_pages", i(s.TCBPages)},
		{"wx_tcb_executed", i(s.TCBExecuted)},
		{"injected_syscalls", i(s.Injected)},
		// the protection proxies made and the calls they ran (tracker/doc.go)
		{"proxies", i(s.Proxies)},
		{"proxy_calls", i(s.ProxyCalls)},
		// processes where every mprotect stops (ptjit managed memory
		// there); elsewhere only those adding PROT_EXEC (doc.go)
		{"full_protect_processes", i(s.FullProtect)},
		// processes and ranges where only the mprotects of the memory
		// ptjit manages stop (fullprotect_linux_amd64.go)
		{"range_protect_processes", i(s.RangeProtect)},
		{"range_protect_filters", i(s.RangeFilters)},
		{"published_names", i(s.Names)},
		{"writer_waits", i(s.WriterWaits)},
		{"writer_wait_ns", i64(s.WriterWaitNS)},
		{"copy_mode", string(s.Copy.Mode)},
		{"copy_changed_ranges", i(s.Copy.Ranges)},
		{"copy_changed_versions", i(s.Copy.Versions)},
		{"copy_pages_read", i64(s.Copy.PagesRead)},
		{"copy_pages", i64(s.Copy.Pages)},
		{"copy_fallback", s.Copy.Fallback},
		{"events", string(s.Events.Mode)},
		{"events_calls", i64(s.Events.Calls)},
		{"events_applied", i64(s.Events.Applied)},
		{"events_bytes", i64(s.Events.Bytes)},
		{"events_fallbacks", i64(s.Events.Fallbacks)},
		{"events_lost", i64(s.Events.Lost)},
		{"events_pages_same", i64(s.Events.PagesSame)},
		{"wx", string(s.WX)},
		{"wall_ns", ns(s.Wall)},
		{"tracer_maxrss_kb", i64(s.TracerMaxRSSKB)},
		{"tracer_user_ns", ns(s.TracerUser)},
		{"tracer_sys_ns", ns(s.TracerSys)},
	}
}

// WriteMeta stores every row of s.Meta in rec's meta table, replacing the
// rows of an earlier call. Like every write to rec it is queued; Close
// makes it durable.
func (s *Stats) WriteMeta(rec *db.Recorder) {
	for _, r := range s.Meta() {
		rec.SetStat(r.Key, r.Value)
	}
}
