/*
 * wxbench N: N 8-byte stores into an RWX page (one page, same address),
 * each on its own; prints the time per store measured inside the program.
 * wxbench N mprotect: N RW→RX cycles of one page (2 mprotect calls each,
 * each a seccomp stop and a syscall-exit stop under ptjit); prints the
 * time per mprotect call.
 * wxbench N bare: the reference for a recorded store — a bare fault stop:
 * the same N stores into an executable, not writable page, under a minimal
 * tracer (this program, forked) that at each SIGSEGV stop moves RIP past
 * the 3-byte store and continues; prints the time per store.
 * Under ptjit --wx=precise every store is a fault stop plus an emulation;
 * the benchmark (BenchmarkWXPrecise) compares that with the bare fault.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* movq %rax, (%rdx): 48 89 02, three bytes (the bare tracer skips them) */
static inline void store3(volatile uint64_t *p, uint64_t v)
{
	__asm__ volatile("movq %0, (%1)" : : "a"(v), "d"(p) : "memory");
}

static int bare(long n)
{
	pid_t pid = fork();
	if (pid == 0) {
		ptrace(PTRACE_TRACEME, 0, 0, 0);
		raise(SIGSTOP);
		volatile uint64_t *p = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			_exit(1);
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (long i = 0; i < n; i++)
			store3(&p[i & 511], i);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
		printf("stores: %ld, %.2f us/store\n", n, ns / n / 1e3);
		fflush(stdout);
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) == pid) {
		if (WIFEXITED(st))
			return WEXITSTATUS(st);
		if (WIFSIGNALED(st))
			return 1;
		int sig = WSTOPSIG(st);
		if (sig == SIGSEGV) {
			struct user_regs_struct r;
			ptrace(PTRACE_GETREGS, pid, 0, &r);
			r.rip += 3;
			ptrace(PTRACE_SETREGS, pid, 0, &r);
			sig = 0;
		} else if (sig == SIGSTOP) {
			sig = 0;
		}
		ptrace(PTRACE_CONT, pid, 0, sig);
	}
	return 1;
}

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000;
	if (argc > 2 && strcmp(argv[2], "bare") == 0)
		return bare(n);
	volatile uint64_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	struct timespec a, b;
	int cycles = argc > 2 && strcmp(argv[2], "mprotect") == 0;
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < n; i++) {
		if (cycles) {
			mprotect((void *)p, 4096, PROT_READ | PROT_WRITE);
			p[i & 511] = i;
			mprotect((void *)p, 4096, PROT_READ | PROT_EXEC);
		} else {
			p[i & 511] = i;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
	if (cycles)
		printf("mprotect: %ld, %.2f us/call\n", 2 * n, ns / n / 2e3);
	else
		printf("stores: %ld, %.2f us/store\n", n, ns / n / 1e3);
	return 0;
}
