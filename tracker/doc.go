// Package tracker follows a program under ptrace and records every version
// of its executable memory: the event loop, the seccomp filter that decides
// which syscalls stop the program, and the region state machine.
//
// # Goroutines and threads
//
// Start creates one goroutine, locks it to its OS thread for good
// (runtime.LockOSThread, never unlocked) and runs everything that touches
// the tracee on it: the launch (fork of the launcher, so the tracer thread
// is the child's parent and PR_SET_PDEATHSIG refers to it), PTRACE_SEIZE,
// wait4 and every ptrace request. Functions that must run there say
// "Precondition: on the locked tracer thread". The only other entry point,
// Kill, runs on any goroutine and only sends SIGKILL with kill(2), under a
// mutex that guards the set of live pids. The db.Recorder is driven from the
// tracer goroutine only; its own writer goroutine hashes pages and writes
// SQLite, so a stop costs one copy of the bytes (process_vm_readv) and a
// channel send.
//
// # One place classifies every stop
//
// Classify (stop.go) maps a wait4 status to a StopKind; Tracer.handle
// switches on it: exits, signal-delivery-stops (the signal is injected
// unchanged with PTRACE_CONT), group-stops (PTRACE_LISTEN, so SIGSTOP and
// SIGCONT keep their meaning for the program and its parent), the trap
// stop of a new tracee, seccomp stops (syscall entry), syscall-exit-stops,
// clone/fork/vfork/exec events and PTRACE_EVENT_EXIT (the thread's final
// name is read there). ESRCH from a ptrace request means the thread died
// meanwhile (SIGKILL); its exit report follows and is handled then.
//
// New tracees are auto-attached by PTRACE_O_TRACECLONE/FORK/VFORK. The
// child's first stop and the parent's event come in either order: a child
// seen first is held stopped until the parent's event says what it is (a
// thread, a forked copy, or a CLONE_VM process sharing the parent's
// memory); the clone flags come from the parent's registers (clone's rdi,
// clone3's clone_args.flags). A forked copy's executable memory is read
// from its /proc/PID/maps at its first stop (the child has not run yet, so
// it is the memory at the fork) and recorded with cause "fork".
//
// # Syscalls
//
// The seccomp filter (filter.go, declared as data with the reason each rule
// cannot miss a transition) stops only mmap with PROT_EXEC or MAP_FIXED,
// mprotect, pkey_mprotect, munmap, mremap, brk, madvise with advice that
// can drop pages, shmat with SHM_EXEC or SHM_REMAP, shmdt,
// remap_file_pages and process_vm_writev. At the seccomp stop the tracker
// looks at the arguments and its address map (needExit): only a call that
// can change tracked memory is resumed with PTRACE_SYSCALL, and its effect
// is applied at the syscall-exit stop if it succeeded; every other call is
// resumed with PTRACE_CONT and costs one stop. Exec is seen through
// PTRACE_EVENT_EXEC (after the new image is mapped), so it is not in the
// filter; /proc/PID/maps is read there and the initial executable memory
// (file mappings, the [vdso] copied as a version with cause "exec") is
// recorded. Time stamps (TSC and CLOCK_MONOTONIC) are taken at the exit
// stop, while the thread that made the change is stopped: no thread can
// have run the new code before (the JIT thread publishes the code only
// after its mprotect returns).
//
// # Regions and versions
//
// space.go is the state machine, independent of ptrace and tested by
// tables: a version is the pages made executable by one syscall; a partial
// mprotect/munmap ends the version and records the pieces that stay
// executable as fresh versions (cheap: the db stores pages once); a region
// is the address range of one mapping and lives until all of it is
// unmapped, so RX→RW→RX cycles are versions 1, 2, 3 of one region and an
// address reused after munmap starts a new region. Executable file
// mappings the decoder can read from disk (a regular file, still present
// under its name with the same inode, mapped without PROT_WRITE) are
// recorded as file mappings with their ELF build ID; every other
// executable memory (anonymous, memfd, deleted files, patched text made
// executable by mprotect) is copied.
//
// # Never a stopped or orphaned tracee
//
// PTRACE_O_EXITKILL: when the tracer thread exits, however (panic, SIGKILL),
// the kernel SIGKILLs every tracee. The launched child also has
// PR_SET_PDEATHSIG=SIGKILL. Its forks do not inherit PDEATHSIG (the
// kernel clears it in fork) but are tracees, so EXITKILL covers them. On
// SIGTERM/SIGINT, ptrun calls Kill, the loop sees every tracee exit, and
// the recording is flushed.
//
// # Pinning (--pin)
//
// Measured on this 2-vCPU VM with testdata/stopbench (mprotect RW/RX
// cycles, two stops each with an exit stop): see the report in
// BENCH-pin.txt of the ptrun package tests (BenchmarkStop) — pinning
// the tracer and the program to one CPU makes each stop a same-CPU
// wake-up, but it also takes every other CPU away from the program and
// changes what sched_getaffinity tells it (JVMs and V8 size their thread
// pools from it), which breaks "the target behaves exactly as without
// ptjit". So --pin=auto means off; --pin=on is there for single-threaded
// programs whose stop rate dominates.
//
// # Blind spots
//
// Changes to executable memory that make no stop: write(2), pwrite(2),
// ftruncate(2) or fallocate(2) on a file that is mapped executable and
// shared (memfd double mappings write through the other alias; that is
// W^X's job); writes through /proc/PID/mem; UFFDIO_COPY into executable
// memory; stores into RWX memory (seen only at the next mprotect, or with
// W^X); MADV_FREE pages the kernel reclaims later; the
// READ_IMPLIES_EXEC personality (PROT_READ implies PROT_EXEC, invisible to
// the filter). process_vm_writev into a tracee is seen and re-snapshots the
// pages written; into a process ptjit does not trace, it is reported.
package tracker
