// Package x86 decodes the length and control-flow class of x86
// instructions: what an Intel PT decoder must know of each instruction it
// walks (its size, whether it branches, how, and to where) and nothing
// more. DecodeInsn fills a caller-owned Insn without allocating; InsnLen
// is the length alone (the recorder's stepping and emulation use it).
//
// The length decoder (insn_ild.go) has a table-driven fast path for the
// common encodings and a complete slow path (legacy, REX, VEX, EVEX, XOP,
// 3DNow!, the 16/32/64-bit modes); the tables (insn_tables.go) follow the
// opcode maps of the Intel SDM volume 2, appendix A. Layout splits a
// decoded instruction into prefixes, escape, opcode and ModRM for the
// AT&T formatter in x86/att, which is the one place that prints
// instructions; the decoder proper never needs text.
//
// Tests compare lengths and classes with objdump on a table of tricky
// encodings (x86/internal/x86test, shared with x86/att) and, in x86/att,
// on linear sweeps of real binaries.
//
// x86 is at the bottom of ptjit with ptpkt and perf.
//
// Must not import: any ptjit package.
package x86
