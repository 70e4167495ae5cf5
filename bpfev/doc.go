// Package bpfev is an eBPF event source for the address-space system calls
// of traced processes: it reports every mmap, mprotect, pkey_mprotect,
// munmap, mremap, madvise (advice that can change memory), brk, shmat,
// shmdt and remap_file_pages a process in its map makes, and, for a call
// that made memory executable, the bytes of that memory, copied in the
// kernel before the thread returned to user space. The tracker reads these
// events instead of stopping the thread for each code version.
//
// # Lifecycle
//
//	s, err := bpfev.Open(bpfev.Config{})   // load and attach (root, or CAP_BPF+CAP_PERFMON)
//	s.Add(tgid)                            // at launch, clone of a process, exec; Remove at exit
//	for { s.Next(&ev) }                    // or TryNext at a ptrace stop; SetDeadline; Close unblocks
//	s.Close()                              // detaches: nothing stays in the traced processes
//
// Available says, before anything else, whether a Source can run here,
// and if not why, in one line (for --events=auto).
//
// # The program
//
// One BPF program, a BTF raw tracepoint on sys_exit (the raw_syscalls
// tracepoint, whose arguments are the thread's user pt_regs and the
// result), written with cilium/ebpf's asm package in prog_linux_amd64.go.
// asm rather than C compiled by bpf2go: the program is about 760
// instructions, it is built at Open with the running kernel's structure
// offsets (from its BTF: pt_regs, thread_info.status, task_struct.mm,
// mm_struct.mm_lock_seq, mm_struct.mm_users, vm_area_struct.vm_flags) and the Config's constants (signal, page budget)
// in place, and neither `make` nor a regeneration step needs clang; the
// verifier checks every load through a kernel pointer against the same
// BTF. The alternatives, tried on the kernel this was written on (6.18,
// CONFIG_KPROBES unset, lockdown=integrity): the per-call tracepoints
// syscalls:sys_exit_* need tracefs mounted (it was not) and hang off the
// same sys_exit hook, so they cost every system call of every process the
// same as this program (below); fexit programs on __x64_sys_* would not
// load (EPERM); kretprobes on them do not exist without kprobes. The
// cost of the hook: while a Source is open, every system call of every
// process on the machine takes the kernel's slow exit path and runs the
// program's first instructions, which compare the call's number with the
// watched ones (BenchmarkGetpid measures it; BenchmarkExecToggle and
// BenchmarkToggleProgram the cost of an event). A kernel where
// fexit loads could move the program there, with the same instructions
// but for the context's layout.
//
// For each system call exit, the program, in this order, returns at once
// unless the call is one of those above (compared with orig_ax), is a
// 64-bit call (thread_info's TS_COMPAT clear: the i386 numbers of an int
// 0x80 call are other calls; the seccomp filter stops every such call),
// comes from a process in the tgid map, and is not the tracer's own
// (r9 holding Config.Ignore: the tracker's injected calls, whose pages
// it would copy only to drop them); then it reserves a call
// record in the ring buffer and fills in the thread, the time, the user
// IP, the number, the six argument registers and the result. When the
// call made memory executable — mprotect or pkey_mprotect returning 0 with
// PROT_EXEC, mmap returning an address with PROT_EXEC, mremap returning
// an address whose mapping is executable (bpf_find_vma, a callback that
// reads vm_flags), shmat with SHM_EXEC — it copies the range page by page
// (bpf_probe_read_user, a bpf_loop of Config.BudgetPages at most, whose
// callback the verifier checks once) into page records that follow the
// call record, but for the pages the page cache (below) finds unchanged. For mremap the range is the new
// one (the result and new_size): pages it grew are not present, so a
// growing mremap of executable memory falls back.
//
// # The page cache
//
// A JIT rewrites little of what it makes executable again: LuaJIT
// mprotects its whole 64 KiB machine-code area RW→RX for each trace it
// adds, a few hundred bytes of it new. Sending every page through the
// ring, and hashing and comparing it again in the reader, cost more than
// the stops the events replace (BENCHMARKS.md). So, for a call whose
// range has at most cacheBudget (64, the budget) pages, the program keeps in a hash
// map (Config.CachePages entries, preallocated) the bytes of each page it
// last sent, by (tgid, page address), with the process's epoch. It reads
// each page into this CPU's scratch page, compares it with the page's
// entry word by word (a bpf_loop callback, 64 words a call, their
// differences or'd together: never a hash, so "unchanged" is exact), and when they are equal sets the page's bit
// in the call record (Event.Same) and takes no ring space. A page that
// differs, or has no entry, is copied into a page record reserved in the
// ring, from there into its entry (inserted when missing, while the map
// has room), and the record is committed. The
// reader keeps its own copy of every page it is sent in a call that used
// the cache, by epoch and address, and fills Event.Bytes's unchanged
// pages from it: the cache holds exactly what the reader was sent, so the
// bytes are those the kernel compared. Event.Gens numbers the pages (equal
// numbers, equal bytes), which lets the tracker record a version from the
// last one's pages without reading, hashing or comparing them again.
//
// What keeps every entry equal to the reader's copy:
//
//   - one writer per entry: the cache is used only while the process's mm
//     has one user (mm_users 1: one thread, no CLONE_VM sibling, nobody
//     reading its memory at that moment), so no other thread copies into
//     the same entries meanwhile, and the copies happen in the order of
//     their records in the ring. A process of several threads sends every
//     page, as without the cache;
//   - the scratch page is this CPU's, and another task may run the program
//     on this CPU while this one is preempted (a preemptible kernel): the
//     scratch starts with its user's token (the thread), written before
//     the page is read and checked after the compare and after the copy
//     into the record; a token that changed makes the call fall back
//     (ReasonRaced) before anything of that page is claimed, cached or
//     committed;
//   - no eviction: an LRU map could recycle an entry for another key while
//     a program compares a page with it; this hash frees an entry only
//     when its own process's thread deletes it, or when Remove deletes the
//     removed process's entries. When it is full, pages without an entry
//     are sent every time;
//   - an entry changes only together with a page record that the reader
//     will see (the entry is copied from the reserved record, which is then
//     committed: a commit cannot fail), in a call whose record
//     says it used the cache (Event.Epoch), for which the reader updates
//     its copy; a copy into an entry that fails deletes the entry, and a
//     delete that fails ends the process's caching (its epoch becomes 0);
//   - epochs: Add gives a process a new epoch, and an entry of another
//     epoch is no entry, so a tgid reused by a new process, or added again,
//     starts empty; Remove drops the reader's copies of the epoch;
//   - memory that changed without a call (RWX), a range unmapped and mapped
//     again, an exec: the comparison is of the bytes, so a page is
//     "unchanged" only if its bytes are those the reader holds.
//
// A page the kernel found unchanged that the reader does not hold (never
// expected) makes the event a fallback with ReasonUnknownPage, never a
// wrong page. Calls without the cache take the plain loop (a page record
// per page).
//
// # Loading
//
// Open's time is every --events=bpf run's, so the program is built for
// the verifier too: the page loops and the compare are bpf_loop callbacks
// (checked once, not walked per page or per word), and the current
// task's mm is read with bpf_probe_read_kernel rather than through the
// BTF-typed task pointer (each such load made the verifier search the
// whole kernel BTF by name for the pointee's "__safe_trusted" variants).
// Verification went from 47 ms to 16 ms and BenchmarkOpen from 70 ms to
// 32 ms (2026-11-26); the rest is the kernel's BTF, parsed once per
// process (20 ms), and the maps.
//
// # Records and events
//
// A call record is reserved before its page records and committed after
// them, and a ring buffer is read in reservation order, so the reader
// meets a call record first and, by then, all its pages are committed
// (event.go has the layouts; a page the cache found unchanged has no
// record). Next and TryNext
// assemble the pages, and the unchanged ones from the reader's copies,
// into Event.Bytes. A call record the ring had no room for is counted (Lost);
// if it was an exec-adding call, the thread is still sent the signal.
//
// The program wakes a reader blocked in Next only when its event took the
// bytes waiting in the ring past Config.WakeBytes (bpf_ringbuf_query), so
// once per crossing, not once per event while the reader is behind;
// otherwise Next finds the records at its next poll (Config.Poll, 1 ms).
// A wakeup per event (the ring's default) is an interrupt per event and
// cost the traced program more than the copy itself
// (BenchmarkToggleProgram). TryNext needs no wakeup.
//
// # Exactness: the fallback
//
// The kernel cannot always copy: a page that is not present (never
// touched, swapped out, a file page not yet mapped in: the program may not
// fault pages in), a range over the budget, a full ring, a call whose size
// is not in its arguments (shmat), or another thread taking the process's
// mmap_lock for writing during the copy. Then the event has FlagFallback
// and the Reason, holds the pages copied before the failure, and the
// program sends the thread Config.Signal with bpf_send_signal_thread: the
// signal is pending before the thread leaves the kernel, so the thread
// stops (a signal-delivery stop under ptrace) before it runs any
// instruction after the syscall, and the tracer copies the range with
// ptrace there, as the seccomp path does today. The default, SIGSTOP,
// cannot be blocked or ignored; its siginfo has si_code SI_KERNEL and
// si_pid 0, which no kill(2) or tgkill(2) from user space produces, so the
// tracer tells it apart and suppresses it (restarts the thread with
// signal 0). A blockable signal (the tests use SIGUSR1 with a handler,
// to observe the delivery without ptrace) is delayed while the thread
// blocks it, so it cannot promise the stop. FlagSignaled says the signal
// was queued; SignalErr is the helper's error otherwise (a thread that is
// exiting).
//
// # Ordering: events, ptrace stops, timestamps
//
// Time is bpf_ktime_get_ns, CLOCK_MONOTONIC, read in the thread's own
// context at its sys_exit tracepoint: after the call's effect on the
// address space, before the kernel's syscall-exit ptrace report and
// before any signal delivery. TSC puts it on the trace's time base
// (tsc = ref.TSC + (Time - ref.MonoNS) * hz / 1e9, with a clock.Stamp ref
// and the TSC frequency; the tests check it against RDTSC read by the
// traced program around its call). The invariants the tracker can rely on:
//
//  1. Per thread, events and ptrace stops are in one order by time: an
//     event's Time is later than the stamp of every stop of that thread
//     before the call's entry, and earlier than the stamp of its next stop
//     (the syscall-exit stop of the same call, the fallback signal's stop,
//     anything later). The tracker reads the events up to a stop with
//     TryNext: every call that completed before the stop has its record
//     committed in the ring.
//  2. A complete event's bytes are the range's contents at one moment in
//     [Time, Done], and the thread that made the call did not run between
//     its call and that moment. MMSeq, the process's mmap_lock write
//     sequence, was even at Time (no thread held the lock for writing) and
//     unchanged at Done (none took it meanwhile), else the event fell back
//     with ReasonRaced: no other thread's mmap, mprotect, mremap, brk or
//     munmap changed the mappings during the copy. What changes pages
//     under the read lock (madvise's MADV_DONTNEED kind, munmap's zapping
//     after it downgrades the lock) can only take pages away during the
//     copy (the copy then falls back, page not present) or, for madvise,
//     leave some pages already emptied, as they were in memory at that
//     moment; that call's own event follows.
//  3. Across threads, Time orders the copies, not the calls' effects: a
//     call took effect before its Time, but another thread's call that
//     exits later may have taken effect earlier. MMSeq bounds the effect:
//     a call's change is among the first MMSeq/2 write sections of the
//     process. With 2, the copy of an exec-adding call saw every change
//     made before its Time and none after.
//  4. Memory that is writable and executable (RWX) can change without a
//     call: its bytes are exact only at the moment of the copy, and the
//     tracker's W^X handling stays in charge of it.
//
// # For the tracker
//
//   - Open once per recording (Available first for --events=auto); Add
//     the launched process before it runs its first instruction (before
//     PTRACE_CONT after the exec stop), Add each new process at its
//     fork/vfork/clone event, before resuming it, and Remove it at its
//     exit. A thread needs nothing: the map is by tgid.
//   - Read with Next in a goroutine of its own, or with TryNext at each
//     ptrace stop (the locked tracer thread): TryNext never blocks.
//   - A fallback stop is a signal-delivery stop of Config.Signal with
//     si_code SI_KERNEL: copy the range of the call in the registers
//     (orig_rax the call, rdi and rsi its range, rdx the protection; for
//     mmap the range starts at rax, the result; RIP after the syscall),
//     then resume with signal 0. The matching event (FlagFallback) is in
//     the ring by then (invariant 1), unless Lost counted it.
//   - Add only processes ptjit traces: with no tracer to suppress it, the
//     default SIGSTOP stops the whole process until a SIGCONT.
//   - AddStopping (stop_linux_amd64.go) also stops the thread after every
//     successful RWX mmap, mprotect and pkey_mprotect (FlagStop), for a
//     tracer with no seccomp filter in the process (ptjit run -p).
//   - The seccomp filter must still stop what this package does not
//     report: 32-bit calls (int 0x80), process_vm_writev, the opens of
//     /proc/PID/mem, ptrace, execve's mappings (PTRACE_O_TRACEEXEC).
//   - Args[2] is the protection the kernel was given: when the seccomp
//     path rewrote it at entry (W^X), the event shows the rewritten value.
//
// # What it must not import
//
// Must not import: any ptjit package but internal/platform, clock.
// bpfev sits at the bottom of the recorder, beside the format and storage
// packages (internal/layers): it imports only internal/platform and clock
// (for the TSC conversion), and none of tracker, ptrun, db or snapshot.
// The tracker imports it; policy (what to do with an event, when to Add
// or Remove a process, how to act on a fallback stop) is the tracker's.
package bpfev

// Building for any platform but linux/amd64 fails in internal/platform.
import _ "github.com/ptjit/ptjit/internal/platform"
