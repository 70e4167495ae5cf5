package main

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"github.com/ptjit/ptjit/bpfev"
	"github.com/ptjit/ptjit/ptrun"
	"github.com/ptjit/ptjit/tracker"
)

func init() {
	var (
		out, pin, wx, pt, gt, sf, sl, cp, ev, px string
		quiet                                    bool
		scpus, bpfPg, bpfCache, pid              int // hidden --bpf-budget and --bpf-cache, for tests and measurements
		dur                                      time.Duration
	)
	cmd := &cobra.Command{
		Use:   "run [-p PID [--duration D]] [-o DIR] [-q] [--pt=auto|intel|soft|off] [--wx=auto|precise|batch|off] [--pin=auto|on|off] [--proxy=auto|on|off] [--soft-filter=jit|off] [--soft-layout=per-thread|per-cpu] [--soft-cpus=N] [--copy=auto|changed|full] [--events=auto|bpf|seccomp] [--] PROGRAM [ARGS...]",
		Short: "Run a program and record every version of its executable memory",
		Long: `run starts PROGRAM under ptrace and records, in DIR/code.db, its processes and
threads, its file-backed executable mappings, and every version of its other
executable memory (JIT code, the vdso, patched code) with the time it became
valid and stopped being valid.

PROGRAM is found through $PATH like a shell does; its stdin, stdout, stderr,
environment and working directory are its own. ptjit exits with PROGRAM's
status (128+N when signal N killed it; 127 when it cannot be found, 126 when
it cannot be executed, or when it or a child execs a 32-bit program: ptjit
records 64-bit processes only, so it kills them all at that exec and says so
in one line). SIGINT, SIGTERM and SIGHUP reach PROGRAM once, as
without ptjit (a signal sent to ptjit alone is passed on to it); ptjit then
waits for it and completes the recording. A second one kills PROGRAM and ptjit
exits 128+N.

Memory the program maps writable and executable is kept executable-only
(--wx, default auto): ptjit catches each store, carries it out and records it
(precise: every store, with its bytes and instruction), or lets a page be
written until something executes there and then records the page (batch);
auto is precise, except for a page written in a burst (2 stores within 10 ms),
or by a store ptjit cannot emulate (AVX-512): that page goes batch. New
anonymous RWX memory holds no code yet, nor does reserved memory made RWX
before any of its pages was touched: under batch and auto it starts
writable, not executable, and each page is recorded when it first runs. A
thread's stack and control block, which the kernel writes (signal frames,
syscall output, its tid, its rseq area), stay writable in every mode until
code runs there; a page of its control block then stays writable, and later
changes to code in it are not seen.

--proxy: W^X's protection changes run in a task sharing the program's memory
(on), are injected into the stopped thread (off), or the cheaper (auto).

The Intel PT trace goes to DIR/perf.data (--pt): with intel, perf record
-e intel_pt//u traces the program from its exec on, every thread and child;
with soft, ptjit single-steps every thread and writes the packets a CPU
would, in perf's intel_pt layout (slow: one ptrace stop per instruction, but
exact, and on any x86-64 machine); auto uses intel when the CPU has Intel PT
and records no trace otherwise. With --pt=soft --soft-filter=jit, only JIT
code is stepped and traced, as an Intel PT address filter on the JIT regions
would trace it (TIP.PGE where execution enters JIT code, TIP.PGD where it
leaves); the rest of the program runs at full speed.

--soft-layout chooses the soft perf.data's layout. per-thread (the default)
writes one AUX queue per thread, as perf record --per-thread does; every
ptjit command reads it. per-cpu writes what perf record -e intel_pt//u
writes on hardware: one AUX queue per CPU shared by the threads and
processes that ran there, told apart by context-switch records (ptjit
decode splits it per thread by those records; perf script reads it too).
Each thread is placed, at each step,
on the CPU it really ran on (/proc/TID/stat; all on one CPU when --pin
pins the program), or with --soft-cpus=N on N virtual CPUs by a
deterministic rule that makes threads share CPUs and migrate.

--copy=changed reads a JIT range's later versions from the pages written
since the previous one (a userfaultfd write-protects the range; Linux 6.7+;
where it cannot run, versions are read whole); full reads every version
whole; auto (default) is changed for ranges of 1 MiB or more. The summary
says which mode ran.

-p PID attaches to a running process instead, records its code as it is and
every version it makes until --duration, SIGINT, SIGTERM, SIGHUP (not SIGKILL:
a killed ptjit cannot undo W^X) or its end, then detaches, leaving it as if
never traced. It needs BPF events (--events auto or bpf); W^X applies from the
attach. --pt=soft traces the attached threads; --pt=intel (auto with Intel PT)
runs perf record -p PID once the code is recorded, the attach done when perf
has enabled its events, and stops perf before the threads are released.

An existing recording in DIR is replaced; a DIR holding anything else is
refused.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !cmd.Flags().Changed("pid") { // -p with a PROGRAM: ptrun says so
				return &exitError{Code: 2, Err: errors.New("run: no PROGRAM given (usage: ptjit run [flags] [--] PROGRAM [ARGS...])")}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := ptrun.Config{Attach: pid, Duration: dur, OutDir: out, Argv: args, Quiet: quiet, GroundTruth: gt, SoftCPUs: scpus,
				Events: tracker.EventsMode(ev), BPF: bpfev.Config{BudgetPages: bpfPg, CachePages: bpfCache}}
			f := ptrun.Flags{Pin: pin, WX: wx, PT: pt, SoftFilter: sf, SoftLayout: sl, Copy: cp, Proxy: px,
				SoftLayoutGiven: cmd.Flags().Changed("soft-layout"), PIDGiven: cmd.Flags().Changed("pid")}
			if err := f.Parse(&cfg); err != nil {
				return &exitError{Code: 2, Err: err} // a bad flag value: nothing run
			}
			status, err := ptrun.Run(cfg)
			var ke *ptrun.KilledError
			if err != nil && errors.As(err, &ke) && quiet {
				err = nil // -q: the status says it
			}
			if err == nil && status == 0 {
				return nil
			}
			return &exitError{Code: status, Err: err}
		},
	}
	cmd.Flags().SetInterspersed(false) // PROGRAM's own flags are its own
	cmd.Flags().StringVarP(&out, "output", "o", "ptjit.out", "recording directory")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "no summary or warnings on stderr")
	cmd.Flags().StringVar(&pin, "pin", "auto", "pin tracer and program to one CPU: auto, on or off")
	cmd.Flags().StringVar(&px, "proxy", "auto", "run W^X's protection changes in a proxy task sharing the program's memory: auto (the cheaper of it and injection), on or off")
	cmd.Flags().StringVar(&wx, "wx", "auto", "W^X write tracking of writable+executable code: off, precise, batch or auto")
	cmd.Flags().StringVar(&pt, "pt", "auto", "Intel PT trace into DIR/perf.data: intel (perf record), soft (ptjit single-steps the program), off, or auto (intel when available, else off)")
	cmd.Flags().StringVar(&gt, "ground-truth", "", "with --pt=soft: write every executed instruction (\"TID 0xIP\" per line) to this file")
	cmd.Flags().StringVar(&sf, "soft-filter", "off", "with --pt=soft: jit steps and traces only JIT code (an IP filter on the JIT regions), off traces everything")
	cmd.Flags().StringVar(&sl, "soft-layout", "per-thread", "with --pt=soft: perf.data layout, per-thread (one AUX queue per thread) or per-cpu (one per CPU, with context-switch records, as perf record writes on hardware)")
	cmd.Flags().IntVar(&scpus, "soft-cpus", 0, "with --soft-layout=per-cpu: place threads on N virtual CPUs deterministically (0: on the CPUs they really ran on)")
	cmd.Flags().StringVar(&cp, "copy", "auto", "how later versions of a JIT range are read: changed (only pages written since the last version), full, or auto (changed for ranges of 1 MiB or more)")
	cmd.Flags().StringVar(&ev, "events", "", "where the address-space calls come from: seccomp (the default without -p: a stop per call that adds code), bpf (an eBPF program copies the code in the kernel: no stop per version; root or CAP_BPF+CAP_PERFMON), or auto (bpf where it can run; the default with -p)")
	cmd.Flags().IntVar(&bpfPg, "bpf-budget", 0, "with BPF events: the most pages one call's copy may take (1..64; 0: 64)")
	cmd.Flags().MarkHidden("bpf-budget")
	cmd.Flags().IntVar(&bpfCache, "bpf-cache", 0, "with BPF events: the kernel's page cache, in pages (0: 4096; -1: none, every page is sent)")
	cmd.Flags().MarkHidden("bpf-cache")
	cmd.Flags().IntVarP(&pid, "pid", "p", 0, "attach to the running process PID instead of starting a program (needs BPF events; detaches at --duration, SIGINT, SIGTERM or SIGHUP)")
	cmd.Flags().DurationVar(&dur, "duration", 0, "with -p: detach after this long (e.g. 10s; 0: at SIGINT, SIGTERM or SIGHUP, or the process's end)")
	rootCmd.AddCommand(cmd)
}
