// Package snapshot reads a traced program's code: the bytes of its
// executable memory, its /proc/PID/maps, the ELF build IDs of the files it
// maps, and the time stamps (raw TSC and CLOCK_MONOTONIC) that date each
// version.
//
// Reading memory. ReadMem copies [addr, addr+len) out of a stopped tracee
// with one process_vm_readv; pages that are executable but not readable
// (PROT_EXEC alone) make process_vm_readv fail with EFAULT, so the read
// falls back to /proc/PID/mem, which the kernel serves with FOLL_FORCE.
// Both only copy: hashing and page-granular deduplication happen later, in
// the db.Recorder's writer goroutine, so a stop costs one copy.
//
// Time. Now returns a db.Stamp: RDTSC (snapshot/rdtsc_amd64.s) and
// CLOCK_MONOTONIC (the runtime's vDSO clock, no syscall) read back to back. TSCHz measures the TSC frequency
// against CLOCK_MONOTONIC so the decoder can convert PT timing packets.
//
// Nothing here keeps state across calls except the build-ID cache, which is
// safe for concurrent use.
package snapshot
