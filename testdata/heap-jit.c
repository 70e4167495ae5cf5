/*
 * heap-jit [ROUNDS] — code in the heap, the break moved around it: what a
 * recorder must see of brk.
 *
 * It maps one anonymous JIT page elsewhere first (so the process has
 * anonymous code outside the heap), then grows the heap with sbrk, writes
 * "mov eax, 42; ret" into a page-aligned heap page H and makes H
 * executable (mprotect), and calls it. Then ROUNDS (default 50) times it
 * grows the heap by a page above H and shrinks it back (sbrk +/-): those
 * brk calls leave H alone. Then brk(H) shrinks the heap under H, unmapping
 * the code. Then it reserves ROUNDS pages (PROT_NONE) and commits each
 * with a MAP_FIXED read-write mmap, as a runtime's heap does: those leave
 * all code alone; and a MAP_FIXED read-write mmap over the first JIT page
 * replaces that code. Last it maps one more JIT page ("mov eax, 7; ret"),
 * calls it, and exits.
 *
 * A recorder must end H's version at the brk that unmapped it, and the
 * first page's at the mmap that replaced it: both before the last page's
 * version begins. Manifest: three "mprotect" lines (the first JIT page,
 * H, the last page). Prints "heap code 42, after 7".
 */
#include "manifest.h"

typedef int (*int_fn)(void);

static void emit_ret(uint8_t *p, uint32_t v)
{
	p[0] = 0xb8; /* mov eax, imm32 */
	memcpy(p + 1, &v, 4);
	p[5] = 0xc3; /* ret */
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 50;
	uint8_t *jit = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	emit_ret(jit, 1);
	mf_mprotect(jit, MF_PAGE, PROT_READ | PROT_EXEC);
	if (((int_fn)(void *)jit)() != 1)
		mf_die("first JIT page");

	uint8_t *cur = sbrk(0);
	if (cur == (void *)-1)
		mf_die("sbrk(0): %s", strerror(errno));
	uint8_t *h = (uint8_t *)mf_page_up((uintptr_t)cur);
	if (sbrk((h - cur) + MF_PAGE) == (void *)-1)
		mf_die("sbrk: %s", strerror(errno));
	emit_ret(h, 42);
	mf_mprotect(h, MF_PAGE, PROT_READ | PROT_EXEC);
	int got = ((int_fn)(void *)h)();
	if (got != 42)
		mf_die("heap code returned %d", got);
	for (long i = 0; i < rounds; i++) {
		if (sbrk(MF_PAGE) == (void *)-1 || sbrk(-(intptr_t)MF_PAGE) == (void *)-1)
			mf_die("sbrk: %s", strerror(errno));
		if (((int_fn)(void *)h)() != 42)
			mf_die("heap code changed at round %ld", i);
	}
	if (brk(h) != 0) /* the code page is gone */
		mf_die("brk: %s", strerror(errno));

	uint8_t *res = mmap(NULL, (size_t)rounds * MF_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (res == MAP_FAILED)
		mf_die("mmap reservation: %s", strerror(errno));
	for (long i = 0; i < rounds; i++) {
		uint8_t *pg = res + i * MF_PAGE;
		if (mmap(pg, MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != pg)
			mf_die("mmap commit: %s", strerror(errno));
		pg[0] = 1;
	}
	if (mmap(jit, MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != jit)
		mf_die("mmap over the first JIT page: %s", strerror(errno));

	uint8_t *last = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	emit_ret(last, 7);
	mf_lock();
	if (mprotect(last, MF_PAGE, PROT_READ | PROT_EXEC) != 0)
		mf_die("mprotect: %s", strerror(errno));
	mf_log(last, MF_PAGE, "mprotect");
	mf_unlock();
	int after = ((int_fn)(void *)last)();
	printf("heap code %d, after %d\n", got, after);
	return 0;
}
