/*
 * jit-loop VERSIONS ITERS — one JIT function rewritten VERSIONS times at
 * the same address, each version run once over a loop of ITERS iterations
 * with a data-dependent branch: a long trace (about 7 × ITERS instructions
 * and ITERS × 2 conditional branches a version) through many code versions
 * at one address, for decoder benchmarks (ptjit-bench's decoders row).
 *
 * Version v is f(n) = sum over i = n..1 of (v*1000+7 + (i & 1)):
 *   xor eax,eax; mov rcx,rdi
 *   L: add rax,imm32; test cl,1; jz S; add rax,1; S: dec rcx; jnz L; ret
 * Each version's result is checked; prints one "sum" line at the end.
 * Manifest: VERSIONS × mprotect, one page.
 */
#include "manifest.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t (*loop_fn)(int64_t);

static void emit(uint8_t *p, int32_t k)
{
	static const uint8_t head[] = {0x31, 0xc0, 0x48, 0x89, 0xf9, 0x48, 0x05};
	static const uint8_t tail[] = {
		0xf6, 0xc1, 0x01,       /* test cl,1 */
		0x74, 0x04,             /* jz +4 */
		0x48, 0x83, 0xc0, 0x01, /* add rax,1 */
		0x48, 0xff, 0xc9,       /* dec rcx */
		0x75, 0xec,             /* jnz L (-20) */
		0xc3,                   /* ret */
	};
	memcpy(p, head, sizeof head);
	memcpy(p + sizeof head, &k, 4);
	memcpy(p + sizeof head + 4, tail, sizeof tail);
}

int main(int argc, char **argv)
{
	long versions = argc > 1 ? atol(argv[1]) : 12;
	long iters = argc > 2 ? atol(argv[2]) : 100000;
	if (versions < 1 || iters < 1) {
		fprintf(stderr, "usage: jit-loop VERSIONS ITERS\n");
		return 2;
	}
	uint8_t *page = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	int64_t total = 0;
	for (long v = 1; v <= versions; v++) {
		if (v > 1)
			mf_mprotect(page, MF_PAGE, PROT_READ | PROT_WRITE);
		int32_t k = (int32_t)(v * 1000 + 7);
		emit(page, k);
		mf_mprotect(page, MF_PAGE, PROT_READ | PROT_EXEC);
		int64_t got = ((loop_fn)(void *)page)(iters);
		int64_t want = iters * (int64_t)k + (iters + 1) / 2;
		if (got != want)
			mf_die("version %ld: f(%ld) = %" PRId64 ", want %" PRId64, v, iters, got, want);
		total += got;
	}
	printf("sum %" PRId64 "\n", total);
	return 0;
}
