// Package x86emu emulates the x86-64 stores the tracker's W^X precise mode
// carries out for the program.
//
// Instead of lifting ptjit's write protection, single-stepping and
// protecting again (three extra round trips), the tracker decodes the
// faulting instruction, computes what it stores where, writes those bytes
// through /proc/PID/mem (which may write read-only pages) and moves the
// instruction pointer past it. Only pure stores are emulated — MOV/MOVNTI
// to memory, SSE and VEX (AVX) moves of an XMM or YMM register to memory,
// STOS and MOVS with or without REP — because for them the bytes written
// and the registers changed follow from the registers alone. Anything else
// (read-modify-write, LOCK, XCHG, EVEX: AVX-512) returns ErrNotEmulated and
// the tracker single-steps it instead. x86asm decodes no VEX, so
// vex_linux_amd64.go decodes the VEX stores itself.
//
// The package reads nothing itself: registers, XMM registers and memory
// come from the caller (Machine), so it is tested by tables without a
// process. The registers are Linux's x86-64 struct user_regs_struct
// (unix.PtraceRegs), hence the _linux_amd64 files.
//
// Must not import: any ptjit package. The emulator is the tracker's
// alone, tested by tables without a process.
package x86emu
