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
// mutex that guards the set of live pids (Detach, for an attached
// process, only sets a flag and rings the events' doorbell, below). The db.Recorder is driven from the
// tracer goroutine only; its own writer goroutine hashes pages and writes
// SQLite, so a stop costs one copy of the bytes (process_vm_readv) and a
// channel send.
// With BPF events a watcher goroutine looks at the ring buffer every 2
// ms and signals a doorbell child of the tracer thread (a fork of ptjit
// that only pauses, traced, killed with it) whose stop wakes the tracer
// to read the ring while no tracee stops (events_linux_amd64.go): only
// when records have waited 2 ms since the tracer last read the ring (it
// reads it at every stop). It touches nothing of the tracer's state but
// an atomic time the tracer sets and the watcher reads.
//
// # One place classifies every stop
//
// classify (stop_linux_amd64.go) says once what a stop is, as a stopKind;
// Tracer.handle dispatches on it. From the wait status (classifyStatus):
// exited, killed, a signal-delivery-stop, a group-stop (PTRACE_LISTEN, so
// SIGSTOP and SIGCONT keep their meaning for the program and its parent),
// the trap stop of a new tracee, a seccomp stop (syscall entry; ptjit's,
// or a RET_TRACE of the program's own filter, told apart by the event
// message: classifySeccomp), a syscall-exit-stop, a clone/fork/vfork/exec event and PTRACE_EVENT_EXIT
// (the thread's final name is read there). A signal-delivery-stop is then
// classified by whose it is (classifySignal), from the signal, its siginfo
// and RIP and the tracer's state, in this order of precedence: the trap
// ending a --pt=soft single-step, a fetch from code the soft filter hides,
// a W^X fault (SEGV_ACCERR on memory the program has writable and
// executable), an alias fault (a store through a write-protected alias);
// anything else is the program's signal and is injected unchanged with
// PTRACE_CONT. Both decisions are pure functions with table tests; the
// handlers only act. ESRCH from a ptrace request means the thread died
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
// The seccomp filter (filter_linux_amd64.go, declared as data with the reason
// each rule cannot miss a transition) stops only mmap with PROT_EXEC or
// MAP_FIXED, mprotect and pkey_mprotect with PROT_EXEC, munmap, mremap, brk, madvise with
// advice that can drop pages, shmat with SHM_EXEC or SHM_REMAP, shmdt,
// remap_file_pages and process_vm_writev (and, not for memory, ptrace
// requests that make a tracer, and the calls that install a seccomp
// filter of the program's: see below). At the seccomp stop the tracker
// looks at the arguments and its address map (needExit): only a call that can
// change tracked memory is resumed with PTRACE_SYSCALL, and its effect is
// applied at the syscall-exit stop if it succeeded; every other call is
// resumed with PTRACE_CONT and costs one stop. Exec is seen through
// PTRACE_EVENT_EXEC (after the new image is mapped), so it is not in the
// filter; /proc/PID/maps is read there and the initial executable memory
// (file mappings, the [vdso] copied as a version with cause "exec") is
// recorded. Time stamps (TSC and CLOCK_MONOTONIC) are taken at the exit stop,
// while the thread that made the change is stopped: no thread can have run
// the new code before (the JIT thread publishes the code only after its
// mprotect returns).
//
// With BPF events (Options.Events, ptjit run --events=bpf;
// events_linux_amd64.go) the launch filter is LaunchRules(EventsBPF): the
// calls whose effect the tracker needs only at the exit, and without
// acting in the thread, no longer stop — mprotect and pkey_mprotect
// adding PROT_EXEC without PROT_WRITE, mmap of private memory that is not
// both writable and executable, munmap — and come from bpfev's ring
// buffer with the bytes a call made executable, copied in the kernel
// before the thread returned. The filter tests the prot argument for
// PROT_WRITE and PROT_EXEC together (Cond.AllBits), so the calls W^X
// rewrites at the entry (entryRewrites) still stop, as do MAP_SHARED
// mmaps, PROT_GROWSDOWN mprotects, mremap and the rest of Rules. The ring
// is read, in order, at every stop of any tracee before the stop is
// handled; a call that stopped drops its ring event; a call the kernel
// could not copy stops its thread with a SIGSTOP from the kernel (si_code
// SI_KERNEL), which ptjit suppresses; its range is read from the program
// as the seccomp path does (from the written pages alone where --copy
// tracks it: "Changed pages"), when its event is drained (the thread
// cannot run its own code before that stop). A JIT that toggles RW↔RX, or maps, fills, protects
// and unmaps, makes no stop per version (TestE2EEventsStops: 300
// versions, about 300 stops with seccomp, none of them with bpf). The
// kernel sends only the pages of a call's range that changed since it
// last sent them (bpfev's page cache, for a process of one thread), and
// a version from an event is recorded as the previous event version of
// the same range but for the pages whose bytes may differ: those alone
// are hashed and stored (TestE2EEventsPageCache).
//
// Each feature decides its part of a syscall in its own file. Three lists
// in syscalls_linux_amd64.go say in which order, each entry with the
// reason for its place: at the entry, exitNeeds (whether the call needs
// its exit stop; the first yes wins) and entryRewrites (the protection the
// kernel gets); at the exit of a successful call, exitEffects. Those lists
// are the description of the order; TestEffectOrder pins them by name. No
// step depends on a defer.
//
// # One event per code version
//
// An mprotect that adds no PROT_EXEC does not stop: it can
// only take execute permission away, or leave memory non-executable, and
// no instruction runs from memory that is not executable, so nothing can
// be missed: the next call that adds PROT_EXEC stops and records the
// version complete (a LuaJIT RW↔RX toggle is one stop per version, not
// two). What is lost is the moment a version stopped being executable:
// such a version ends at the next call over it that adds PROT_EXEC (or an
// munmap, an mmap over it, the process's end), and its end is recorded as
// inexact (versions.end_inexact; history says "until ≤T", --json
// end_inexact). A call that adds PROT_EXEC over memory recorded while
// removals were unseen always records a new version read from the
// program, a file mapping's too (Space.RemovalUnseen, Piece.loose).
// A single-threaded program's version is read at the seccomp stop, before
// the thread resumes (oneStopProtect): its next mprotect no longer stops
// and waits for the read. With several threads the version is read at the
// call's exit stop while its thread is stopped; another thread that made
// the range writable and wrote it during that read would not be stopped
// any more. A JIT serializes writes to its code (a thread writes code it
// owns, under its lock, not code another thread is making executable),
// so this needs a program racing with itself; it is not handled.
//
// Memory ptjit manages (W^X and writable aliases take PROT_WRITE away in
// the kernel, the soft filter PROT_EXEC) must follow every protection
// change, so before ptjit first sets a kernel protection other than the
// program's in a process it adds a second filter there that stops every
// mprotect, to all threads at once (TSYNC), before that protection takes
// effect: fullprotect_linux_amd64.go says how, and why no other thread's
// call can slip in between. A W^X program (java, node: RWX code) gets it
// at its first RWX mapping; a W^X-clean JIT (LuaJIT) never does.
//
// # The program's own seccomp filters
//
// A program may install seccomp filters of its own (sandboxes, browsers,
// service managers). They stack on ptjit's, which is installed before the
// program's execve and so is always the oldest. The kernel runs every
// filter, newest first, and takes the action of highest precedence
// (KILL_PROCESS, KILL_THREAD, TRAP, ERRNO, USER_NOTIF, TRACE, LOG, ALLOW),
// with the data of the first filter that returned it, that is the newest
// (seccomp(2); kernel/seccomp.c, seccomp_run_filters). What each action of
// the program's filter does under ptjit (testdata/seccomp-own checks each,
// alone and under ptjit, on calls ptjit's filter also stops and on calls
// it does not):
//
//   - RET_KILL_*, RET_TRAP, RET_ERRNO win over ptjit's RET_TRACE: ptjit
//     never sees the call, which is not executed, as alone (SIGSYS with
//     si_syscall, si_arch and the data in si_errno, and the result the
//     handler leaves in RAX; the errno). Nothing ran, nothing to record.
//   - RET_TRACE: alone there is no tracer, and the kernel fails the call
//     with ENOSYS without executing it. Under ptjit the kernel stops it for
//     ptjit instead. Every RET_TRACE of ptjit's filters carries TraceData
//     (0x5054) in SECCOMP_RET_DATA; classify reads the event message
//     (PTRACE_GETEVENTMSG) and a stop with any other data is the
//     program's (stopProgramTrace): programTrace skips the call (syscall
//     number -1) and returns -ENOSYS, as alone. When ptjit's filter stops
//     the same call (an mprotect), the program's newer filter's data is
//     the one reported, so the call fails as alone and, never executed,
//     needs no recording. A program whose filter returns RET_TRACE|0x5054
//     is taken for ptjit and its call runs.
//   - RET_USER_NOTIF wins over RET_TRACE: the program's listener answers
//     as alone. Two differences. A call the listener lets continue
//     (SECCOMP_USER_NOTIF_FLAG_CONTINUE) runs without a ptjit stop: an
//     mprotect or mmap continued that way is a blind spot (with BPF
//     events one that adds code is seen at its exit like any other, and
//     recorded: seccomp-own's test checks both). And a thread
//     waiting for its answer is woken by any signal, also one that alone
//     is ignored (SIGCHLD, SIGURG, SIGWINCH by default, or SIG_IGN: the
//     kernel does not discard signals sent to a traced thread, it reports
//     them to the tracer), and by ptjit's PTRACE_INTERRUPT
//     (--soft-filter=jit): the kernel withdraws the notification (the
//     listener's SEND and ID_VALID fail with ENOENT) and restarts the call,
//     which is notified again with a new id. A listener that does what
//     seccomp_unotify(2) asks (on ENOENT, receive the next one) gives the
//     caller the same result as alone — seccomp-own sends itself SIGURG
//     while waiting and checks it; one that counts notifications, or
//     takes ENOENT as fatal, can see the difference. A tracer cannot
//     prevent it; SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19)
//     narrows it to the time before the listener received the call.
//   - RET_LOG, RET_ALLOW lose to ptjit's RET_TRACE: ptjit stops the call
//     as without them; once resumed, the kernel runs the filters again
//     and lets the call run.
//
// Not handled: the write filter ptjit injects for a /proc/PID/mem
// descriptor (procmem_linux_amd64.go) and the filter that stops every
// mprotect (fullprotect_linux_amd64.go) are newer than the program's
// filters installed before them, so a write there, or an mprotect, that
// such a filter of the program's traces reports TraceData and runs, where
// alone it fails with ENOSYS. The syscalls ptjit
// injects (mprotect, seccomp) pass through the program's filters too: one
// the program's filter kills, traps or fails makes the injection fail.
// So ptjit's filter stops the calls that install one
// (seccomp(SECCOMP_SET_MODE_FILTER), prctl(PR_SET_SECCOMP)), and from the
// first the process injects no W^X protection change
// (ownfilter_linux_amd64.go, TestProxySeccompLate): with a protection
// proxy (below), made at the exec with only the filters of then, every
// change goes there; without one (a child of the program, an attach,
// --proxy=off, or after auto gave it up) the batch pages are made
// executable before the filter is in, and every later store into code is
// emulated (precise mode, written through /proc/PID/mem). ptjit injects
// no filter after the program's (errOwnFilter; the one that stops every
// mprotect goes in before it). A store the emulator cannot carry out is
// still stepped with its page opened by an injected mprotect.
//
// Before ptjit injects a call into a process whose filters include some
// it did not install (the program's own, or any at an attach), it reads
// the thread's filters (PTRACE_SECCOMP_GET_FILTER) and runs them on the
// exact seccomp_data the kernel would build, in golang.org/x/net/bpf's
// classic BPF machine; a call they would kill, trap or fail is not made
// (FilterRefusedError, progfilter_linux_amd64.go). At an attach, where
// they would refuse any protection change W^X needs for the RWX memory
// there, W^X is off in that process, said in one line
// (wxAttachAllowed). Reading needs CAP_SYS_ADMIN and a ptjit under no
// filter of its own; where it cannot read them, ptjit injects as before.
// A filter an attached program installs while attached is seen at the
// first call of ptjit's it refuses (lateFilter): W^X goes precise there,
// and ptjit stays attached until the process exits, since a detach could
// no longer give the program its protections back. Holding the install
// itself (a BPF_MODIFY_RETURN program on seccomp and prctl that stops the
// thread and restarts the call) needs error injection on syscalls
// (CONFIG_FUNCTION_ERROR_INJECTION), which the project's kernel lacks:
// tried, the load fails with EPERM.
// Found by trying it as a user would: a process whose filter kills mprotect,
// attached, died of SIGSYS at W^X's first change.
//
// # Debuggers and tracers
//
// A thread has one tracer, and under ptjit it is ptjit: PTRACE_TRACEME
// (gdb's and older strace's child), and PTRACE_ATTACH or PTRACE_SEIZE of
// a process ptjit traces (strace's child, gdb -p of a sibling), fail with
// EPERM, as the kernel makes them. ptjit's filter stops ptrace with those
// three requests only (other requests concern the program's own tracees,
// which cannot exist under ptjit except in processes ptjit does not
// trace), and the first call that collides prints one line per run
// (ptraceWarning; not with -q):
//
//	ptjit: pid N: ptrace(PTRACE_TRACEME) fails with EPERM: the program is already traced by ptjit and ...
//
// The call itself runs unchanged. Attaching to a process ptjit does not
// trace is left alone and may work.
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
// A few calls' effects cannot be computed from their arguments (brk,
// shmdt, remap_file_pages, a PROT_GROWSDOWN mprotect, an mprotect or
// munmap that failed halfway): the Space is synced with /proc/PID/maps at
// their exit stop. The maps also show what other threads' calls in
// flight did (their exit stops not handled yet); syncAfter hides that
// (maskInFlight, inflight.go: their ranges read as the Space has them,
// and with a call in flight whose address is not known yet, untracked
// fresh executable memory is left out unless the syncing call made it,
// as brk the [heap]), so every version has the cause and thread of the
// call that made it, and one thread's version never takes in another's
// pages (testdata/jit-many, where a thousand threads map code while one
// moves the break).
//
// # Never a stopped or orphaned tracee
//
// PTRACE_O_EXITKILL: when the tracer thread exits, however (panic, SIGKILL),
// the kernel SIGKILLs every tracee. The launched child also has
// PR_SET_PDEATHSIG=SIGKILL. Its forks do not inherit PDEATHSIG (the
// kernel clears it in fork) but are tracees, so EXITKILL covers them. On
// ptjit's own SIGTERM/SIGINT/SIGHUP, ptrun makes sure the program got the
// signal once (SignalSeen: a signal-delivery-stop of it; else Signal sends
// it to the launched process), and on a second one calls Kill: the loop
// sees every tracee exit, and the recording is flushed.
//
// # Pinning (--pin) and the cost of a stop
//
// A stop is a round trip through the kernel (the seccomp stop, then the
// syscall-exit stop) plus ptjit's own work: GETREGS, the stamp, a 4 KiB
// copy, and the db writer goroutine hashing and inserting on the same
// CPUs. Whether tracer and tracee share a CPU made no measurable
// difference to the round trip (docs/decisions.md). Pinning takes the
// other CPUs away from the program and changes what sched_getaffinity
// tells it (JVMs and V8 size their thread pools from it), which breaks
// "the program behaves as without ptjit". So --pin=auto means off;
// --pin=on pins the tracer thread, and through inheritance the program
// and all its children, to the first allowed CPU.
//
// On a VM whose idle CPUs halt (no guest halt-polling, as on the 2-vCPU
// machine the bench runs on) the CPU does matter: a bare seccomp stop
// cost 9.5 µs with tracer and tracee on one CPU and 115 µs on any
// (ptjit-bench's stop row, 2026-11-27 03:09), because each side's wake-up
// of the other's sleeping CPU is an interrupt through the hypervisor. So
// the tracer polls for the next stop before it sleeps in wait4 (spin.go,
// spinwait_linux_amd64.go): for up to twice the recent waits' average, at
// most 250 µs, only while that average is short, only while no thread on
// the machine waits for a CPU (/proc/loadavg's running count, every 5
// ms), and never when ptjit may use one CPU only (--pin=on). The waits
// for a thread ptjit resumed for its own step (an injected mprotect) keep
// their own average. Measured with the stop row (3 runs each,
// alternating, load 1–1.5, 03:15–03:27): ptjit's cost per stop seen by
// the tracee 93–120 µs before, 38–53 µs after (one run of the old binary
// also got 36: the two threads happened to share a CPU). Two hours later
// (05:26, load 0.1–1) the old binary measured 40 and 49 µs and this one 51
// and 55, while a bare C tracer still took 85–155 µs a stop blocking and
// 19 µs polling: where the scheduler puts ptjit's threads (the Go
// runtime's own) decides it as much. BENCHMARKS.md has both series.
//
// The exec-adding path is a RET_TRACE stop, not a seccomp user
// notification: a notification cannot observe the call's result, so the
// exit stop would stay (docs/decisions.md has the comparison).
//
// # One stop per mprotect, and the cost of a version
//
// A JIT that toggles its code area RW↔RX (LuaJIT on testdata/bench.lua
// makes tens of thousands of mprotect calls on 64 KiB areas) pays for
// every stop and every version. What ptjit does about it:
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
// Together with an 8 MiB SQLite cache and synchronous=OFF (db/doc.go)
// these are what ptjit-bench measures (BENCHMARKS.md). What remains is one
// stop per mprotect and reading, comparing and storing each version's
// bytes: that bounds a JIT like LuaJIT under a ptrace recorder to well
// above its time alone.
//
// What a stop costs ptjit itself (measured per stop on PyPy and Erlang,
// 2026-11-27; BENCHMARKS.md), and what keeps it small:
//   - a brk stops for its exit only where it can shrink the heap over
//     tracked memory (brkNeedsExit: the space's highest break bounds the
//     pages it can unmap), and a MAP_FIXED mmap without PROT_EXEC only
//     where it replaces tracked memory or a tracked shared mapping
//     (coreNeedsExit, aliasNeedsExit) or another thread's call is in
//     flight: each exit was a second stop, a brk's also a read of
//     /proc/PID/maps (300 µs); Erlang: 727 stops a run → 653;
//   - the file behind a new executable mapping is asked of the kernel
//     for that one mapping (snapshot.QueryMap, the PROCMAP_QUERY ioctl
//     of Linux 6.11; the maps file before it): 150–400 µs → 20 µs;
//   - an anonymous mapping's first version is zeros, recorded without a
//     read (Change.zero): PyPy's 1 MiB JIT area cost 1.2 ms to read;
//   - a version of a shared file mapping reads the file's data only
//     (fileDataRuns, SEEK_DATA): Erlang's fresh 8 MiB memfd took 15 ms;
//   - a filter ptjit adds is short: the kernel checks and compiles every
//     instruction at the injection (Compile's compiler shares range tests
//     and identical rule blocks; the kernel-write filter went from 3,626
//     instructions, 1.2–1.4 ms to inject, to 1,635, 0.4–0.6 ms).
//
// # Changed pages (--copy)
//
// A JIT that rewrites a few pages of a large area between versions pays,
// under full copies, for reading the whole area at every version. With
// Options.Copy (ptjit run --copy; pages_linux_amd64.go) a range's first
// version is read whole and the range write-protected with a userfaultfd
// in asynchronous mode (UFFD_FEATURE_WP_ASYNC, Linux 6.7): a store to a
// protected page is not reported to anyone, the kernel unprotects the page
// and the store goes on, and the page counts as written. Each later
// version of the same range runs PAGEMAP_SCAN on /proc/PID/pagemap, which
// returns the written pages and protects them again in the same call
// (PM_SCAN_WP_MATCHING), reads only those, and records a row that names
// the previous version's page hashes for the rest (db.AddVersionPages).
// Order makes it exact: protect, then read; a store after the scan is
// seen by the next one, a store between the scan and the read is read now
// and again next time.
//
//   - The userfaultfd must belong to the program's mm: ptjit makes it there
//     with an injected userfaultfd(2) (UFFD_USER_MODE_ONLY, allowed with
//     vm.unprivileged_userfaultfd=0), takes a duplicate with pidfd_getfd
//     and closes the program's descriptor with an injected close, so the
//     program never holds a descriptor it did not open. UFFDIO_API,
//     UFFDIO_REGISTER and UFFDIO_WRITEPROTECT then work from ptjit on the
//     duplicate (the context keeps the mm it was made in). Injection needs
//     a stop: the first exec-adding call that the mode would track is
//     skipped, the userfaultfd made at its exit stop, and the call
//     restarted (restartAround, shared with the full-protect filter).
//     With BPF events such a call makes no seccomp stop; a range the mode
//     tracks (1 MiB or more) is over the BPF program's budget, so its
//     calls fall back to a SIGSTOP from the kernel, and the userfaultfd is
//     made at the first of those stops (pagesAtEventStop). That call's
//     version is read whole; the range's next version is registered and
//     read whole, and the ones after it are read from their written pages,
//     at whichever point the tracker applies the call (the ring's drain or
//     the stop: the thread runs none of its own code in between). A
//     complete event (the kernel's copy of a range within the budget) over
//     a part of a tracked range leaves the range's registration and its
//     last version as they were: the next scan still reports every page
//     written since that version.
//   - Private anonymous memory is registered, and shared anonymous memory
//     (MAP_SHARED|MAP_ANONYMOUS: PHP's opcache JIT buffer, 64 MiB read
//     whole at every version before) in a process that has not forked and
//     is no fork's child, where the kernel write-protects shared memory
//     (UFFD_FEATURE_WP_HUGETLBFS_SHMEM): no other process maps it then.
//     A fork makes it the child's too, and its ranges are read whole from
//     then on. A store through another mapping of shared or file memory (a
//     memfd, a file, SysV shm) changes the pages without a fault in this
//     one. Writable-and-executable memory is W^X's (its stores are
//     emulated or stepped). A range the program re-maps (mmap, mremap) is
//     a new vma without the registration: PM_SCAN_CHECK_WPASYNC fails the
//     scan, and the range is registered again and read whole; a new
//     region over a tracked range, or its region's end, drops it too.
//     Pages MADV_DONTNEED dropped read as zeros without a store: the
//     scan reports them written on 6.18 (their protection marker went with
//     them); a second scan for pages neither present nor swapped (no
//     marker) makes that explicit for any kernel that does not.
//   - A fork's child has no registration (no UFFD_FEATURE_EVENT_FORK): its
//     space gets its own userfaultfd at its first tracked call. An exec
//     drops the space and its userfaultfd with it.
//   - Never break the program: a process with a seccomp filter of its own
//     (Seccomp_filters above ptjit's own, which it inherits, plus those
//     ptjit installed; its filter could kill it for the call) or a userfaultfd of its own (its registration of a range
//     ptjit registered would fail with EBUSY) gets full copies, and so does
//     a process where any step fails (an older kernel: UFFDIO_API refuses
//     WP_ASYNC). The summary and the meta table (copy_mode, copy_fallback)
//     say which mode ran and why not. Not handled: a program that makes its
//     first userfaultfd after ptjit registered a range, and registers that
//     range, gets EBUSY.
//
// Tracking costs a fault per written page and a PAGEMAP_SCAN per
// version, where a full copy costs a read proportional to the range: a
// small range is cheaper to copy. --copy=auto tracks only ranges of
// changedMin (1 MiB) or more, where the two cost about the same (the
// measurements are in docs/decisions.md); --copy=changed forces tracking
// for every eligible range (the tests use it).
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
// (classifySignal) and, when it is ptjit's, handled by wxFault or
// aliasFault: SEGV_ACCERR at an address ptjit write-protects is ptjit's and
// is consumed; anything else (HotSpot's implicit null checks and safepoint
// polls, a program storing into its own RX code) is delivered unchanged
// with its original siginfo (the stop is simply continued with the
// signal). A fault another thread's handling made stale (several threads
// faulting on one page) is retried once. A store re-records only the
// pages it changed: the rest of the mapping's version goes on as split
// versions that name its recorded pages (Space.WritesSeen,
// Sink.SplitVersion), so a stop costs the same in a 4 KiB mapping and in
// a 512 MiB one, and a large mapping patched in a few places is a few
// versions.
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
//   - fresh memory (batch and auto): a new private anonymous RWX mapping
//     holds only zeros, so it starts as batch pages (RW, not executable)
//     rather than RX: the program fills it without a stop, and each page
//     is recorded at its first execution (cause "wx-fresh", the TID and
//     IP of the instruction that runs there first: no store was seen),
//     then made RX; a later store into it is precise or batch as anywhere
//     else. HotSpot commits its code heaps this way (three 2.5 MiB RWX
//     mappings) and emits code page after page (docs/decisions.md has
//     what it saved). Precise mode keeps every store and starts such
//     memory RX.
//   - auto (default): precise, except that a page with 2 precise stores in
//     the last 10 ms goes batch (a patcher toggling a static key now and
//     then stays precise; a JIT emitting a function into RWX memory goes to
//     batch after its first stores). A store the emulator cannot carry out
//     (an AVX-512 copy; x86asm has no EVEX) sends its page to batch at
//     once: stepping it costs two injected mprotects and a step, and
//     HotSpot's code-cache copies are made of them (ptjit-bench measures
//     testdata/Hot.java and testdata/hot.js: BENCHMARKS.md).
//   - thread stacks and control blocks (wx_tcb_linux_amd64.go): the
//     kernel writes a thread's stack (signal frames, syscall output) and
//     its control block (the tid at clone and exit, the rseq area whenever
//     the thread resumes) itself, and such a write into an
//     executable-only page fails: EFAULT, or SIGSEGV for a signal frame or
//     an rseq update, a tid left 0 (pthread_join returns at once), and
//     EFAULT for a shared futex on the tid word. glibc keeps the block at
//     the top of the thread's stack and maps thread stacks RWX in a
//     program with an executable stack. So that memory (wxState.kw: each
//     CLONE_VM child's stack region and control-block pages, the rseq area
//     at the parent's offset from its thread pointer read with
//     PTRACE_GET_RSEQ_CONFIGURATION; and the range of any RWX mprotect
//     over kw memory or the caller's stack pointer, or with
//     PROT_GROWSDOWN) is kept writable: not executable until code runs in
//     a page, then recorded (cause "wx-tcb"); a page of control words is
//     then left writable and executable (later changes to code there are
//     not seen), any other stack page becomes W^X's code like any other. The parent waits in its clone event stop until the child's
//     first stop made its block writable (injected syscalls cannot run in
//     an event stop inside clone); a tid the kernel could not write is
//     written by ptjit. An RWX mprotect over such memory runs as asked and
//     the rest of its range is protected at the exit (wxTCBEffect).
//     Without this, --wx=precise broke every thread of an execstack
//     program; batch and auto broke threads that ran code in their stack.
//
// Syscalls ptjit injects (inject_linux_amd64.go) execute a syscall
// instruction already in the process (found in the vdso), never injected
// code: registers are saved, RIP pointed at the instruction, r9 (the sixth
// argument; ptjit's calls take at most five) set to InjectCookie, the
// tracee single-stepped over the instruction (its trap comes when the call
// returns), registers restored. Every filter ptjit compiles lets a call
// with the cookie run without a seccomp stop, so an injected call is one
// ptrace round trip instead of three (PTRACE_SYSCALL's entry stop, the
// seccomp stop of our own call, the exit stop; docs/decisions.md). The
// cookie is random per run; the program cannot read its own filters (that
// needs ptrace, and ptjit is its tracer), so it cannot pass a call of its
// own unseen. Signals that arrive meanwhile are held, with their siginfo,
// and sent again when the thread resumes for the program
// (signals_linux_amd64.go); a filter of the program's own that traces the call
// adds a stop, which is passed.
//
// # The protection proxy
//
// W^X's protection changes (protect: a batch page made writable at its
// first store and executable again at its next fetch, the pages opened
// for a stepped store) are most of what ptjit injects: Guile's JIT
// appends code to a page that already ran, twenty to thirty times a page,
// and each time costs two of them. An injection is a round trip to the
// stopped thread on whatever CPU it last ran, and on a VM whose idle CPUs
// halt that round trip is a wake-up of another CPU each way (a bare C
// tracer stepping a task over a syscall instruction 20,000 times on the
// 2-vCPU bench machine, 2026-11-27 06:25: 120-165 µs a step with the task
// on the other CPU, 13-18 µs with it on the tracer's own).
//
// So a process ptjit launched gets a proxy (proxy_linux_amd64.go): a
// task made by an injected clone(CLONE_VM|CLONE_PARENT) at the execve's
// syscall-exit stop, sharing the program's memory but not a thread of it
// (not in /proc/PID/task, not the program's child: CLONE_PARENT makes
// ptjit its parent, and its exit signal is 0). It stays in a ptrace stop
// for its whole life and is pinned to the tracer thread's CPU; each
// protection change sets its registers for the call (InjectCookie in r9,
// as for an injection) and steps it over the vdso's syscall instruction.
// The program's thread is not touched: no registers saved and restored,
// no signals held. The proxy never runs another instruction; signals
// sent to it (its process group's SIGINT) are dropped at its next step;
// it is killed and reaped when its address space ends (the process's
// exit, an exec), and by the kernel with ptjit (PTRACE_O_EXITKILL).
// Killed from outside, its space's calls are injected again
// (TestProxyKilled). It is made only where ptjit is the parent: not for a
// child of the program (the proxy would be the program's child, a zombie
// it could wait for), not for an attached process, not under perf record
// (the program is perf's child, and perf's inherited events would trace
// the proxy), not with soft PT (which steps every thread anyway), and
// not with BPF events (their in-kernel page cache works only while the
// memory has a single user, and the proxy is a second). It
// is made at the exec stop so that no seccomp filter of the program's can
// refuse the clone (the proxy keeps the filters it had then; ptjit's let
// its calls through).
//
// The mprotect itself costs the same wherever it runs (about 19 µs on
// the bench machine with the tracer and the stepped task on one CPU, of
// which a plain step is 15 µs); the proxy saves the other CPU's wake-ups.
// Measured on Guile's compile.scm 60 (3,820 protection changes, load
// 1.0–1.3, 06:30): 35–46 µs a change through the proxy against 52–70 µs
// injected. On a 16-CPU VM whose idle CPUs poll (the lent device, 06:50)
// it was the other way round: testdata/append-jit 2000 (4,000 changes)
// took 463 ms with every change in the proxy and 430 ms with every one
// injected (medians of 9; alone 112 ms). So --proxy=auto (proxypick.go)
// times both paths as they run, alternating for the first 8 calls of
// each, then takes the one whose recent calls (a moving average, each
// call counted at most 4× the average) were cheaper, and the other every
// 32nd call so that its average follows the machine. After 256 calls with
// injection the cheaper, the proxy is given up (closed, and none made
// for later processes): its presence costs by itself (a second user of
// the memory whose CPU every later protection change must reach), which
// the timing of the proxy's own calls cannot show: on the 16-CPU VM,
// append-jit took 357 ms under auto before this and 327 ms with no proxy
// (07:21). What W^X still
// costs per batch cycle (two faults, each a stop of the program's thread,
// two protection changes, a 4 KiB copy and its version) is in
// BENCHMARKS.md, against testdata/floor wx, the least W^X.
//
// Precise mode pays a fault stop and ptjit's handler per store, batch and
// auto almost nothing (tracker/testdata/wxbench.c, BenchmarkWXPrecise and
// BenchmarkWXBatch). Under many stores precise mode degrades when the
// recorder's SQLite writer (a new 4 KiB page per store) falls behind and
// back-pressure stalls the tracer. Protections stay coalesced: ptjit only removes
// PROT_WRITE from ranges the program asked to be RWX (one VMA each) and
// toggles single pages in batch mode, so the map count grows by at most
// two VMAs per batch-writable page, and those pages go back to RX at the
// next instruction fetch. Why faults and not userfaultfd write-protection:
// docs/decisions.md.
//
// # Blind spots
//
// Writable aliases (wx_alias_linux_amd64.go): a memfd or file mapped
// MAP_SHARED twice, writable at one address and executable at another (the
// double-mapping JIT pattern). Every MAP_SHARED mmap stops
// (filter_linux_amd64.go); with W^X on, the tracker keeps each shared
// mapping's file, offset and program protection, and write-protects the
// writable pages whose file pages are also mapped executable (an injected
// mprotect; a later mprotect(RW) of the program is rewritten at entry). A
// store through the alias faults, is emulated — written through
// /proc/PID/map_files (root; /proc/PID/mem refuses forced writes to shared
// mappings), else stepped with every alias page it writes opened (a
// 32-byte store straddling two pages, or two views) — and recorded as a
// write at the executable twin's address, whose page gets a new version.
// Under batch and auto, a burst through an alias page goes batch
// (wx_alias_batch_linux_amd64.go): the twins of its file page lose
// PROT_EXEC, then the alias page is made writable; the first fetch from a
// twin write-protects the alias again and records the twins. Which store
// goes batch is storePolicy's decision for aliases and RWX memory alike.
// Not covered: an alias in another process (a writer process and an executor
// process sharing a memfd), SysV shm aliases, RWX memory present at exec (an
// executable stack).
//
// Kernel writes into code (kwrite_linux_amd64.go): the calls that copy
// into memory the program names (read, pread64, recvfrom and their kind,
// the structs of stat, wait4, pipe, clock_gettime, getsockname and some
// fifty more, the arrays of epoll_wait, poll and select, a futex word)
// stop where a
// destination lies in memory W^X protects,
// and those that copy through an array of buffers (readv, preadv,
// preadv2, recvmsg, recvmmsg, process_vm_readv) at every call in a
// process with such memory; the pages their destinations hold there
// become batch pages before the call runs, as alone, and are recorded
// when code next runs there. Other kernel writes into such memory
// (ioctl, mincore, msgrcv, io_uring) fail with EFAULT.
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
// # Attaching to a running process
//
// With Options.Attach (ptjit run -p PID; attach_linux_amd64.go) the
// tracer seizes a process that is already running instead of launching
// one, and Tracer.Detach lets it go again, leaving it as it was. A
// seccomp filter cannot be removed from a process, so attach installs
// none and needs BPF events: every address-space call comes from the
// ring buffer (all the calls bpfev reports, not only those LaunchRules
// lets through: with no filter nothing stops at a call's entry).
//
// At the attach every thread in /proc/PID/task is seized and
// interrupted (the listing is read again until no new tid shows), the
// process and its threads are recorded, its tgid is added to the event
// source while every thread is stopped, and its executable memory is
// read from /proc/PID/maps and recorded as it is (cause "attach", the
// attach's time, no IP). Start returns once that is done: what the
// caller starts then (ptrun's perf record -p for --pt=intel) can only
// see code the recording already has. Each thread's first stop then goes
// to the main loop like any stop: a signal pending at the attach is delivered, a
// group-stop stays one. At the detach (Detach from any goroutine; the
// doorbell wakes the tracer) every thread is interrupted and the stops
// that come first are handled as usual (a signal is delivered, a step or
// an injected call in flight completes, since every handler finishes
// its work before it returns); once every thread is in an interrupt stop
// the ring is drained, the process leaves the event source, W^X's
// protections are undone (below), the open versions end (cause
// "detach"), and each thread is detached with signal 0 (the kernel keeps
// a group-stopped one stopped).
//
// What attach sees, and what it cannot:
//
//   - Code that ran before the attach is recorded as it is at the attach,
//     one version per executable range (file mappings as at exec); how
//     and when it was made, and what it was before, is not seen.
//   - Every mmap, mprotect, pkey_mprotect, munmap, mremap, madvise, brk,
//     shmat, shmdt and remap_file_pages while attached, from the ring
//     buffer, with the bytes BPF copied for a call that made memory
//     executable (or read at its fallback stop). Calls the launch path
//     handles at a stop (mremap, madvise, brk, shared mappings, PROT_GROWSDOWN
//     mprotects) are applied after the fact, their bytes, where BPF did
//     not copy them, read from the process when the event is read.
//   - W^X (Options.WX) is applied after the fact: at the attach, memory
//     that is RWX then loses PROT_WRITE in the kernel (injected mprotects
//     in a thread in its interrupt stop; memory holding a thread's stack
//     pointer stays RWX: the kernel writes there); an RWX mmap, mprotect
//     or pkey_mprotect made while attached stops its thread at its exit
//     (bpfev.AddStopping: the BPF program's SIGSTOP, before the thread
//     runs on), where W^X protects the range as wxEntryProt would have at
//     the entry (fresh memory starts executable-only, as in precise
//     mode). Between the call and that stop the memory is RWX in the
//     kernel: another thread's store there is not seen. Stores are then
//     caught, emulated, stepped or batched as for a launched program. At
//     the detach every piece the program has RWX gets RWX back in the
//     kernel (batch pages included), injected in a thread in its
//     interrupt stop after the process left the event source. Not
//     available under attach: the filters W^X adds in a launched program
//     (the one that stops every mprotect of managed memory, the
//     kernel-write filter), so a read(2) or the like into code W^X
//     protects fails with EFAULT, and a mprotect over managed memory is
//     applied from the ring after the call; writable aliases (MAP_SHARED
//     double mappings) are not followed.
//   - No filter of ptjit's exists in the process: not the launch filter,
//     the kernel-write filter (kwrite_linux_amd64.go), the /proc/PID/mem
//     write filter (procmem_linux_amd64.go) nor the filter that stops
//     every mprotect (injectFilter refuses in an attached process). So
//     writes into code by read(2) and the like, through /proc/PID/mem or
//     process_vm_writev are not seen, nor is a ptrace(2) of the program's
//     own, and the program's own RET_TRACE filter is answered as without
//     ptjit (ENOSYS) only for the calls it traces.
//   - Versions are read whole (Options.Copy is full): the userfaultfd
//     of changed-page tracking would stay in the process.
//   - Processes the target started before the attach are not followed;
//     threads and processes it creates while attached are (the ptrace
//     options), and left at the detach like the rest.
//   - With Options.SoftPT (not SoftFilter, which rewrites calls at their
//     entry) every thread is stepped from its first stop after the
//     attach; at the detach no new step starts (softResume continues an
//     exiting thread), and a thread whose last step's trap is pending (a
//     step over a syscall the interrupt ended) is continued until the
//     trap is consumed, so the program never gets a SIGTRAP of ptjit's.
//   - ptjit dying leaves the process running (no PTRACE_O_EXITKILL): the
//     kernel detaches its threads and the BPF program goes with ptjit's
//     descriptors.
//
// # 32-bit programs are refused
//
// A process that execs an i386 program runs in compatibility mode (code
// segment 0x23): 32-bit code, syscalls through int 0x80 with i386 numbers
// and argument registers; an x32 program makes its syscalls with the x32
// bit set. ptjit records neither (the filter traces such calls, but the
// tracker reads them as x86-64 calls, and the decoder, software PT and
// the store emulator read 64-bit code), so instead of a recording that
// silently lacks their code, execEvent refuses the run at the first exec
// of one (refuseExec, compat_linux_amd64.go: PTRACE_GETREGSET gives the
// i386 register set, or /proc/PID/exe's header says ELFCLASS32), in any
// process:
// the process stays in its exec stop, nothing of the new image ran or is
// recorded, every traced process is killed, and Result.Refused carries
// the RefusedError (one line: pid, path, "ptjit records 64-bit processes
// only"). ptrun exits 126 and marks code.db "refused: ..." (what ran before
// stays: a 64-bit parent's code and trace). Not handled: a 64-bit process
// that switches itself to 32-bit code (a far jump to the 32-bit user code
// segment, 0x23) without an exec.
//
// # Software PT and its JIT filter
//
// With Options.SoftPT every thread is single-stepped and each instruction
// reported to the packet generator (softpt_linux_amd64.go; it also
// explains a step that stopped late because a hypervisor lost the trap
// after an instruction it emulates, CPUID). With
// Options.SoftFilter only JIT code is stepped: its pages lose PROT_EXEC
// while no thread is in them, entering faults, and while any thread of the
// address space is in JIT code every thread of it is stepped; the state
// machine and what keeps pages hidden are in softfilter_linux_amd64.go.
// Its blind spot: a file mmap whose bytes ptjit copies (a memfd, a deleted
// file) is hidden only at the syscall's exit, so another thread running
// free may execute it in between unseen.
//
// # Imports
//
// Must not import: ptrun, recording, decode, ptfmt. The recorder sits
// below the launcher and knows nothing of decoding; it imports
// internal/platform, clock, db, snapshot, softpt, perf, x86, bpfev and its own
// internal/x86emu, no more (internal/layers checks both).
package tracker

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
