// Package ptfmt writes the text formats of libipt's tools from ptjit's
// layers, so that their output can be compared with libipt's own:
// Ptdump/PtdumpRun (libipt's ptdump: packets, offsets, last IP, time),
// Ptxed/PtxedTrace (libipt's ptxed: instructions, events and errors from
// the flow decoder, one chunk per PSB segment in parallel), and
// DumpText, ptjit's own one-line-per-packet listing (`ptjit dump`).
//
// It also writes ptjit's own text: `ptjit dump` of a raw file or of a
// perf.data's queues (dump.go), `ptjit decode`'s flow formats (trace,
// insn, calls, json, stat) rendered in parallel windows (WriteFlow,
// flowtext.go), the call stacks of --folded and --summary (Profile,
// profile.go), and the code listings and instruction diffs of `ptjit
// show` and `ptjit diff` (listing.go). The command line keeps only flags
// and where the text goes.
//
// Conformance: the tests run the libipt corpus (testdata/conformance/libipt:
// 481 traces with libipt's expected ptdump and ptxed output) and compare
// with libipt's own rule, diff -ub (white space amounts and trailing white
// space ignored); the test log says how many rows are also byte-identical.
//
// Argument parsing mirrors the tools' options (PtdumpFlags, ParsePtxedArgs) so
// that a corpus row's options line runs unchanged.
//
// ptfmt sits above the decoder (decode) and the format packages (ptpkt,
// x86, x86/att, perf); nothing below it imports it, and it imports no
// recorder package (tracker, ptrun, snapshot, db).
//
// Must not import: tracker, ptrun, snapshot, softpt, db, recording.
package ptfmt
