/*
 * stopbench — the cost of a seccomp ptrace stop, for the benchmark harness.
 *
 * The workload: ITERS times, make a PAGES-page region RW, write 8 bytes into
 * every page (so every version differs), make it RX again: 2 mprotect calls
 * per iteration, one manifest line per RX.
 *
 *   stopbench run ITERS PAGES [shared]
 *       the workload alone (run it natively or under ptjit run); with
 *       "shared", a file is mapped shared and writable first, away from the
 *       region (as java maps its hsperfdata file), and written once per
 *       iteration;
 *   stopbench trace same|any entry|exit ITERS PAGES
 *       the workload under a minimal tracer: a seccomp filter that returns
 *       SECCOMP_RET_TRACE for mprotect only, and a ptrace loop that does
 *       nothing but continue (entry), or also steps to the syscall-exit stop
 *       with PTRACE_SYSCALL as a recorder must to see the result (exit).
 *       "same" pins tracer and tracee to CPU 0, "any" leaves them free.
 *
 * Prints "workload: CALLS mprotect calls in NS ns" (measured inside the
 * workload) and, when tracing, "tracer: STOPS stops".
 */
#include "manifest.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void workload(long iters, long pages, int shared)
{
	size_t len = (size_t)pages * MF_PAGE;
	volatile long *counter = NULL;
	if (shared) {
		int fd = memfd_create("stopbench-shared", 0);
		if (fd < 0 || ftruncate(fd, 8 * MF_PAGE) != 0)
			mf_die("memfd: %s", strerror(errno));
		void *m = mmap(NULL, 8 * MF_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m == MAP_FAILED)
			mf_die("mmap shared: %s", strerror(errno));
		close(fd);
		counter = m;
	}
	uint8_t *p = mf_mmap(NULL, len, PROT_READ | PROT_WRITE, 0);
	for (size_t off = 0; off < len; off += MF_PAGE)
		p[off] = 0xc3; /* ret */
	int64_t t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		mf_mprotect(p, len, PROT_READ | PROT_WRITE);
		for (size_t off = 8; off < len; off += MF_PAGE)
			memcpy(p + off, &i, sizeof i);
		mf_mprotect(p, len, PROT_READ | PROT_EXEC);
		if (counter)
			(*counter)++;
	}
	int64_t t1 = now_ns();
	printf("workload: %ld mprotect calls in %lld ns\n", 2 * iters, (long long)(t1 - t0));
	fflush(stdout);
}

static void pin_cpu0(void)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (sched_setaffinity(0, sizeof set, &set) != 0)
		mf_die("sched_setaffinity: %s", strerror(errno));
}

static void install_filter(void)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRACE),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		mf_die("PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0)
		mf_die("seccomp: %s", strerror(errno));
}

static int trace(int same_cpu, int to_exit, long iters, long pages)
{
	if (same_cpu)
		pin_cpu0(); /* inherited by the child */
	pid_t pid = fork();
	if (pid < 0)
		mf_die("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
			mf_die("PTRACE_TRACEME: %s", strerror(errno));
		raise(SIGSTOP);
		install_filter();
		workload(iters, pages, 0);
		_exit(0);
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFSTOPPED(st))
		mf_die("tracee did not stop");
	if (ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESECCOMP | PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL) != 0)
		mf_die("PTRACE_SETOPTIONS: %s", strerror(errno));
	long stops = 0;
	int req = PTRACE_CONT, sig = 0;
	for (;;) {
		if (ptrace(req, pid, 0, sig) != 0)
			mf_die("ptrace resume: %s", strerror(errno));
		if (waitpid(pid, &st, 0) != pid)
			mf_die("waitpid: %s", strerror(errno));
		if (WIFEXITED(st) || WIFSIGNALED(st))
			break;
		sig = 0;
		req = PTRACE_CONT;
		if (st >> 8 == (SIGTRAP | PTRACE_EVENT_SECCOMP << 8)) {
			stops++;
			if (to_exit)
				req = PTRACE_SYSCALL;
		} else if (WSTOPSIG(st) == (SIGTRAP | 0x80)) {
			stops++; /* syscall-exit stop */
		} else {
			sig = WSTOPSIG(st);
		}
	}
	printf("tracer: %ld stops\n", stops);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if ((argc == 4 || (argc == 5 && strcmp(argv[4], "shared") == 0)) && strcmp(argv[1], "run") == 0) {
		long iters = atol(argv[2]), pages = atol(argv[3]);
		if (iters > 0 && pages > 0) {
			workload(iters, pages, argc == 5);
			return 0;
		}
	}
	if (argc == 6 && strcmp(argv[1], "trace") == 0) {
		int same = strcmp(argv[2], "same") == 0, exit_stop = strcmp(argv[3], "exit") == 0;
		long iters = atol(argv[4]), pages = atol(argv[5]);
		if ((same || strcmp(argv[2], "any") == 0) && (exit_stop || strcmp(argv[3], "entry") == 0) &&
		    iters > 0 && pages > 0)
			return trace(same, exit_stop, iters, pages);
	}
	fprintf(stderr, "usage: stopbench run ITERS PAGES [shared]\n"
			"       stopbench trace same|any entry|exit ITERS PAGES\n");
	return 2;
}
