/*
 * xthread-patch: one thread writes code, another runs it, in lock step.
 * The writer stores "mov eax, 1000+r; ret" at slot r (page r % 8, offset
 * (r * 16) % 256 of an 8-page RWX mapping) and publishes r; the runner
 * waits for it, calls the slot and hands the turn back. The runner's call
 * is a direct call: it has no branch packet between the writer's store
 * and the new code, so its decoder must learn of the change from timing.
 *
 *   xthread-patch ROUNDS   prints "sum S" (S = sum of 1000+r)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef int (*fn_t)(void);
static atomic_int ready;
static unsigned char *code;
static int rounds;

static unsigned char *slot(int r) { return code + (r % 8) * 4096 + (r * 16) % 256; }

static void *writer(void *arg) {
	(void)arg;
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(&ready) != 0)
			;
		int v = 1000 + r;
		unsigned char *p = slot(r);
		p[0] = 0xb8;
		memcpy(p + 1, &v, 4);
		p[5] = 0xc3;
		atomic_store(&ready, r + 1);
	}
	return NULL;
}

static void *runner(void *arg) {
	long *sum = arg;
	for (int r = 0; r < rounds; r++) {
		while (atomic_load(&ready) == 0)
			;
		*sum += ((fn_t)slot(r))();
		atomic_store(&ready, 0);
	}
	return NULL;
}

int main(int argc, char **argv) {
	rounds = argc > 1 ? atoi(argv[1]) : 100;
	code = mmap(NULL, 8 * 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (code == MAP_FAILED)
		return 1;
	long sum = 0;
	pthread_t a, b;
	pthread_create(&b, NULL, runner, &sum);
	pthread_create(&a, NULL, writer, NULL);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	printf("sum %ld\n", sum);
	return 0;
}
