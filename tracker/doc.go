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
// Classify (stop_linux_amd64.go) maps a wait4 status to a StopKind; Tracer.handle
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
// The seccomp filter (filter_linux_amd64.go, declared as data with the reason each rule
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
// # Pinning (--pin) and the cost of a stop
//
// Measured on this 2-vCPU VM (no Intel PT) with testdata/stopbench (2000
// RW→RX cycles of one page: 4000 mprotect calls, each a seccomp stop plus a
// syscall-exit stop), median of 3 runs, 22:40 UTC 2026-11-21:
//
//	stopbench run 2000 1 (alone)                         8.0 ms
//	minimal C tracer, entry stop only, same CPU / any    30.5 / 28.4 ms
//	minimal C tracer, entry+exit stop, same CPU / any    48.2 / 45.4 ms
//	ptjit run --pin=off                                   125 ms, 7.4 µs/stop in the tracer
//	ptjit run --pin=on                                    125 ms, 7.6 µs/stop in the tracer
//
// BenchmarkMprotectStop (go test -bench Mprotect ./tracker; wxbench N
// mprotect, µs per mprotect call inside the program), three runs at 23:19
// UTC while the team loaded the machine (load average 7.6 on 2 CPUs):
// pin=off 36.8 / 47.9 / 48.5 µs, pin=on 31.3 / 42.2 / 27.9 µs. Quiet, as
// above, no difference; under load, sharing a CPU avoids some wake-up
// latency.
//
// So a stop round trip costs ~4.6 µs in the kernel here whether or not
// tracer and tracee share a CPU (the ~100 µs cross-CPU wake-up did not
// show up in these runs), and ptjit adds ~7 µs per stop of its own work
// (GETREGS, the stamp, a 4 KiB copy, and the db writer goroutine hashing
// and inserting on the same two CPUs: perf shows sha256 and SQLite at
// ~8 % of ptjit's samples). Pinning gains nothing measurable, and it takes
// the other CPUs away from the program and changes what
// sched_getaffinity tells it (JVMs and V8 size their thread pools from
// it), which breaks "the program behaves as without ptjit". So
// --pin=auto means off; --pin=on pins the tracer thread, and through
// inheritance the program and all its children, to the first allowed CPU.
//
// Considered and not done: seccomp user notification
// (SECCOMP_RET_USER_NOTIF) cannot observe a syscall's result — the
// supervisor answers before the call runs (or lets it continue blind) — so
// mprotect/mmap would still need the ptrace exit stop, and the entry
// notification costs a round trip like the seccomp stop it would replace.
//
// # One stop per mprotect, and the cost of a version
//
// A JIT that toggles its code area RW↔RX (LuaJIT: testdata/bench.lua 10000
// makes 60,500 mprotect calls on 64 KiB areas in 0.63 s) pays for every
// stop and every version. What ptjit does about it:
//
//   - one stop instead of two (oneStopProtect in syscalls_linux_amd64.go):
//     when the program is a single thread, ptjit applies an mprotect of
//     memory it knows is mapped at the seccomp stop, resumes the thread
//     first and snapshots while it runs: the bytes cannot change (the
//     thread is in the mprotect; after it the pages are not writable until
//     the next mprotect, which stops and waits). Several threads: another
//     could write between the stop and the call, so the exit stop stays.
//   - a version is one row (versions.pages holds the page hashes; one row
//     per page cost 16 inserts per 64 KiB version), pages is a rowid table
//     (keyed by hash, 4 KiB rows split B-tree pages everywhere), snapshot
//     buffers are recycled (a fresh 64 KiB each time cost page faults and
//     garbage collection), and the db writer takes the tracker's records in
//     batches instead of being woken for each.
//   - SA_NOCLDSTOP on ptjit's SIGCHLD handler (sigchld_linux_amd64.go): a
//     stop no longer sends the tracer's process a signal.
//
// Together with an 8 MiB SQLite cache and synchronous=OFF (db/doc.go),
// measured with ptjit-bench (medians of 5, 2026-11-22): LuaJIT 4.42 s
// (0.65 s alone, strace 2.70 s) at 00:46 UTC → 1.51 s (0.37 s alone,
// strace 1.76 s) at 01:26 UTC; peak RSS 594 MB → 120–148 MB. What remains
// is one stop per mprotect (60,487 × 3.1 µs on one CPU, 9.0 µs across
// CPUs, before any work) and reading, comparing and storing 64 KiB per
// version (2 GB in all): that bounds LuaJIT under a ptrace recorder to
// well above 1.3× its time alone.
//
// # W^X (--wx)
//
// Stores into memory the program keeps writable and executable (RWX) change
// code without a syscall. With --wx (wx_linux_amd64.go) ptjit keeps the
// program's own view of its protections in the Space (Piece.Prot) and makes
// the kernel enforce actualProt(view): RWX becomes RX. This costs no extra
// stop: at the seccomp stop of an mmap/mprotect/pkey_mprotect asking for
// PROT_WRITE|PROT_EXEC, the prot register is rewritten, and restored at the
// exit stop so the program sees its own argument again; the change is
// recorded with db.Recorder.ProtChange. /proc/PID/maps shows what ptjit
// enforces, so every re-read of it is translated back to the program's view
// (viewMaps), and a fork child inherits the parent's view.
//
// A store then faults. The SIGSEGV signal-delivery-stop is classified
// (wxFault): SEGV_ACCERR at an address ptjit write-protects is ptjit's and
// is consumed; anything else (HotSpot's implicit null checks and safepoint
// polls, a program storing into its own RX code) is delivered unchanged
// with its original siginfo (the stop is simply continued with the
// signal). A fault another thread's handling made stale (several threads
// faulting on one page) is retried once. W^X memory is versioned one page
// per version (Space.PageGranular), so a store re-records one page.
//
//   - precise: the store is carried out and logged (db.Write: TSC, mono,
//     tid, IP, AT&T disassembly, address, old and new bytes, the new
//     version). Pure stores are emulated (internal/x86emu: MOV/MOVNTI, SSE
//     moves from XMM, STOS/MOVS with or without REP): decoded with x86asm,
//     written through /proc/PID/mem, RIP advanced — one stop. Others
//     (XCHG, LOCK, read-modify-write, AVX/AVX-512 as in glibc's memcpy)
//     are single-stepped with the target pages briefly given the program's
//     protection back (two injected mprotects around a PTRACE_SINGLESTEP;
//     a store reaching into a second protected page opens that too).
//   - batch: the first store makes the page RW and not executable (an
//     injected mprotect); the program writes at full speed; the first
//     instruction fetch there faults, the page is recorded as one version
//     (cause "wx-batch", TID and IP of the first store) and made RX again.
//     A store into the page of the storing instruction itself is always
//     precise (the page cannot stop being executable under it).
//   - auto (default): precise, except that a page with 2 precise stores in
//     the last 10 ms goes batch (a patcher toggling a static key now and
//     then stays precise; a JIT emitting a function into RWX memory goes to
//     batch after its first stores). java -cp . Hot (testdata/Hot.java),
//     median of 5, 01:12 UTC 2026-11-22: 0.21 s alone, 0.38 s under auto
//     (1.8×); node testdata/hot.js 0.25 s alone, 0.29 s (1.2×).
//
// Syscalls ptjit injects execute a syscall instruction already in the
// process (found in the vdso), never injected code: registers are saved,
// RIP pointed at the instruction, the tracee run with PTRACE_SYSCALL to the
// exit stop of that call (passing the entry and seccomp stops of our own
// call), registers restored. Signals that arrive meanwhile are held and
// delivered when the thread resumes.
//
// Measured (tracker/testdata/wxbench.c, 5000 8-byte stores into one RWX
// page, time per store inside the program; BenchmarkWXPrecise/WXBatch give
// the same numbers, 35 µs under a load average of 7): --wx=precise 29-32 µs/store
// (18-24 µs of it in ptjit's handler, most of the rest the fault stop
// itself; with the db writer competing for the 2 CPUs), batch and auto
// 0.02-0.3 µs/store. The target was 2× a bare fault stop (~15 µs): met for
// emulated stores, not for stepped ones (~80 µs: seven stops). With
// 20000 stores precise mode degrades to ~110 µs/store because the
// recorder's SQLite writer (a new 4 KiB page per store) falls behind and
// back-pressure stalls the tracer. java -version-sized runs: HotSpot makes
// ~12000 recorded stores and ~5000 batch pages in a 1.8 s program, which
// then takes ~8 s.
//
// Considered and not done: userfaultfd write-protection (UFFDIO_REGISTER
// with WP; the tracer could take the uffd with pidfd_getfd). It would
// deliver write faults to a ptjit thread without ptrace stops, but to log
// a store's bytes the store must still be emulated or stepped, and an
// instruction fetch cannot be caught by uffd-WP at all, so batch mode
// would still need the mprotect dance; registering also needs syscalls
// injected into the tracee. Protections stay coalesced: ptjit only removes
// PROT_WRITE from ranges the program asked to be RWX (one VMA each) and
// toggles single pages in batch mode, so the map count grows by at most
// two VMAs per batch-writable page, and those pages go back to RX at the
// next instruction fetch.
//
// # Blind spots
//
// Writable aliases (wx_alias_linux_amd64.go): a memfd or file mapped
// MAP_SHARED twice, writable at one address and executable at another (the
// double-mapping JIT pattern). Every MAP_SHARED mmap stops (filter_linux_amd64.go);
// with W^X on, the tracker keeps each shared mapping's file, offset and
// program protection, and write-protects the writable pages whose file
// pages are also mapped executable (an injected mprotect; a later
// mprotect(RW) of the program is rewritten at entry). A store through the
// alias faults, is emulated — written through /proc/PID/map_files (root;
// /proc/PID/mem refuses forced writes to shared mappings), else stepped —
// and recorded as a write at the executable twin's address, whose page
// gets a new version. Alias stores are always precise. Not covered: an
// alias in another process (a writer process and an executor process
// sharing a memfd), SysV shm aliases, RWX memory present at exec (an
// executable stack).
//
// Changes to executable memory that make no stop: write(2), pwrite(2),
// ftruncate(2) or fallocate(2) on a file that is mapped executable and
// shared (memfd double mappings write through the other alias; that is
// W^X's job); writes through a /proc/PID/mem descriptor duplicated to
// another number or opened by an untraced process (the others are caught:
// procmem_linux_amd64.go); UFFDIO_COPY into executable
// memory; stores into RWX memory (seen only at the next mprotect, or with
// W^X off); MADV_FREE pages the kernel reclaims later; the
// READ_IMPLIES_EXEC personality (PROT_READ implies PROT_EXEC, invisible to
// the filter). process_vm_writev into a tracee is seen and re-snapshots the
// pages written; into a process ptjit does not trace, it is reported.
//
// # Software PT and its JIT filter
//
// With Options.SoftPT every thread is single-stepped and each instruction
// reported to the packet generator (softpt_linux_amd64.go). With
// Options.SoftFilter only JIT code is stepped: its pages lose PROT_EXEC
// while no thread is in them, entering faults, and while any thread of the
// address space is in JIT code every thread of it is stepped; the state
// machine and what keeps pages hidden are in softfilter_linux_amd64.go.
// Its blind spot: a file mmap whose bytes ptjit copies (a memfd, a deleted
// file) is hidden only at the syscall's exit, so another thread running
// free may execute it in between unseen.
package tracker
