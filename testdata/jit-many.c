/*
 * jit-many THREADS — many threads each JIT one page at the same time, while
 * the main thread moves the program break.
 *
 * THREADS threads (default 1000, small stacks) start together (barrier);
 * each maps one page RW, writes f(x) = x*A + B copies into it, mprotects it
 * RX, calls it and keeps it (the pages stay mapped, so every address is
 * one thread's). The mprotect is not under the manifest lock, so several
 * threads' mprotects are in flight at once, and the kernel merges their
 * adjacent pages into one mapping in /proc/PID/maps. Meanwhile the main
 * thread grows and shrinks the break (sbrk) every millisecond until every
 * worker is done: brk calls a recorder stops while other threads'
 * mprotects are in flight.
 *
 * Manifest: one "mprotect" line per page with the worker's tid. Only the
 * line is written under the lock, not the syscall, so lines are not in
 * syscall order: compare them by address. Prints one checksum line.
 */
#include "jitlib.h"

#include <inttypes.h>

static pthread_barrier_t start;
static int done;

struct job {
	int id;
	int64_t sum;
	int bad;
};

static void *worker(void *arg)
{
	struct job *jb = arg;
	int32_t a = jb->id % 1000 + 2, b = jb->id;
	pthread_barrier_wait(&start);
	uint8_t *p = mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		mf_die("mmap: %s", strerror(errno));
	for (size_t off = 0; off + 64 <= MF_PAGE; off += 64)
		emit_affine(p + off, a, b + (int32_t)(off / 64));
	if (mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC) != 0)
		mf_die("mprotect: %s", strerror(errno));
	mf_lock();
	mf_log(p, MF_PAGE, "mprotect");
	mf_unlock();
	for (int k = 0; k < 64; k += 9) {
		int64_t got = ((affine_fn)(p + k * 64))(1000);
		if (got != 1000 * (int64_t)a + b + k)
			jb->bad++;
		jb->sum += got;
	}
	__atomic_add_fetch(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000;
	if (n < 1)
		mf_die("usage: jit-many [THREADS]");
	pthread_t *th = calloc((size_t)n, sizeof *th);
	struct job *jobs = calloc((size_t)n, sizeof *jobs);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	pthread_barrier_init(&start, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct job){.id = i};
		if (pthread_create(&th[i], &attr, worker, &jobs[i]) != 0)
			mf_die("pthread_create %d failed", i);
	}
	pthread_barrier_wait(&start);
	while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) < n) {
		if (sbrk(MF_PAGE) == (void *)-1 || sbrk(-(intptr_t)MF_PAGE) == (void *)-1)
			mf_die("sbrk: %s", strerror(errno));
		usleep(1000);
	}
	int64_t sum = 0;
	int bad = 0;
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		sum += jobs[i].sum;
		bad += jobs[i].bad;
	}
	printf("%d threads, checksum %" PRId64 ", %s\n", n, sum, bad ? "WRONG RESULTS" : "ok");
	return bad ? 1 : 0;
}
