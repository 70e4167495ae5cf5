/*
 * jit-threads — several threads compile and run code at the same time.
 *
 * NTHREADS threads start together (barrier) and each does ROUNDS rounds of:
 * map RW, generate f(x) = x*A + B copies, mprotect RX, call them, and on odd
 * rounds unmap again (so addresses are reused across threads). The manifest
 * lines come in syscall order (manifest.h locks around mprotect + log).
 * Prints one checksum per thread, in thread order.
 */
#include "jitlib.h"

#include <inttypes.h>

#define NTHREADS 4
#define ROUNDS 8

static pthread_barrier_t start;

struct job {
	int id;
	int64_t sum;
	int bad;
};

static void *worker(void *arg)
{
	struct job *jb = arg;
	pthread_barrier_wait(&start);
	for (int r = 0; r < ROUNDS; r++) {
		size_t pages = 1 + (size_t)((jb->id + r) % 3);
		int32_t a = jb->id + 2, b = r * 100;
		uint8_t *code = jit_affine(pages, a, b);
		for (size_t k = 0; k < pages * MF_PAGE / 64; k += 7) {
			int64_t got = ((affine_fn)(code + k * 64))(1000 + r);
			int64_t want = (int64_t)(1000 + r) * a + b + (int64_t)k;
			if (got != want)
				jb->bad++;
			jb->sum += got;
		}
		if (r % 2 == 1)
			mf_munmap(code, pages * MF_PAGE);
	}
	return NULL;
}

int main(void)
{
	pthread_t th[NTHREADS];
	struct job jobs[NTHREADS];
	pthread_barrier_init(&start, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		jobs[i] = (struct job){.id = i};
		if (pthread_create(&th[i], NULL, worker, &jobs[i]) != 0)
			mf_die("pthread_create failed");
	}
	int bad = 0;
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		printf("thread %d: %d rounds, checksum %" PRId64 ", %s\n", i, ROUNDS,
		       jobs[i].sum, jobs[i].bad ? "WRONG RESULTS" : "ok");
		bad += jobs[i].bad;
	}
	return bad ? 1 : 0;
}
