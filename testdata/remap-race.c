/*
 * remap-race [ROUNDS] — one thread replaces its JIT code while another
 * moves the program break. The JIT thread, ROUNDS times (default 100):
 * maps a page read-write, writes "mov eax, i; ret", makes it executable,
 * calls it, maps a read-write page over it (MAP_FIXED), stores into that
 * page and unmaps it. The main thread meanwhile asks for the break and
 * grows and shrinks it by a page, until the JIT thread is done.
 *
 * A recorder syncing its view of memory at a brk must leave alone what
 * another thread's call in flight changes: the page mapped over the code
 * is read-write, and the store into it must work (under ptjit's soft
 * filter it died of SIGSEGV: the filter gave it the hidden code's
 * protection at the brk's exit stop). Prints "ok SUM" (the sum of what
 * the functions returned).
 */
#include "manifest.h"

static volatile int done;
static long rounds = 100;

static void *jit_thread(void *arg)
{
	(void)arg;
	long sum = 0;
	for (long i = 0; i < rounds; i++) {
		uint8_t *p = mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			mf_die("mmap: %s", strerror(errno));
		uint32_t v = (uint32_t)i;
		p[0] = 0xb8; /* mov eax, imm32; ret */
		memcpy(p + 1, &v, 4);
		p[5] = 0xc3;
		if (mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC) != 0)
			mf_die("mprotect: %s", strerror(errno));
		sum += ((int (*)(void))(void *)p)();
		if (mmap(p, MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != p)
			mf_die("mmap over the code: %s", strerror(errno));
		p[0] = 1; /* the page is read-write now */
		if (munmap(p, MF_PAGE) != 0)
			mf_die("munmap: %s", strerror(errno));
	}
	done = 1;
	return (void *)sum;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		rounds = atol(argv[1]);
	pthread_t t;
	if (pthread_create(&t, NULL, jit_thread, NULL) != 0)
		mf_die("pthread_create");
	while (!done) {
		uint8_t *b = (uint8_t *)syscall(SYS_brk, 0);
		syscall(SYS_brk, b + MF_PAGE);
		syscall(SYS_brk, b);
	}
	void *sum;
	pthread_join(t, &sum);
	printf("ok %ld\n", (long)sum);
	return 0;
}
