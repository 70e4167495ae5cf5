/*
 * stepbench: the reference for soft-PT speed. "stepbench N" runs a loop of
 * N iterations (a handful of instructions each, with a conditional branch
 * and a call) and exits. "stepbench --trace N" runs the same program as a
 * child under a minimal tracer of its own that single-steps it to the end
 * with PTRACE_SINGLESTEP and nothing else, and prints
 *   steps: S in T ns
 * — the bare single-step rate ptjit's soft-PT backend is compared with.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

__attribute__((noinline)) static unsigned long mix(unsigned long x) {
	return x * 2654435761u + 7;
}

static void work(long n) {
	unsigned long acc = 0;
	for (long i = 0; i < n; i++) {
		if (i & 1)
			acc = mix(acc);
		else
			acc ^= (unsigned long)i;
	}
	sink = acc;
}

static long long now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "--trace") == 0) {
		long n = atol(argv[2]);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			ptrace(PTRACE_TRACEME, 0, 0, 0);
			raise(SIGSTOP);
			work(n);
			_exit(0);
		}
		int st;
		waitpid(pid, &st, 0); /* the SIGSTOP */
		long long t0 = now_ns();
		long steps = 0;
		for (;;) {
			if (ptrace(PTRACE_SINGLESTEP, pid, 0, 0) != 0) {
				perror("PTRACE_SINGLESTEP");
				return 1;
			}
			if (waitpid(pid, &st, 0) < 0) {
				perror("waitpid");
				return 1;
			}
			if (WIFEXITED(st) || WIFSIGNALED(st))
				break;
			steps++;
		}
		printf("steps: %ld in %lld ns\n", steps, now_ns() - t0);
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "usage: stepbench N | stepbench --trace N\n");
		return 2;
	}
	work(atol(argv[1]));
	return 0;
}
