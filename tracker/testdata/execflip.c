/*
 * execflip N [rwx]: one page toggled RW → store → RX → call, N times (2N
 * mprotect calls, N of them adding PROT_EXEC): word 1 + (i % 500) of the
 * i-th RX version is i. With "rwx", first maps another page
 * read-write-execute, stores a ret there and calls it: under W^X that is
 * memory ptjit manages, so from then on every mprotect of the process
 * stops (tracker/fullprotect_linux_amd64.go). With "rwx-fixed", the RWX page
 * is mapped with MAP_FIXED inside a 64 MiB reservation: ptjit
 * then stops only the mprotects of the 16 MiB around it, not those of the
 * toggled page, mapped elsewhere; "rwx-fixed-near" toggles a page next to
 * the RWX one instead, whose every mprotect stops; "rwx-fixed-moved" toggles
 * the RWX page itself after mremap moved it 16 MiB or more away: its every
 * mprotect stops there too.
 * Prints "page ADDR" first, then "done N".
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10;
	uint8_t *near = NULL;
	if (argc > 2 && strncmp(argv[2], "rwx-fixed", 9) == 0) {
		/* a 64 MiB reservation, one RWX page mapped at its middle with
		 * MAP_FIXED: ptjit knows the range it manages before the call */
		uint8_t *r = mmap(NULL, 64 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r == MAP_FAILED)
			return 1;
		/* at a 16 MiB boundary inside it (ptjit's grain) */
		uint8_t *at = (uint8_t *)(((uintptr_t)r + (16 << 20) - 1) / (16 << 20) * (16 << 20)) + (16 << 20);
		volatile uint8_t *w = mmap(at, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
					   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (w == MAP_FAILED)
			return 1;
		w[0] = 0xc3; /* ret */
		((void (*)(void))w)();
		if (strcmp(argv[2], "rwx-fixed-moved") == 0) {
			/* the toggled page: the RWX one, moved by mremap into
			 * another reservation, 16 MiB-aligned */
			uint8_t *r2 = mmap(NULL, 64 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (r2 == MAP_FAILED)
				return 1;
			uint8_t *to = (uint8_t *)(((uintptr_t)r2 + (16 << 20) - 1) / (16 << 20) * (16 << 20)) + (16 << 20);
			near = mremap((void *)w, 4096, 4096, MREMAP_MAYMOVE | MREMAP_FIXED, to);
			if (near == MAP_FAILED)
				return 1;
		}
		if (strcmp(argv[2], "rwx-fixed-near") == 0) {
			/* the toggled page: next to the RWX one */
			near = mmap(at + 4096, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			if (near == MAP_FAILED)
				return 1;
		}
	}
	if (argc > 2 && strcmp(argv[2], "rwx") == 0) {
		volatile uint8_t *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (w == MAP_FAILED)
			return 1;
		w[0] = 0xc3; /* ret */
		((void (*)(void))w)();
	}
	uint8_t *p = near ? near : mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 1;
	p[0] = 0xc3;
	printf("page %p\n", (void *)p);
	fflush(stdout);
	for (long i = 0; i < n; i++) {
		if (mprotect(p, 4096, PROT_READ | PROT_WRITE))
			return 2;
		uint64_t v = (uint64_t)i;
		memcpy(p + 8 * (1 + i % 500), &v, sizeof v);
		if (mprotect(p, 4096, PROT_READ | PROT_EXEC))
			return 3;
		((void (*)(void))p)();
	}
	printf("done %ld\n", n);
	return 0;
}
