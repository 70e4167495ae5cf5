// Package softpt generates Intel PT packets in software, for machines
// without Intel PT (AMD, VMs, CI): `ptjit run --pt=soft` single-steps every
// traced thread and tells a Thread, for each instruction that retired, the
// instruction and the IP it continued at. Thread emits the packets a CPU
// tracing with intel_pt//u would emit for that flow — TNT for conditional
// branches (and compressed returns), TIP for indirect branches, TIP.PGD and
// TIP.PGE around every kernel entry (syscalls, faults, signals: the kernel
// target is suppressed, as CPL filtering does), PSB+ every PSBPeriod bytes,
// TSC at every enable and PSB, MTC/TMA when configured — so that any Intel
// PT decoder (ptjit's, libipt, perf) reads the result.
//
// The generator follows the rules decoders rely on: TNT bits are flushed
// before any packet with an IP; a PSB+ in mid-stream carries MODE.Exec and a
// FUP with the next IP; the return-compression stack is cleared at PSB, at
// every disable and at every uncompressed ret, so a ret whose call a
// decoder may not know, or know differently, is a full TIP (see "Return
// compression" below). Session.Sync writes a PSB+ where the code a thread runs changed
// since its last step (the tracker knows; a CPU would not): decoders look
// code versions up at the time of the last packet they consumed, and a
// thread that runs new code after a straight-line stretch (a direct call
// into code another thread just stored) has no other packet to move that
// time past the change.
//
// # Return compression
//
// A ret is compressed (a taken TNT bit instead of a TIP) only when its
// target is the top of the generator's return stack, and that stack is
// kept so that it is always the top part of every decoder's call stack,
// whatever a decoder does where the rules leave it a choice; the
// compressed ret then pops the same address from all of them. Decoders
// push the next IP at every near call except a zero-length one (a direct
// call to the next instruction, which position-independent code uses to
// read its own address: the SDM, libipt and perf leave it out), and so
// does the generator. Decoders differ at a ret that is not compressed:
// libipt and ptjit's decoder leave their stack as it is, perf's pops it.
// So such a ret empties the generator's stack, as PSB and every disable
// do; later calls push again. HotSpot runs into the difference at every
// interpreted method between compiled ones: compiled code calls into the
// interpreter (a call pushes its return address), the interpreter invokes
// a compiled method through a return address it pushes itself, so that
// method's ret goes where no call returns (not compressed), and the
// interpreter leaves its frame with pop and jmp. A generator that popped
// at the uncompressed ret (perf's rule) then compressed the compiled
// caller's next ret, which libipt's rule resolves to the entry it kept:
// java -XX:+UseSerialGC under --soft-filter=jit decoded 28 errors in its
// main thread, each the flow going back to the call site just returned
// to (testdata/retpush reproduces both cases).
//
// A Session writes the threads' packets to a perf.data in one of two
// layouts (Options.Layout). LayoutPerThread, the default, gives each thread
// its own AUX queue, as perf record --per-thread does; ptjit decode reads
// it. LayoutPerCPU writes what perf record -e intel_pt//u -- PROGRAM writes
// on hardware: a queue per CPU shared by the threads that ran there,
// context-switch records that tell them apart, and in each CPU's stream the
// packets a CPU emits when user-only tracing crosses a context switch (see
// percpu.go). ptjit decode splits it by thread with the same sideband
// perf uses (package recording). It is not the default: in a per-thread
// layout a thread's trace is its own, so attribution never rests on the
// switch records the generator itself invented for virtual CPUs; per-cpu
// is how the path of every hardware recording is tested.
//
// Must not import: decode, ptfmt, recording, tracker, ptrun. The decoder
// is checked against the packets the generator writes, so the two share
// no code above the packet encoder (ptpkt); the generator is driven by
// the tracker, not the other way round.
package softpt
