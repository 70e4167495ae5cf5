/*
 * alias-append: a JIT that appends functions to memory mapped twice (a
 * memfd with a writable view it writes and an executable view it runs), each
 * function starting on a fresh page, and runs each right after writing it:
 * the pattern of Erlang's BeamAsm loading one module after another. Under
 * W^X's batch mode for writable aliases, the pages opened for one burst
 * that it left unwritten stay open for the next (tracker:
 * aliasSettleFile), so a function costs one stop (its first run), not
 * two.
 *
 *   alias-append N PAGES [mprotect]
 *
 * N functions of PAGES pages each: function k is "mov eax, k; ret" then
 * bytes that depend on k up to its last page's end, written through the
 * writable view, logged ("write", at the executable view: the bytes that
 * will run there), then called there (it must return k). Prints "sum S".
 * With mprotect, the program makes its whole executable view
 * PROT_READ|PROT_EXEC again (mprotect) before each call, as some JITs do
 * after writing: the twins W^X holds non-executable while their alias
 * pages are written become executable there (tracker: aliasSettleExec).
 */
#define _GNU_SOURCE
#include "manifest.h"

#include <sys/mman.h>

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 4 && strcmp(argv[3], "mprotect") == 0))
		mf_die("usage: alias-append N PAGES [mprotect]");
	int reprotect = argc == 4;
	long n = atol(argv[1]), pages = atol(argv[2]);
	if (n < 1 || pages < 1 || n * pages > 4096)
		mf_die("N %ld PAGES %ld: want N*PAGES from 1 to 4096", n, pages);
	size_t size = (size_t)(n * pages) * MF_PAGE;
	int fd = memfd_create("alias-append", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		mf_die("memfd: %s", strerror(errno));
	uint8_t *rw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	uint8_t *rx = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED)
		mf_die("mmap: %s", strerror(errno));
	long sum = 0;
	for (long k = 0; k < n; k++) {
		size_t at = (size_t)(k * pages) * MF_PAGE, len = (size_t)pages * MF_PAGE;
		uint8_t *w = rw + at;
		w[0] = 0xb8; /* mov eax, imm32 */
		int32_t v = (int32_t)k;
		memcpy(w + 1, &v, 4);
		w[5] = 0xc3; /* ret */
		for (size_t j = 6; j < len; j++)
			w[j] = (uint8_t)(k * 31 + j * 7);
		mf_lock();
		mf_log(rx + at, len, "write");
		mf_unlock();
		if (reprotect && mprotect(rx, size, PROT_READ | PROT_EXEC) != 0)
			mf_die("mprotect: %s", strerror(errno));
		long r = ((long (*)(void))(rx + at))();
		if (r != k)
			mf_die("function %ld returned %ld", k, r);
		sum += r;
	}
	printf("sum %ld\n", sum);
	return 0;
}
