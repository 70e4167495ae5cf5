/*
 * eof-map — a file mapped executable beyond its end, as ld.so maps a
 * library: one mapping of the whole span (text, data and bss) at the
 * file's offset 0, then the later segments mapped over it, so that for a
 * moment a piece of the first mapping lies past the end of the file.
 *
 * eof-map FILE gone: writes FILE (one page), maps 3 pages of it r-x, maps
 *   anonymous memory over page 1 and then page 2 (the piece past the
 *   file's end is gone), then runs JIT code (a function made with
 *   mmap/mprotect) and prints its result.
 * eof-map FILE live: the same, but page 2 (past the end) stays mapped
 *   while the JIT code runs, and is unmapped after.
 *
 * The file is left in place, for the decoder to read.
 */
#include "jitlib.h"

#include <fcntl.h>

int main(int argc, char **argv)
{
	if (argc != 3 || (strcmp(argv[2], "gone") != 0 && strcmp(argv[2], "live") != 0)) {
		fprintf(stderr, "usage: eof-map FILE gone|live\n");
		return 2;
	}
	int live = strcmp(argv[2], "live") == 0;
	int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) {
		perror(argv[1]);
		return 1;
	}
	static uint8_t page[MF_PAGE];
	memset(page, 0xc3, sizeof page); /* ret */
	if (write(fd, page, sizeof page) != (ssize_t)sizeof page) {
		perror("write");
		return 1;
	}
	uint8_t *lib = mmap(NULL, 3 * MF_PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
	if (lib == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	close(fd);
	int anon = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
	if (mmap(lib + MF_PAGE, MF_PAGE, PROT_READ | PROT_WRITE, anon, -1, 0) == MAP_FAILED ||
	    (!live && mmap(lib + 2 * MF_PAGE, MF_PAGE, PROT_READ | PROT_WRITE, anon, -1, 0) == MAP_FAILED)) {
		perror("mmap fixed");
		return 1;
	}
	affine_fn f = (affine_fn)jit_affine(1, 3, 7);
	printf("f(5) = %ld\n", (long)f(5));
	if (live)
		munmap(lib + 2 * MF_PAGE, MF_PAGE);
	return 0;
}
