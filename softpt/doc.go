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
// FUP with the next IP; the return-compression stack is cleared at PSB and
// at every disable, so a ret whose call a decoder may not know is a full
// TIP. Session.Sync writes a PSB+ where the code a thread runs changed
// since its last step (the tracker knows; a CPU would not): decoders look
// code versions up at the time of the last packet they consumed, and a
// thread that runs new code after a straight-line stretch (a direct call
// into code another thread just stored) has no other packet to move that
// time past the change.
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
package softpt
