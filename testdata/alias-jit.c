/*
 * alias-jit: JIT memory mapped twice, the pattern of asmjit (Erlang's
 * BeamAsm) and of hardened runtimes: a memfd with a writable view (RW) that
 * the program writes and an executable view (RX) that it runs, never both
 * at one address. Under W^X every store through the RW view changes code
 * at the RX view and must be recorded as exactly as a store into RWX
 * memory.
 *
 *   0. Twins made by mprotect rather than by mmap: both views mapped
 *      read-only, one made writable and the other executable by mprotect,
 *      stores through the writable one after code ran at the other, the
 *      writable one made read-only and writable again.
 *   1. Stores of every width through the RW view, each straddling a page
 *      boundary of the view, with the code they write run through the RX
 *      view: mov (1, 2, 4, 8 bytes), SSE movdqu (16), VEX vmovdqu xmm (16)
 *      and ymm (32), AVX-512 vmovdqu64 zmm (64, where the CPU has it), rep
 *      movsb (40) and glibc's memcpy (200).
 *   2. A store straddling two views: two RW views side by side that map
 *      file pages far apart; its halves land in two places of the RX view.
 *   3. A bulk fill: 256 KiB written through the RW view with 8-byte stores
 *      (one function per page), then each page run once; then one page
 *      patched again (a lone store) and run.
 *
 * Every function returns a value the program knows; it prints one line per
 * check and "ok" (or "FAILED"), and the same lines alone and under a
 * tracer, "TWIN ADDR" where section 0's executable view is, and "BULK ADDR
 * PAGES" where the bulk fill's is.
 * Usage: alias-jit [PAGES [rwx|shared-rwx]]: the bulk fill's pages
 * (default 64); with shared-rwx the bulk fill goes into one RWX MAP_SHARED
 * mapping of a memfd (a store there cannot be forced through
 * /proc/PID/mem while the view is write-protected); with
 * rwx into one private RWX mapping instead (the reference a
 * dual mapping is compared with).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL
typedef int (*fn)(void);
static int failures;

static void check(const char *what, int got, int want)
{
	printf("%-44s %s\n", what, got == want ? "ok" : "BAD");
	if (got != want) {
		printf("  got %d want %d\n", got, want);
		failures++;
	}
}

/* fnbytes fills b[0..n) with nops ending in "mov $imm,%eax; ret" placed at
 * at (at+6 <= n). */
static void fnbytes(unsigned char *b, size_t n, size_t at, int32_t imm)
{
	memset(b, 0x90, n);
	b[at] = 0xb8;
	memcpy(b + at + 1, &imm, 4);
	b[at + 5] = 0xc3;
}

/* The stores, one instruction each. */
static void st1(void *p, const void *s) { __asm__ volatile("movb (%1), %%al; movb %%al, (%0)" ::"r"(p), "r"(s) : "rax", "memory"); }
static void st2(void *p, const void *s) { __asm__ volatile("movw (%1), %%ax; movw %%ax, (%0)" ::"r"(p), "r"(s) : "rax", "memory"); }
static void st4(void *p, const void *s) { __asm__ volatile("movl (%1), %%eax; movl %%eax, (%0)" ::"r"(p), "r"(s) : "rax", "memory"); }
static void st8(void *p, const void *s) { __asm__ volatile("movq (%1), %%rax; movq %%rax, (%0)" ::"r"(p), "r"(s) : "rax", "memory"); }
static void st16(void *p, const void *s) { __asm__ volatile("movdqu (%1), %%xmm0; movdqu %%xmm0, (%0)" ::"r"(p), "r"(s) : "xmm0", "memory"); }
static void st16v(void *p, const void *s) { __asm__ volatile("vmovdqu (%1), %%xmm1; vmovdqu %%xmm1, (%0)" ::"r"(p), "r"(s) : "xmm1", "memory"); }
static void st32(void *p, const void *s) { __asm__ volatile("vmovdqu (%1), %%ymm2; vmovdqu %%ymm2, (%0); vzeroupper" ::"r"(p), "r"(s) : "xmm2", "memory"); }
static void st64(void *p, const void *s) { __asm__ volatile("vmovdqu64 (%1), %%zmm3; vmovdqu64 %%zmm3, (%0); vzeroupper" ::"r"(p), "r"(s) : "xmm3", "memory"); }
static void movsb40(void *p, const void *s)
{
	size_t n = 40;
	__asm__ volatile("rep movsb" : "+D"(p), "+S"(s), "+c"(n)::"memory");
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	int pages = argc > 1 ? atoi(argv[1]) : 64;
	int rwx = argc > 2 && strcmp(argv[2], "rwx") == 0;
	int shrwx = argc > 2 && strcmp(argv[2], "shared-rwx") == 0;
	if (pages < 1 || pages > 65536 || (argc > 2 && !rwx && !shrwx)) {
		fprintf(stderr, "usage: alias-jit [PAGES [rwx|shared-rwx]]\n");
		return 2;
	}

	/* 0. twins made by mprotect (with BPF events, the calls that change a
	 * shared mapping stop, and only those: these must) */
	int fd0 = memfd_create("alias-jit-mprotect", 0);
	if (fd0 < 0 || ftruncate(fd0, PAGE) != 0)
		return 1;
	unsigned char *mw = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd0, 0);
	unsigned char *mx = mmap(NULL, PAGE, PROT_READ, MAP_SHARED, fd0, 0);
	if (mw == MAP_FAILED || mx == MAP_FAILED || mprotect(mw, PAGE, PROT_READ | PROT_WRITE) != 0)
		return 1;
	printf("TWIN %p\n", (void *)mx);
	unsigned char m8[8];
	fnbytes(m8, 8, 0, 5150);
	memcpy(mw, m8, 8);
	if (mprotect(mx, PAGE, PROT_READ | PROT_EXEC) != 0)
		return 1;
	check("a view made executable by mprotect", ((fn)mx)(), 5150);
	fnbytes(m8, 8, 0, 5151);
	st8(mw, m8);
	check("  a store through its twin made writable by mprotect", ((fn)mx)(), 5151);
	if (mprotect(mw, PAGE, PROT_READ) != 0 || mprotect(mw, PAGE, PROT_READ | PROT_WRITE) != 0)
		return 1;
	fnbytes(m8, 8, 0, 5152);
	st8(mw, m8);
	check("  and again, the twin made writable again", ((fn)mx)(), 5152);
	if (mprotect(mx, PAGE, PROT_READ) != 0 || mprotect(mx, PAGE, PROT_READ | PROT_EXEC) != 0)
		return 1;
	fnbytes(m8, 8, 0, 5153);
	st8(mw, m8);
	check("  and again, the view made executable again", ((fn)mx)(), 5153);

	/* 1. every width, straddling a page boundary of the RW view */
	int fd = memfd_create("alias-jit", 0);
	if (fd < 0 || ftruncate(fd, 16 * PAGE) != 0)
		return 1;
	unsigned char *rw = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned char *rx = mmap(NULL, 16 * PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED)
		return 1;
	int32_t imm = 1000;
	unsigned char b[256];
	/* a function at page 1's end whose immediate straddles into page 2:
	 * b8 i0 i1 i2 | i3 c3 */
	size_t f = 2 * PAGE - 4;
	fnbytes(b, 6, 0, imm);
	memcpy(rw + f, b, 6);
	check("setup across the boundary", ((fn)(rx + f))(), imm);
	struct {
		const char *what;
		void (*st)(void *, const void *);
		int width;
	} small[] = {
		{"1-byte store below the boundary", st1, 1},
		{"2-byte store across the boundary", st2, 2},
		{"4-byte store across the boundary", st4, 4},
	};
	for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
		/* rewrite the immediate's bytes that end at the boundary + 1 */
		imm += 1111;
		fnbytes(b, 6, 0, imm);
		size_t off = small[i].width == 1 ? 3 : 5 - small[i].width; /* in b */
		small[i].st(rw + f + off, b + off);
		if (small[i].width == 1) /* the rest of the immediate, one byte at a time */
			for (size_t k = 1; k < 5; k++)
				if (k != off)
					st1(rw + f + k, b + k);
		if (small[i].width == 2)
			st2(rw + f + 1, b + 1);
		if (small[i].width == 4)
			st1(rw + f + 1, b + 1);
		check(small[i].what, ((fn)(rx + f))(), imm);
	}
	__builtin_cpu_init();
	struct {
		const char *what;
		void (*st)(void *, const void *);
		int width;
		int have;
	} wide[] = {
		{"8-byte mov across the boundary", st8, 8, 1},
		{"16-byte movdqu across the boundary", st16, 16, 1},
		{"16-byte vmovdqu (VEX) across the boundary", st16v, 16, __builtin_cpu_supports("avx")},
		{"32-byte vmovdqu ymm across the boundary", st32, 32, __builtin_cpu_supports("avx")},
		{"64-byte vmovdqu64 zmm across the boundary", st64, 64, __builtin_cpu_supports("avx512f")},
		{"40-byte rep movsb across the boundary", movsb40, 40, 1},
		{"200-byte memcpy across the boundary", NULL, 200, 1},
	};
	for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
		if (!wide[i].have) {
			printf("%-44s skipped (no such instructions on this CPU)\n", wide[i].what);
			continue;
		}
		/* PAGE*(3+i): a fresh boundary for each width; the function
		 * starts below the boundary and ends above it */
		size_t w = wide[i].width, at = (3 + i) * PAGE - w / 2;
		imm += 1111;
		fnbytes(b, w, w / 2 - 3, imm);
		if (wide[i].st)
			wide[i].st(rw + at, b);
		else
			memcpy(rw + at, b, w);
		check(wide[i].what, ((fn)(rx + at + w / 2 - 3))(), imm);
		/* and once more at the same place: a second version */
		imm += 7;
		fnbytes(b, w, w / 2 - 3, imm);
		if (wide[i].st)
			wide[i].st(rw + at, b);
		else
			memcpy(rw + at, b, w);
		check("  again", ((fn)(rx + at + w / 2 - 3))(), imm);
	}

	/* 2. a store straddling two views: view A maps file pages 0-1, view B
	 * (right after it) file page 12; 16 bytes at A's last 8 bytes */
	unsigned char *va = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (va == MAP_FAILED || munmap(va + 2 * PAGE, PAGE) != 0)
		return 1;
	unsigned char *vb = mmap(va + 2 * PAGE, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 12 * PAGE);
	if (vb != va + 2 * PAGE)
		return 1;
	imm += 1111;
	memset(b, 0xcc, 8);
	fnbytes(b + 8, 8, 0, imm); /* b8 imm c3 90 90: the function in file page 12 */
	b[0] = 0xb8;               /* file page 1's last 8 bytes: mov $imm2,%eax; ret; nop; nop */
	int32_t imm2 = imm + 1;
	memcpy(b + 1, &imm2, 4);
	b[5] = 0xc3;
	b[6] = b[7] = 0x90;
	st16(va + 2 * PAGE - 8, b);
	check("16-byte store across two views, high half", ((fn)(rx + 12 * PAGE))(), imm);
	check("16-byte store across two views, low half", ((fn)(rx + 2 * PAGE - 8))(), imm2);

	/* 3. a bulk fill through the RW view, then each page run once */
	size_t size = (size_t)pages * PAGE;
	uint64_t *bw;
	unsigned char *bx;
	if (rwx) {
		/* the reference: the same fill into one RWX mapping */
		bx = mmap(NULL, size, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		bw = (uint64_t *)bx;
	} else if (shrwx) {
		int fd2 = memfd_create("alias-jit-shared-rwx", 0);
		if (fd2 < 0 || ftruncate(fd2, size) != 0)
			return 1;
		bx = mmap(NULL, size, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED, fd2, 0);
		bw = (uint64_t *)bx;
	} else {
		int fd2 = memfd_create("alias-jit-bulk", 0);
		if (fd2 < 0 || ftruncate(fd2, size) != 0)
			return 1;
		bw = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
		bx = mmap(NULL, size, PROT_READ | PROT_EXEC, MAP_SHARED, fd2, 0);
	}
	if (bw == MAP_FAILED || bx == MAP_FAILED)
		return 1;
	printf("BULK %p %d\n", (void *)bx, pages);
	for (int p = 0; p < pages; p++) {
		unsigned char f8[8];
		fnbytes(f8, 8, 0, p * 3 + 1);
		uint64_t word, nops = 0x9090909090909090ULL;
		memcpy(&word, f8, 8);
		volatile uint64_t *q = bw + p * (PAGE / 8);
		q[0] = word;
		for (size_t k = 1; k < PAGE / 8; k++)
			q[k] = nops;
	}
	long sum = 0, want = 0;
	for (int p = 0; p < pages; p++) {
		sum += ((fn)(bx + p * PAGE))();
		want += p * 3 + 1;
	}
	check("bulk fill, every page run", (int)sum, (int)want);
	usleep(20000); /* a lone store later: a patcher's, not a burst */
	unsigned char f8[8];
	fnbytes(f8, 8, 0, 4242);
	uint64_t word;
	memcpy(&word, f8, 8);
	*(volatile uint64_t *)(bw + (pages / 2) * (PAGE / 8)) = word;
	check("bulk fill, one page patched later", ((fn)(bx + (pages / 2) * PAGE))(), 4242);

	printf(failures ? "FAILED\n" : "ok\n");
	return failures != 0;
}
