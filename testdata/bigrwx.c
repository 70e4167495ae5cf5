/*
 * bigrwx — one large RWX mapping, written page by page or in a few places.
 *
 *   bigrwx MIB          maps MIB MiB PROT_READ|PROT_WRITE|PROT_EXEC and stores
 *                       one byte (0xc3, ret) at the start of every page; prints
 *                       "pages N ns T" (T: the store loop alone, in ns)
 *   bigrwx MIB WRITES   maps the same, then patches WRITES pages spread over
 *                       the mapping ("mov eax, imm32; ret" with one aligned
 *                       8-byte store each), calls every patched function and
 *                       checks what it returns
 *   bigrwx MIB WRITES reserve
 *                       the same, but the memory is reserved PROT_NONE first
 *                       and then made RWX with mprotect, as qemu-user does
 *                       with its translation buffer
 *
 * Under a W^X recorder every store is a stop: the cost of one must not grow
 * with the size of the mapping, and a few scattered patches must leave a few
 * versions, not one per page (see cmd/ptjit-bench, row "bigrwx").
 *
 * Manifest: one "mmap" line for the whole mapping (zero pages; "mprotect" when
 * reserved first); with WRITES,
 * one "write" line per patch (its page). The page-per-page mode writes no
 * "write" lines.
 */
#include "manifest.h"

#include <time.h>

typedef int (*fn)(void);

static uint64_t code_word(int32_t imm)
{
	uint8_t b[8] = {0xb8, 0, 0, 0, 0, 0xc3, 0x90, 0x90}; /* mov eax, imm; ret; nop; nop */
	memcpy(b + 1, &imm, 4);
	uint64_t w;
	memcpy(&w, b, 8);
	return w;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4 || (argc == 4 && strcmp(argv[3], "reserve") != 0))
		mf_die("usage: bigrwx MIB [WRITES [reserve]]");
	size_t n = (size_t)atoi(argv[1]) << 20;
	long writes = argc >= 3 ? atol(argv[2]) : 0;
	size_t pages = n / MF_PAGE;
	if (n == 0 || writes < 0 || (size_t)writes > pages)
		mf_die("bigrwx: bad arguments");
	uint8_t *p;
	if (argc == 4) {
		p = mf_mmap(NULL, n, PROT_NONE, MAP_NORESERVE);
		mf_mprotect(p, n, PROT_READ | PROT_WRITE | PROT_EXEC);
	} else {
		p = mf_mmap(NULL, n, PROT_READ | PROT_WRITE | PROT_EXEC, 0);
	}
	if (writes == 0) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (size_t i = 0; i < n; i += MF_PAGE)
			((volatile uint8_t *)p)[i] = 0xc3;
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("pages %zu ns %ld\n", pages, (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec));
		return 0;
	}
	/* page k*pages/(writes+1) for k = 1..writes: none at either end */
	for (long k = 1; k <= writes; k++)
		mf_store8(p + (size_t)k * pages / (size_t)(writes + 1) * MF_PAGE, code_word((int32_t)k));
	long bad = 0;
	for (long k = 1; k <= writes; k++)
		if (((fn)(p + (size_t)k * pages / (size_t)(writes + 1) * MF_PAGE))() != k)
			bad++;
	printf("%ld patches in %zu pages: %s\n", writes, pages, bad ? "WRONG" : "ok");
	return bad != 0;
}
