/*
 * jit-storm — many threads JIT at once, through both ways code changes.
 *
 * jit-storm THREADS ROUNDS [SECONDS]
 *
 * THREADS threads (the main thread is one of them) start together
 * (barrier) and each does ROUNDS rounds of:
 *   - map a page RW, generate f(x) = x*A + B copies, mprotect RX, call them,
 *     and on odd rounds unmap it again (jit_affine);
 *   - rewrite its own RWX page (mapped once, PROT_READ|PROT_WRITE|PROT_EXEC)
 *     with byte and word stores — under W^X each is a fault that ptjit
 *     emulates or single-steps, or a batch flip — and call it; the main
 *     thread does this 32 times a round.
 * With SECONDS > 0 the rounds repeat until that many seconds have passed
 * (a workload to kill at a random moment). Prints one line with the number
 * of threads, rounds done and a checksum over all threads (deterministic
 * without SECONDS) and exits 0 when every call returned the right value.
 */
#include "jitlib.h"

#include <inttypes.h>
#include <time.h>

static pthread_barrier_t start;
static int rounds;
static double seconds;

struct job {
	int id;
	int64_t sum;
	int bad;
	int done;
};

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *worker(void *arg)
{
	struct job *jb = arg;
	/* its own RWX page: every store into it is one W^X fault */
	uint8_t *rwx = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, 0);
	pthread_barrier_wait(&start);
	double end = now() + seconds;
	do {
		for (int r = 0; r < rounds; r++) {
			int32_t a = jb->id % 7 + 2, b = r * 100;
			uint8_t *code = jit_affine(1, a, b);
			for (size_t k = 0; k < MF_PAGE / 64; k += 13) {
				int64_t got = ((affine_fn)(code + k * 64))(1000 + r);
				if (got != (int64_t)(1000 + r) * a + b + (int64_t)k)
					jb->bad++;
				jb->sum += got;
			}
			if (r % 2 == 1)
				mf_munmap(code, MF_PAGE);
			/* a few functions at different places of the RWX page;
			   the main thread patches more: under W^X most of
			   ptjit's injected syscalls are then in the leader */
			for (int j = 0; j < (jb->id == 0 ? 32 : 1); j++) {
				size_t off = (size_t)((jb->id + r + j) % 8) * 512;
				emit_affine(rwx + off, a + 1, b + 1 + j);
				int64_t got = ((affine_fn)(rwx + off))(r);
				if (got != (int64_t)r * (a + 1) + b + 1 + j)
					jb->bad++;
				jb->sum += got;
			}
			jb->done++;
		}
	} while (seconds > 0 && now() < end);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		mf_die("usage: jit-storm THREADS ROUNDS [SECONDS]");
	int n = atoi(argv[1]);
	rounds = atoi(argv[2]);
	seconds = argc > 3 ? atof(argv[3]) : 0;
	if (n < 1 || rounds < 1)
		mf_die("jit-storm: THREADS and ROUNDS must be at least 1");
	pthread_t *th = calloc((size_t)n, sizeof *th);
	struct job *jobs = calloc((size_t)n, sizeof *jobs);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 128 * 1024);
	pthread_barrier_init(&start, NULL, (unsigned)n);
	for (int i = 1; i < n; i++) {
		jobs[i].id = i;
		if (pthread_create(&th[i], &attr, worker, &jobs[i]) != 0)
			mf_die("pthread_create failed");
	}
	/* the main thread is worker 0: the leader JITs too (a tracer that
	   waits for the leader alone while the group dies never returns) */
	worker(&jobs[0]);
	int64_t sum = 0;
	int bad = 0, done = 0;
	for (int i = 0; i < n; i++) {
		if (i > 0)
			pthread_join(th[i], NULL);
		sum += jobs[i].sum;
		bad += jobs[i].bad;
		done += jobs[i].done;
	}
	if (seconds > 0)
		printf("%d threads: %s\n", n, bad ? "WRONG RESULTS" : "ok");
	else
		printf("%d threads, %d rounds: checksum %" PRId64 ", %s\n", n, done, sum,
		       bad ? "WRONG RESULTS" : "ok");
	return bad ? 1 : 0;
}
