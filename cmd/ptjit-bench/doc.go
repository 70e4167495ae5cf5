// Command ptjit-bench measures what ptjit costs and prints one table.
//
// Run it from the repository root after make (it uses bin/ptjit and the
// programs in testdata/bin):
//
//	go run ./cmd/ptjit-bench [-runs 5] [-rows REGEXP] [-v]
//
// Every row runs its workload several times in this one invocation and
// reports the median, next to a reference measured in the same invocation
// (the program alone, under strace, or under a bare seccomp tracer), the
// ratio, and the target the project set for it:
//
//   - ubpf-test compiling once and running its JIT code 10^6 times, under
//     ptjit run vs alone (no stops in the hot loop: expect ≈1×);
//   - LuaJIT compiling thousands of traces (testdata/bench.lua; LuaJIT makes
//     its machine-code area RW and RX again around every trace), under
//     ptjit run vs alone (target ≤ 1.3×) and vs strace --seccomp-bpf
//     tracing mprotect and mmap (target: faster);
//   - the cost of one stop: testdata/stopbench doing 2 mprotect calls per
//     iteration under ptjit run, against the same workload under
//     stopbench's own minimal tracer (seccomp RET_TRACE on mprotect, a
//     ptrace loop that only continues): ptjit's default against the bare
//     tracer on any CPU, ptjit --pin=on against the bare tracer on one CPU
//     (target: within 1.5×), and per mprotect call against the bare tracer
//     that also stops at syscall exit (what a recorder minimally needs to
//     see the result);
//   - snapshot throughput: stopbench on a 1 MiB region, bytes snapshotted per
//     second of extra run time;
//   - java (testdata/Hot.java) and node (testdata/hot.js) alone and under
//     ptjit run in each --wx mode (targets for the default: ≤ 2× and
//     ≤ 1.5×);
//   - alias-bulk: testdata/alias-jit filling 4 MiB through the writable
//     view of a memfd mapped twice and running each page, under ptjit run
//     vs the same fill into one RWX mapping under ptjit, alternating, with
//     both alone: time and the versions of the bulk fill (targets ≤ 2×);
//   - the runtime rows (runtime-sbcl, -qemu, -guile, -php, -erlang, -pypy,
//     -tcc, -lli; real runtimes): each runtime of testdata/runtimes on a
//     workload that keeps its JIT at work for 0.2–2 s alone (SBCL
//     compiling 200 functions, qemu-user running a static glibc program's
//     loop, Guile compiling 60 procedures and calling each past its JIT
//     threshold, PHP's tracing JIT on a hot loop, Erlang's boot and a
//     loop), alone and under ptjit run in the default mode, alternating,
//     medians, with the load before and after and the versions and MB
//     snapshotted per run, in wall time (targets: ≤ 1.5× for SBCL, qemu,
//     Guile, PHP and Erlang; ≤ 1.15× for the others) and in CPU time
//     (ptjit's includes the program's; steadier on a loaded machine). A run under ptjit that fails or
//     prints other than alone is the row's error: its exit status, the
//     signal it stands for, and what the program prints alone. Guile's
//     and qemu's rows (their code single-mapped RWX memory written in
//     bursts) also run the program under testdata/floor wx, the least
//     W^X (the same write and fetch faults and protection changes as
//     ptjit, an mprotect injected for each, a 4 KiB copy per fetch, and
//     nothing else), and under floor wxpoll (the same, polling for each
//     stop before it blocks, as ptjit's tracer does), in the same series:
//     floor / alone is what W^X costs on the machine at all, ptjit /
//     floor wxpoll what ptjit's own work adds;
//   - bigrwx: testdata/bigrwx storing one byte per page of a 512 MiB RWX
//     mapping (one W^X stop per page) under ptjit vs alone (target ≤ 10×),
//     µs per stop at 512 MiB vs 16 MiB (target ≤ 1.5×: a stop must not
//     cost more in a large mapping), and ptjit's own peak RSS (meta
//     tracer_maxrss_kb) vs the region (target ≤ 0.25×);
//   - the floor rows (floor-luajit, floor-java, floor-node, floor-ubpf-test):
//     each program alone, under testdata/floor trace (seccomp RET_TRACE on
//     mprotect/pkey_mprotect/mmap that add PROT_EXEC, one process_vm_readv
//     of the range per stop), under floor notif (the same with
//     SECCOMP_RET_USER_NOTIF, the listener passed at launch) and under
//     ptjit run, alternating, at least 7 runs, medians, with the load:
//     ptjit/alone, floor/alone, ptjit/floor (target for LuaJIT: ptjit ≤
//     1.1× the notif floor);
//   - copy: ptjit run --copy=full against --copy=changed, alternating
//     with the program alone: testdata/jit-pages (two pages
//     rewritten per version) with a 4 MiB, a 1 MiB and a 64 KiB region, and
//     LuaJIT bench.lua 2000; each mode's extra time over alone, their ratio
//     (target at 4 MiB: changed below full) and ptjit's own time in stops
//     in each mode (the numbers behind --copy=auto's threshold);
//   - soft PT: instructions recorded per second against stepbench's bare
//     PTRACE_SINGLESTEP loop (target ≥ 0.8×), trace bytes per instruction,
//     and ubpf-test with and without --soft-filter=jit;
//   - decoders: ptjit decode --stat on one core against libipt's block
//     decoder (target ≥ 1.5×) and perf script (≥ 2×) on a 20 MB synthetic
//     trace (-decode-copies 310: 200 MB), --calls against --stat (≤ 1.3×),
//     and -j 2 against libipt on one core (≥ 2.7×), CPU time;
//   - decoders-jit: ptjit decode --stat -j 1 against perf script of the
//     perf inject --jit export, on a soft-PT recording of jit-loop 12 50000
//     (13 code versions at one address; recorded once, minutes of
//     stepping), CPU time (target ≥ 2×);
//   - versions: testdata/patch-imm N and 10N (N = 2000; the function's
//     immediate patched by one 4-byte store, then called, each time: N
//     executed versions at one address) recorded under --pt=soft
//     --wx=precise --soft-filter=jit, then decode --stat of each,
//     alternating: CPU time and peak RSS at 10N against N (targets ≤ 12×
//     and ≤ 2×), and code.db's bytes per version (≤ 1 KiB);
//   - events: LuaJIT bench.lua 10000 and strings.lua 5000 (many small,
//     string-heavy traces) alone, under ptjit run --events=seccomp and
//     --events=bpf, alternating: bpf/alone (target ≤ 1.3×), bpf/seccomp
//     (≤ 0.5×) and the stops of each; events-runtimes: the same for
//     ubpf-test ×10^6 (≈1×), node hot.js (≤ 1.1× alone) and java Hot (no
//     worse than seccomp);
//   - kwrite-vec: testdata/kwrite readv 20000 (RWX code run once, then
//     one-byte readv calls from a pipe) alone, under ptjit run (every readv
//     stops: the kernel may copy into code W^X protects) and under
//     --wx=off (no such stop), with a minimal tracer's stop (stopbench
//     trace any entry) in the same series: µs per readv against µs per
//     stop.
//
// µs per stop comes from ptjit's summary line on stderr ("N stops, X ms in
// stops (Y µs/stop), Z MB snapshotted") when ptjit prints one; otherwise the
// harness divides the extra time by the number of mprotect calls and says
// so in the row. Rows are data (the rows slice in rows.go): a new row is a
// name, a target and a function returning a measurement.
//
// A row whose prerequisite is missing (luajit, strace, java, node, a
// runtime: the row names its Debian package) prints the error in
// its place, and the command exits 1 after the table.
//
// Must not import: any ptjit package but db, perf. It measures ptjit as a
// user runs it, through bin/ptjit, and reads only what a recording holds
// (code.db's meta table) and the perf.data the decoders row writes.
package main
