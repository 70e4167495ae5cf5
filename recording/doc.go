// Package recording opens a ptjit recording for decoding: the Intel PT
// streams of DIR/perf.data and the code history of DIR/code.db, joined into
// what the decoder needs per thread.
//
// Opening. Open reads perf.data's AUXTRACE queues (lazily: the PT bytes
// are read from the file as a decoder asks for them) and code.db's thread
// table. Threads lists the queues that hold data, each with the thread it
// traced and that thread's process (0 when code.db does not know it);
// Traces adds each process's image. A perf.data cut short (its writer was
// killed or met a write error) is decoded up to the cut, with a warning; a
// code.db whose run did not complete it is read with one warning
// (db.OpenChecked, Options.Incomplete).
//
// Images, by time. Image(pid) builds, on first use, the memory image of a
// process (BuildImage): each file-backed mapping is a section holding the
// file's bytes, valid from the mmap's TSC to the munmap's; each code
// version is a section valid for its TSC range. A decoder looks up an
// instruction by address and time, so a patched or regenerated region
// decodes with the bytes valid when it ran. A mapped file is checked
// against the build-id the recording saw; a file that vanished, changed or
// shrank is reported through Options.Warn and left out: its code decodes
// as unmapped, never guessed.
//
// vfork. A vfork (CLONE_VM) child runs in its parent's address space
// until it execs, and code.db records the mappings and versions of that
// time under the owner's pid only (db.ProcessInfo.VMOwner). The child's
// image therefore also holds the owner's sections, each clipped to the
// child's image before the exec; after the exec only its own.
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
// recording sits above decode, ptfmt, perf and db and below the command:
// it must not import tracker, ptrun or cmd/..., so that a recording copied
// from another machine is decoded without any of the recording machinery.
package recording
