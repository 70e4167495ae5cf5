// Package ptpkt is the packet layer of ptjit's Intel Processor Trace
// decoder (libipt's pt_pkt_ layer and the small state machines under its
// query layer): it reads and writes the bytes of a trace, one packet at a
// time, and keeps the per-packet state that the layers above need.
//
// What it holds, bottom up:
//
//  1. Packets (packet*.go): Packet is one packet of the SDM "Packet
//     Definitions", every kind included; PacketDecoder walks a trace
//     buffer and fills a caller-owned Packet without allocating, with the
//     same verbs as every decoder layer (SyncForward to the next PSB,
//     Next, Offset). A bad byte is a *DecodeError carrying its trace
//     offset; the recovery is SyncForward. Config and CPU (packet_config.go)
//     say which CPU wrote the trace and so which errata workarounds apply.
//  2. Encoding (encode.go): Packet.Encode and AppendPacket write any packet
//     back; Encoder also picks the shortest IP compression against the
//     last IP. The software PT generator (softpt) and the tests build
//     traces with it.
//  3. Packet-level state machines, each in its own file with a table test:
//     LastIP (lastip.go) reconstructs full IPs from compressed IP payloads;
//     TNTCache (tnt.go) holds the taken/not-taken bits of one TNT packet
//     until the instruction flow consumes them; Time, TimeCal and Timer
//     (time.go) estimate the TSC at every packet from TSC, TMA, MTC, CYC
//     and CBR (libipt's pt_time.c). PacketDecoder.MTCRun applies a run of
//     MTC packets straight from the trace bytes where an MTC changes only
//     the TSC estimate (the hot loop of a soft-PT trace, which has an MTC
//     per instruction), and reads the TNT-8 that usually follows the run;
//     TestMTCRun holds it to UpdateMTC and Next.
//
// Errors are the sentinel values of each file (ErrBadPacket, ErrNoIP,
// ErrBadQuery...), whose texts are libipt's, wrapped in a *DecodeError
// where a trace offset is known; the layers above map them onto their own
// codes.
//
// The text of packets for people is here too (packet_text.go,
// packet_names.go: the names ptdump prints); the libipt-compatible tool
// formats built on it are in ptfmt.
//
// ptpkt is at the bottom of ptjit, with x86 and perf: it imports only the
// standard library, never the decoder (decode), the text formats (ptfmt),
// perf.data reading (perf) or any recorder package (tracker, ptrun,
// softpt, snapshot, db). Decoders are not safe for concurrent use; use one
// per goroutine.
//
// Must not import: any ptjit package.
package ptpkt
