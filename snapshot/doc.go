// Package snapshot reads a traced program's code: the bytes of its
// executable memory, its /proc/PID/maps, the ELF build IDs of the files it
// maps.
//
// Reading memory. ReadMem copies [addr, addr+len) out of a stopped tracee
// with one process_vm_readv; pages that are executable but not readable
// (PROT_EXEC alone) make process_vm_readv fail with EFAULT, so the read
// falls back to /proc/PID/mem, which the kernel serves with FOLL_FORCE.
// Both only copy: hashing and page-granular deduplication happen later, in
// the db.Recorder's writer goroutine, so a stop costs one copy. The time
// stamps that date each version come from package clock.
//
// Mappings. ReadMaps parses /proc/PID/maps whole; QueryMap asks the
// kernel for the one mapping that covers an address (the PROCMAP_QUERY
// ioctl on the maps file, Linux 6.11), with the same fields, at a cost
// that does not grow with the process's mappings: a JIT runtime has
// hundreds, and the tracker asks at every executable file mapping.
// ErrNoQuery says the kernel is older; the caller reads the file.
//
// Build IDs come from internal/elfnote, the one ELF note walker. snapshot
// is a reader the tracker uses, at the bottom of the pipeline.
//
// Must not import: any ptjit package but internal/platform, internal/elfnote.
//
// Nothing here keeps state across calls except the build-ID cache, which is
// safe for concurrent use.
package snapshot

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
