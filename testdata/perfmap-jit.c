/*
 * perfmap-jit — a JIT that names its code in a perf map, as uBPF, node
 * (--perf-basic-prof) and HotSpot do, and reuses addresses for other
 * functions.
 *
 * It appends "START SIZE NAME" lines to /tmp/perf-PID.map (one fflush per
 * line, like V8's line-buffered map) and:
 *   1. maps a page RW, emits jit_add7 (x+7) at +0 and jit_mul3 (x*3) at
 *      +64, makes it RX, names both, calls each;
 *   2. makes it RW, emits jit_sub5 (x-5) at +0 (+64 untouched), RX, names
 *      +0 again, calls +0 then +64 (still jit_mul3: its bytes did not
 *      change);
 *   3. unmaps the page and maps one at the same address, emits jit_neg
 *      (-x) at +0, RX, names it, calls it.
 * For every call it prints "call NAME 0xADDR RESULT" on stdout, in order:
 * the names that were valid when each function ran. The perf map is
 * removed at exit unless $PTJIT_KEEP_PERFMAP is set. Manifest: 3 ×
 * mprotect, one page.
 */
#include "jitlib.h"

#include <inttypes.h>

static FILE *perfmap;

static void name(uint8_t *p, size_t size, const char *fn)
{
	fprintf(perfmap, "%" PRIxPTR " %zx %s\n", (uintptr_t)p, size, fn);
	fflush(perfmap);
}

static void call(uint8_t *p, const char *fn, int64_t x, int64_t want)
{
	int64_t got = ((affine_fn)(void *)p)(x);
	printf("call %s 0x%" PRIxPTR " %" PRId64 "\n", fn, (uintptr_t)p, got);
	if (got != want)
		mf_die("%s(%" PRId64 ") = %" PRId64 ", want %" PRId64, fn, x, got, want);
}

int main(void)
{
	char path[64];
	snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
	perfmap = fopen(path, "w");
	if (!perfmap)
		mf_die("%s: %s", path, strerror(errno));
	setvbuf(stdout, NULL, _IOLBF, 0);

	uint8_t *p = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	size_t n = emit_affine(p, 1, 7);
	emit_affine(p + 64, 3, 0);
	mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC);
	name(p, n, "jit_add7");
	name(p + 64, n, "jit_mul3");
	call(p, "jit_add7", 5, 12);
	call(p + 64, "jit_mul3", 5, 15);

	mprotect(p, MF_PAGE, PROT_READ | PROT_WRITE);
	emit_affine(p, 1, -5);
	mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC);
	name(p, n, "jit_sub5");
	call(p, "jit_sub5", 5, 0);
	call(p + 64, "jit_mul3", 6, 18);

	mf_munmap(p, MF_PAGE);
	uint8_t *q = mf_mmap(p, MF_PAGE, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE);
	if (q != p)
		mf_die("remap at %p gave %p", (void *)p, (void *)q);
	emit_affine(q, -1, 0);
	mf_mprotect(q, MF_PAGE, PROT_READ | PROT_EXEC);
	name(q, n, "jit_neg");
	call(q, "jit_neg", 5, -5);

	fclose(perfmap);
	if (!getenv("PTJIT_KEEP_PERFMAP"))
		unlink(path);
	return 0;
}
