// Package decode is ptjit's Intel Processor Trace decoder proper: it turns
// the packets of a trace into the exact sequence of instructions a program
// ran, reading each instruction from the code version that was valid at
// that moment.
//
// It is layered like Intel's libipt, above the packet layer (package
// ptpkt: packets, last IP, TNT cache, timing), with the same verbs at every
// layer (SyncForward, Next, Offset):
//
//  1. Query/events (query*.go): QueryDecoder reads packets ahead and
//     answers "is this conditional branch taken?" (from ptpkt's TNT
//     cache), "where does this indirect branch go?" and reports events
//     (enable/disable, overflow, paging, mode changes, event trace) bound
//     to the instruction where they happen; it applies the errata
//     workarounds of ptpkt.Config. Its workings are internal; the flow
//     layer drives it. Its read-ahead (fetchQEvent) takes the packets of
//     a soft-PT trace (an MTC per instruction, a one-bit TNT-8 per
//     conditional branch) and of a hot loop (a TNT or TIP with no event
//     waiting) first, without the packet decoder's general dispatch and
//     without building an Event for each, but through the helpers the
//     general dispatch uses for the same packets (mtcRun, takeTNT,
//     updateIP and eventIP), so each rule is written once: a run of MTCs
//     is applied to the timing in one loop over the bytes (ptpkt.MTCRun,
//     tested against UpdateMTC packet by packet), which also reads the
//     TNT-8 after the run; the MTC or TNT-8 after a TNT is read by
//     ptpkt.NextMTC and NextTNT8. TestQueryFastPaths turns these fast
//     paths off (a test-only FlowConfig field) and requires the same
//     events, offsets and times, and the same flow, on libipt's corpus,
//     the synthetic traces and generated soft-PT traces.
//  2. Instruction flow (flow*.go): FlowDecoder walks the code through the
//     image, decoding instructions with package x86 (flow_cache.go keeps
//     them per section, so hot code is decoded once), asking the query
//     layer at each branch, resolving compressed returns with the return
//     stack (retstack.go) and binding events to instructions. SyncForward,
//     Next, Event and Resync return a Status (libipt's pt_status_flag:
//     StatusEventPending, StatusIPSuppressed, StatusEOS) and, on failure,
//     a *FlowError carrying the Code, the trace offset and, where known,
//     the IP; errors.Is matches it against ErrFlowEOS, ErrNomap and
//     ErrBadQuery. The documented recovery is SyncForward to the next PSB
//     (or Resync, to the next packet that gives an IP).
//     The block fast path (flow_block.go) sits inside this layer: when no
//     event is pending, the basic block at the IP — a run of straight-line
//     instructions and the branch that ends it, with the instruction count,
//     length and end kind precomputed — is taken from a per-section block
//     cache and stepped over at once, and the branch that ends it is
//     followed by the rule Next follows every instruction by (follow and its
//     helpers: direct jumps and calls, conditional branches and returns
//     asked of the TNT cache, indirect branches of the next TIP). libipt, up to v2.1, had two
//     full decoders side by side, each with its own copy of these rules: the
//     instruction decoder on the query decoder, the block decoder directly
//     on the event decoder; since v2.2 its instruction decoder is built on
//     its block decoder (it iterates each block's instructions, decoding
//     their lengths a second time). ptjit keeps libipt's older layering
//     (FlowDecoder on the query layer) and makes blocks a fast path of the
//     same decoder instead: one set of rules, and no second length decode
//     for the sinks that need every instruction. The cache lives in the
//     Section, so it is keyed by code version (a JIT region's new version is
//     another Section) and, for files, by mapping; it is built without the
//     instruction cache, so a decode on blocks never allocates that, and
//     both are allocated in pages for 256 bytes of code, written before they
//     are read (traced code is sparse, and each page of fresh memory costs a
//     fault: flow_cache.go). Sinks that implement BlockSink (--stat,
//     --calls, counting) get one call per block; sinks that need every
//     instruction (ptxed, trace, JSON) do not implement it and get Insn
//     calls from the same decoder, instruction by instruction. A
//     BlockCounter (--stat's chunks, the call tree) needs only some blocks:
//     of the others RunFlow just adds the counts to counters the sink gave,
//     saving a Block call per block. Both paths give the same flow:
//     FuzzFlowDecoder requires the same sink calls from both (and from a
//     decode with the fast paths off) on every input, and
//     TestBlockFlowSynthetic, TestBlockCacheVersions, TestQueryFastPaths,
//     ptfmt's TestBlockPathCorpus and the libipt differential test compare
//     them.
//  3. The image (image.go, lazy.go): sections of code keyed by address and,
//     for JIT code, by the TSC interval in which each version was valid; a
//     miss is an error (CodeNomap), never a guess. Versioned sections are
//     grouped by extent (one address range: the versions of a region, a
//     file mapping), each sorted by time; a lookup finds the few extents
//     reaching the address by a binary search over extents and the version
//     valid at the time by a binary search in each, so its cost does not
//     grow with the number of versions (before, every lookup scanned every
//     version below the address, and each added version was checked
//     against all others: a decode of 20,000 versions at one address spent
//     most of its time there). A recording's versions are lazy sections
//     (AddLazyVersion: range, time, and a CodeSource that reads the bytes
//     from code.db): nothing is read until a lookup lands on one, and an
//     image keeps the bytes of at most 256 of them (64 MiB), evicting the
//     least recently looked up. A lookup hands out a materialised copy
//     holding the bytes and its own decode caches; eviction drops the
//     image's reference and never changes the copy, so a decoder or a
//     parallel chunk waiting for replay that still holds it reads it
//     safely. Decode time then follows the trace and the versions it runs
//     through, and memory the code being run: with one version per call
//     (a JIT patching an immediate before each call), 10 times the
//     versions cost 7 to 10 times the CPU time (linear: the work per
//     version is constant) and 1.8 to 1.9 times the peak RSS
//     (BENCHMARKS.md), the remaining growth being mostly the index, about
//     0.2 KB a version. Clones (parallel decoding) share the index's
//     lazy sections, each with its own materialised set.
//  4. Driving a whole trace: RunFlow runs a FlowDecoder the way libipt's
//     ptxed does and hands instructions, events and errors (with an
//     ErrorKind) to a FlowSink. ParallelFlow* (flow_parallel.go) cut a
//     trace at PSBs into chunks decoded on several goroutines and replay
//     them to the sink in trace order; ForEachWindow (window.go) feeds a
//     trace of any size through a bounded window, cut at PSBs, and
//     OffsetSink shifts the offsets back to the whole trace's. A trace
//     read from a file is copied into one window mapping per process,
//     populated at once and in transparent huge pages where the system
//     gives them (window_linux.go).
//
// The query and flow layers use libipt's int convention inside (status
// flags, or a negative Code), which keeps the port of libipt's binding
// rules easy to check against the reference; the exported methods convert.
//
// Decoders are not safe for concurrent use; use one per goroutine (the
// parallel decoder gives each goroutine its own decoder and image copy).
//
// decode imports only ptpkt and x86 of ptjit (internal/layers checks
// this): never perf (perf.data is read by its callers, who hand the
// decoder bytes or a TraceReader), the text formats (ptfmt) or the AT&T
// disassembler (x86/att), the recorder (tracker, ptrun, softpt, snapshot,
// db), recording, or the commands.
//
// Must not import: any ptjit package but ptpkt, x86.
package decode
