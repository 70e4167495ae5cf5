/*
 * wxbench N: N 8-byte stores into an RWX page (one page, same address),
 * each on its own; prints the time per store measured inside the program.
 * wxbench N mprotect: N RW→RX cycles of one page (2 mprotect calls each,
 * each a seccomp stop and a syscall-exit stop under ptjit); prints the
 * time per mprotect call.
 * Under ptjit --wx=precise every store is a fault stop plus an emulation;
 * the benchmark (BenchmarkWXPrecise) compares that with a bare fault.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 1000;
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
