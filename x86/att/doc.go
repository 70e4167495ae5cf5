// Package att prints x86 instructions in AT&T syntax, the way objdump
// does: Text(in) for an instruction that x86.DecodeInsn decoded. It
// formats with golang.org/x/arch's x86asm and corrects, in insn_fix.go,
// the encodings and texts where x86asm v0.32 differs from objdump (the
// list is there, found by the linear sweeps in sweep_test.go). An
// instruction nobody can format prints as ".byte 0x.., ...".
//
// Only output needs att (ptxed text, `ptjit show`, `history --writes`):
// the decoder, the recorder and the soft-PT generator use package x86
// alone. att imports x86 and x86asm.
//
// Must not import: any ptjit package but x86.
package att
