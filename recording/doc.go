// Package recording opens a ptjit recording for decoding: the Intel PT
// streams of DIR/perf.data and the code history of DIR/code.db, joined into
// what the decoder needs per thread.
//
// Opening. Open maps perf.data read-only (a pread per buffer costs the
// kernel's copy: docs/decisions.md) and reads its AUXTRACE queues (lazily: the PT bytes are copied from the
// mapping as a decoder asks for them) and code.db's thread
// table. Threads lists the per-thread queues that hold data, each with the
// thread it traced and that thread's process (0 when code.db does not know
// it); Traces adds each process's image, and splits a per-CPU recording's
// queues by thread (below). A perf.data cut short (its writer was
// killed or met a write error) is decoded up to the cut, with a warning; a
// code.db whose run did not complete it is read with one warning
// (db.OpenChecked, Options.Incomplete).
//
// Images, by time. Image(pid) builds, on first use, the memory image of a
// process (BuildImage): each file-backed mapping is a section holding the
// file's bytes (the file mapped read-only, not read), valid from the mmap's TSC to the munmap's; each code
// version is a section valid for its TSC range. A decoder looks up an
// instruction by address and time, so a patched or regenerated region
// decodes with the bytes valid when it ran. A mapped file is checked
// against the build-id the recording saw; a file that vanished, changed or
// shrank is reported through Options.Warn and left out: its code decodes
// as unmapped, never guessed. Code versions are added lazily
// (decode.AddLazyVersion): building the image reads the versions' rows,
// not their bytes or hashes, and the decoder reads a version's bytes from
// code.db (db.VersionBytes) when the trace first runs there; a version
// whose bytes cannot be read is told once through Options.Warn and decodes
// as unmapped.
// A mapping that cannot be read but was gone
// before the process's trace started (its threads' first PSB TSC:
// decode.FirstTSC) is left out without a warning: no traced instruction
// ran in its time (ld.so maps a library's whole span at the first
// segment's offset before it maps the later segments over it, so a piece
// lies past the end of the file for some microseconds).
//
// A PT recording whose trace holds no byte (--soft-filter=jit on a program
// that ran no JIT code) has no stream: Traces returns none and every
// decode prints no instruction; a perf.data without a PT event is an
// error.
//
// vfork. A vfork (CLONE_VM) child runs in its parent's address space
// until it execs, and code.db records the mappings and versions of that
// time under the owner's pid only (db.ProcessInfo.VMOwner). The child's
// image therefore also holds the owner's sections, each clipped to the
// child's image before the exec; after the exec only its own.
//
// Per-CPU traces (demux.go, cpurun.go). perf record -e intel_pt//u --
// PROGRAM writes one AUX queue per CPU, shared by every thread and process
// that ran there (ptjit run --pt=soft --soft-layout=per-cpu writes the
// same); only the sideband tells them apart. Traces splits such a
// recording into one stream per thread, in two passes:
//
//  1. Per CPU queue, packets only (no instruction decoding): the queue is
//     cut at every PSB and after every TIP.PGD. In user-only tracing every
//     context switch happens in the kernel, where tracing is filtered off,
//     so a thread change can only come after a TIP.PGD (the leaving
//     thread entered the kernel) or at a PSB (perf's sched-in re-enables
//     the event, and the hardware starts with PSB+). Each piece keeps the
//     time at its first IP packet (TSC, TMA and MTC followed as the
//     decoder's timing does) and the CPU's last IP there. The walk steps
//     over TNT, PAD and MTC bytes without decoding them and applies the
//     MTCs only where a piece needs its time; it reads each queue through
//     one small window that all queues share. Pieces are joined from one
//     small block per CPU shared by all the threads' streams, so that a
//     thread's stream touches no fresh memory of its own (on a VM a page
//     fault on fresh memory, and a pread, each cost about as much as the
//     decoding they feed: docs/decisions.md).
//  2. Each piece is given the thread the sideband says ran on that CPU at
//     that time: cpuRuns replays SWITCH_CPU_WIDE (switch-out: next_prev
//     runs from then; switch-in: the sample_id thread), SWITCH (per-task
//     switches, have_sched_switch 2), ITRACE_START, as perf's intel-pt.c
//     does with have_sched_switch (intel_pt_context_switch); perf time is
//     converted to TSC with TIME_CONV. A thread's pieces from every CPU are
//     joined in time order (migration) into one stream (threadStream, a
//     decode.TraceReader), merged where they are contiguous in a queue, and
//     decoded through its own process's image (BuildImage, vfork rules
//     unchanged), like a per-thread queue: --tid, --calls, --json, --stat,
//     -j N, windows all work unchanged.
//
// What the decoder relies on from the hardware (Intel SDM, "Intel
// Processor Trace": IP compression, packet generation on TraceEn and
// context switches) and how the joined stream keeps it: a PSB resets the
// decoder's last IP and return-compression stack, so a piece starting at a
// PSB decodes anywhere. A piece that starts after a TIP.PGD continues the
// CPU's packet state: the last IP it compresses its first IP packet
// against is the CPU's, which another thread's packets may have set; when
// such a piece does not directly follow its predecessor in the same queue,
// that packet is replaced in the joined stream by its full-IP form (the
// 1-8 bytes differ; Origin maps offsets back). The decoder's return stack
// for a joined stream holds only that thread's calls, kept across its own
// TIP.PGD/TIP.PGE as within one queue (a return after a syscall may be
// compressed against a call before it). Relied on, not verified on
// hardware here: at a context switch perf stops the leaving task's event
// and starts the arriving one's (pt_event_stop/start: TraceEn 1→0→1),
// after which the CPU starts with PSB+ and an empty return-compression
// stack, so no compressed return refers to another thread's call (the
// soft generator clears its stack at every disable, stricter still).
// Timing restarts with the TSC of PSB+ or, after a TIP.PGD,
// continues the CPU's (TSC/MTC), as perf's decoder reads it.
//
// Never a guess: a piece whose time has no TSC yet, that falls before a
// CPU's first sideband record, after a LOST record (until the next switch
// record), where the sideband says no traced thread runs (the idle task,
// an untraced one), or in a recording without any switch record, is not
// decoded; it is a DemuxError (CPU, queue offset range, time, reason) that
// ptjit decode prints as an error line of the pseudo-thread
// "unattributed". A piece given to a thread whose image cannot run its IP
// decodes as a nomap error in that thread's flow. Decode errors and
// events of a joined stream carry offsets in their CPU's queue
// (Thread.Origin, ptfmt.FlowOptions.Origin, ptfmt.PtxedOptions.Origin):
// an error line names the CPU, the offset in its queue (the offset in the
// stream perf's AUXTRACE buffers of that CPU make, end to end) and the
// decoder's time ("[error: cpu 1 pt offset 0x1f3a, tsc 0x..., ip ...:
// unknown opcode]"; JSON: cpu, pt_offset, tsc); --format=ptxed prints
// queue offsets too, and its error lines end with ", cpu N".
//
// Gaps. Where a CPU queue's AUX data is not contiguous (an AUXTRACE
// buffer whose AUX offset does not continue the previous one: perf could
// not keep up; an AUX record flagged TRUNCATED: the AUX area was full and
// the trace after it was lost), pass 1 does not walk across: the piece
// before the gap ends at its last whole packet, the walk resumes at the
// next PSB with no time or last IP carried over, and the stretch between
// is a DemuxError naming the CPU, the queue offsets, the time and the
// record that tells the gap. The stream of the thread whose piece the gap
// cuts gets an OVF there, so its decoder reports an overflow (the time of
// the gap; the offset, as for any OVF, where decoding goes on) and
// resyncs instead of reading on as if the bytes followed.
//
// PT configuration. The timing configuration the trace was recorded with
// (MTC frequency, CPUID 0x15 ratio, nominal frequency) comes from
// perf.data's AUXTRACE_INFO and PT event, by one rule
// (perf.PerfTrace.PTConfig) that ptjit decode and ptjit dump share; an
// option given on the command line wins.
//
// Export. ExportJitdump writes the code versions as jitdump files for
// perf inject --jit (perf.ExportJit).
//
// Symbols. Symbolizer names addresses in file sections from the files'
// ELF symbol tables (ReadELFSymbols), and code versions by the names their
// JIT published (perf maps, read by the tracker into code.db's names
// table: Names, LoadNames), else by region and version. A name goes to
// the versions whose bytes it was written for (names.go says how), so a
// JIT that reuses an address for another function shows each execution
// under the name valid when it ran.
//
// Time. TimeBase is how every command prints and reads time: seconds since
// the recording started (meta start_tsc and tsc_hz), or raw TSC (--tsc);
// a time argument is seconds (s, ms, us, ns) or tsc:N, and a printed time
// given back includes the instant it printed. History, writes and names
// listings (WriteHistory, WriteWrites, WriteNames) live here so that the
// command stays flags and output.
//
// Warnings go through Options.Warn, never to os.Stderr: the command line
// decides where they are printed. A Recording is used by one goroutine;
// its Symbolizer is safe for concurrent use.
//
// recording sits above decode, ptfmt, perf and db and below the command.
//
// Must not import: tracker, ptrun, snapshot, softpt. A recording copied
// from another machine is decoded without any of the recording machinery.
package recording
