// Package decode turns Intel Processor Trace data into the exact sequence of
// instructions a program ran, reading each instruction from the code
// version that was valid at that moment.
//
// The package is layered like Intel's libipt, with the same verbs at every
// layer (SyncForward, Next, Offset):
//
//  1. Packets (packet*.go, encode*.go): PacketDecoder walks the raw bytes
//     of a trace and fills a caller-owned Packet without allocating; every
//     packet of the SDM "Packet Definitions" is decoded, and Packet.Encode
//     writes any packet back (the soft-PT backend and the tests generate
//     traces with it). A bad byte is a *DecodeError with its trace offset;
//     the recovery is SyncForward to the next PSB. Encoder (encode.go)
//     also picks the shortest IP compression against the last IP.
//  2. Small state machines with their own files and table tests: LastIP
//     (lastip.go) reconstructs full IPs from compressed IP payloads; Time
//     and TimeCal (time.go) estimate the TSC at every packet from TSC,
//     TMA, MTC, CYC and CBR (libipt's pt_time.c), and Timer drives both
//     from a packet stream for the layers above; the TNT cache (tnt*.go)
//     and the return stack (retstack*.go) serve the flow layer.
//  3. Query/events (query*.go): reads packets ahead and answers "is this
//     conditional branch taken?", "where does this indirect branch go?"
//     and reports events (enable/disable, overflow, paging, mode changes)
//     bound to the instruction where they happen.
//  4. Instruction flow (flow*.go): walks the code through the versioned
//     image (image*.go: sections keyed by address and code version, a
//     miss is an error), decoding instructions (insn*.go) and asking the
//     query layer at each branch.
//
// Around the layers: perfdata*.go reads the PT data (AUXTRACE) out of a
// perf.data file, jitdump*.go reads jitdump files, elf*.go loads ELF
// images, and ptdump*.go / ptxed*.go reproduce the output of libipt's
// ptdump and ptxed tools byte for byte for conformance testing against the
// libipt test corpus.
//
// Decoders are not safe for concurrent use; use one per goroutine. Errors
// always carry the trace offset and, where known, the IP (DecodeError).
package decode
