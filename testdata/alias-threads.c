/*
 * alias-threads: a JIT that packs functions of different lengths back to
 * back into memory mapped twice (a memfd's writable view, written; its
 * executable view, run) while a second thread keeps calling the functions
 * published so far: the writer's bursts and runs toggle the very pages
 * the caller runs. Under W^X's batch mode the caller's fetch faults come
 * while those pages are being written and are stale by the time ptjit
 * sees them, the same fault (the same RIP, the same page) again and again
 * (tracker: threadWX.staleAgain); alone and under ptjit it must print the same.
 *
 *   alias-threads N
 *
 * N functions ("mov eax, k; ret" then bytes up to 30 + (53k mod 500)),
 * each called once by the writer after it is written and published to
 * the caller; then every function once more. Prints "sum S" (the
 * writer's calls only).
 */
#define _GNU_SOURCE
#include "manifest.h"

#include <sys/mman.h>

#define MAXF 1000

static uint8_t *rx;
static size_t offs[MAXF];
static int published;
static volatile int done;

static long call(int k)
{
	long r = ((long (*)(void))(rx + offs[k]))();
	if (r != k)
		mf_die("function %d returned %ld", k, r);
	return r;
}

static void *caller(void *arg)
{
	(void)arg;
	for (unsigned it = 0; !done; it++) {
		int n = __atomic_load_n(&published, __ATOMIC_ACQUIRE);
		if (n > 0)
			call((int)(it % (unsigned)n));
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2)
		mf_die("usage: alias-threads N");
	int n = atoi(argv[1]);
	if (n < 1 || n > MAXF)
		mf_die("N %d: want 1 to %d", n, MAXF);
	size_t size = 160 * MF_PAGE;
	int fd = memfd_create("alias-threads", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		mf_die("memfd: %s", strerror(errno));
	uint8_t *rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	rx = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED)
		mf_die("mmap: %s", strerror(errno));
	pthread_t th;
	if (pthread_create(&th, NULL, caller, NULL) != 0)
		mf_die("pthread_create");
	long sum = 0;
	size_t off = 0;
	for (int k = 0; k < n; k++) {
		size_t len = 30 + (size_t)(k * 53) % 500;
		if (off + len > size)
			mf_die("out of room at function %d", k);
		uint8_t *w = rw + off;
		w[0] = 0xb8; /* mov eax, imm32 */
		int32_t v = k;
		memcpy(w + 1, &v, 4);
		w[5] = 0xc3; /* ret */
		for (size_t j = 6; j < len; j++)
			w[j] = (uint8_t)(k * 31 + j * 7);
		offs[k] = off;
		sum += call(k);
		__atomic_store_n(&published, k + 1, __ATOMIC_RELEASE);
		off += len;
	}
	done = 1;
	pthread_join(th, NULL);
	for (int k = 0; k < n; k++)
		sum += call(k);
	printf("sum %ld\n", sum);
	return 0;
}
