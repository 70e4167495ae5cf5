/*
 * patch-imm N [VALUES] — one JIT function whose immediate is patched N
 * times in place, each patch a single 4-byte store, each version called
 * once: N executed code versions at one address, made by stores of 4
 * bytes (under --wx=precise each store is a version).
 *
 * The page is mapped RWX; the function is "mov eax, imm32; ret" at its
 * start. Patch i (1..N) stores value(i), a 32-bit pseudo-random number
 * (xorshift32 from a fixed seed), into the immediate with one store, then
 * calls the function and checks that it returned value(i).
 *
 * Manifest: one "mmap" line, one "write" line for the function's first
 * bytes (one 8-byte store), then one "write" line per patch (the page
 * hashed after the store; only when $PTJIT_MANIFEST is set). VALUES, when
 * given, receives the N values in patch order as little-endian 32-bit
 * words, written at the end with one write(2): the test's independent
 * record of what each version's immediate was. Prints one line at the
 * end: "patched N times, xor XOR".
 */
#include "manifest.h"

#include <inttypes.h>

typedef uint32_t (*imm_fn)(void);

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	if (n < 1) {
		fprintf(stderr, "usage: patch-imm N [VALUES]\n");
		return 2;
	}
	uint32_t *vals = malloc((size_t)n * sizeof *vals);
	if (!vals)
		mf_die("malloc: %s", strerror(errno));
	uint8_t *page = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, 0);
	/* mov eax, 0; ret, written with one 8-byte store (one "write" line) */
	mf_store8(page, 0x0000c300000000b8ULL);
	volatile uint32_t *imm = (volatile uint32_t *)(page + 1);
	imm_fn f = (imm_fn)(void *)page;
	int logged = getenv("PTJIT_MANIFEST") != NULL;
	uint32_t x = 0x9e3779b9, sum = 0;
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		*imm = x; /* one 4-byte store */
		if (logged)
			mf_log(page, MF_PAGE, "write");
		uint32_t got = f();
		if (got != x)
			mf_die("patch %ld: got %#x, want %#x", i + 1, got, x);
		vals[i] = x;
		sum ^= x;
	}
	if (argc > 2) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			mf_die("%s: %s", argv[2], strerror(errno));
		size_t len = (size_t)n * sizeof *vals;
		if (write(fd, vals, len) != (ssize_t)len)
			mf_die("%s: short write", argv[2]);
		close(fd);
	}
	printf("patched %ld times, xor %#" PRIx32 "\n", n, sum);
	return 0;
}
