/*
 * perfmap-exit — a JIT whose perf map reaches the file only at exit, after
 * its code's last version ended, as mono --jitmap's does (mono writes its
 * map through stdio without flushing, and frees its code before exit
 * flushes the buffer).
 *
 * It opens /tmp/perf-PID.map fully buffered (nothing is written before
 * exit), maps a page RW, and 4 times: makes the page RW, emits jit_fnK
 * (x*(K+2) + K) at +64*K, makes it RX (a new version of the page), names
 * it in the map (buffered) and calls jit_fn0 .. jit_fnK 3 times each. Then
 * it unmaps the page (its last version ends) and returns: exit flushes the
 * map. An atexit handler removes the file first (unless
 * $PTJIT_KEEP_PERFMAP is set), so the lines reach only a file descriptor
 * opened before: ptjit's. It prints "calls jit_fnK N" for each function
 * (N: how often it ran). Manifest: 4 × mprotect, one page.
 */
#include "jitlib.h"

#include <inttypes.h>

static char path[64];

static void unlink_map(void)
{
	if (!getenv("PTJIT_KEEP_PERFMAP"))
		unlink(path);
}

int main(void)
{
	enum { FNS = 4, ROUNDS = 3 };
	snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
	atexit(unlink_map); /* runs before exit flushes stdio */
	FILE *perfmap = fopen(path, "w");
	if (!perfmap)
		mf_die("%s: %s", path, strerror(errno));
	static char buf[1 << 16];
	setvbuf(perfmap, buf, _IOFBF, sizeof buf);

	uint8_t *p = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	int calls[FNS] = {0};
	for (int k = 0; k < FNS; k++) {
		if (k > 0)
			mprotect(p, MF_PAGE, PROT_READ | PROT_WRITE);
		size_t n = emit_affine(p + 64 * k, k + 2, k);
		mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC);
		fprintf(perfmap, "%" PRIxPTR " %zx jit_fn%d\n", (uintptr_t)(p + 64 * k), n, k);
		for (int r = 0; r < ROUNDS; r++) {
			for (int j = 0; j <= k; j++) {
				int64_t got = ((affine_fn)(void *)(p + 64 * j))(r);
				if (got != (int64_t)r * (j + 2) + j)
					mf_die("jit_fn%d(%d) = %" PRId64, j, r, got);
				calls[j]++;
			}
		}
	}
	mf_munmap(p, MF_PAGE);
	for (int k = 0; k < FNS; k++)
		printf("calls jit_fn%d %d\n", k, calls[k]);
	return 0; /* exit writes the map */
}
