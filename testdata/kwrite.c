/*
 * kwrite: the kernel copies code into JIT memory after code ran there —
 * read(2) from a pipe, pread(2) from a file, read(2) across two pages,
 * recv(2) from a socket pair, getrandom(2) — into RWX memory, and read(2)
 * into the writable view of a memfd mapped twice (an RW view written, an
 * RX view run).
 * Alone each call succeeds; under a W^X recorder the code pages are not
 * writable for the kernel, and the call must succeed all the same, its
 * bytes recorded as a version where they then run.
 *
 * Each new function is "mov eax, N; ret"; the program prints one line per
 * check and "ok" (or "FAILED"), the same alone and under a tracer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define PAGE 4096UL
typedef int (*fn)(void);
static int failures;

static void fnbytes(unsigned char *b, int32_t imm)
{
	b[0] = 0xb8;
	memcpy(b + 1, &imm, 4);
	b[5] = 0xc3;
}

static void check(const char *what, long got, long want, int ran, int want_ran)
{
	int ok = got == want && ran == want_ran;
	printf("%-40s %s\n", what, ok ? "ok" : "BAD");
	if (!ok) {
		printf("  returned %ld (want %ld, errno %s), ran %d (want %d)\n", got, want, strerror(errno), ran, want_ran);
		failures++;
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	unsigned char *x = mmap(NULL, 4 * PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x == MAP_FAILED)
		return 1;
	unsigned char b[16];
	/* code in every page, run once: W^X keeps it executable-only now */
	for (int p = 0; p < 4; p++) {
		fnbytes(x + p * PAGE, p + 1);
		if (((fn)(x + p * PAGE))() != p + 1)
			return 1;
	}

	int pfd[2];
	if (pipe(pfd) != 0)
		return 1;
	fnbytes(b, 101);
	if (write(pfd[1], b, 6) != 6)
		return 1;
	long n = read(pfd[0], x, 6);
	check("read(2) from a pipe into code", n, 6, ((fn)x)(), 101);

	char path[] = "/tmp/kwrite-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0)
		return 1;
	unlink(path);
	fnbytes(b, 102);
	if (pwrite(fd, b, 6, 100) != 6)
		return 1;
	n = pread(fd, x + PAGE, 6, 100);
	check("pread(2) from a file into code", n, 6, ((fn)(x + PAGE))(), 102);

	/* a read straddling pages 1 and 2: a function across them */
	fnbytes(b, 103);
	if (write(pfd[1], b, 6) != 6)
		return 1;
	n = read(pfd[0], x + 2 * PAGE - 3, 6);
	check("read(2) across two pages of code", n, 6, ((fn)(x + 2 * PAGE - 3))(), 103);

	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
		return 1;
	fnbytes(b, 104);
	if (send(sv[0], b, 6, 0) != 6)
		return 1;
	n = recv(sv[1], x + 3 * PAGE, 6, 0);
	check("recv(2) into code", n, 6, ((fn)(x + 3 * PAGE))(), 104);

	/* random bytes over a function's tail: it still runs (the ret is
	 * rewritten after) */
	n = getrandom(x + PAGE + 512, 32, 0);
	x[PAGE + 512] = 0xc3;
	check("getrandom(2) into code", n, 32, ((fn)(x + PAGE))(), 102);

	/* a memfd mapped twice: read(2) into the writable view */
	int mfd = memfd_create("kwrite", 0);
	if (mfd < 0 || ftruncate(mfd, PAGE) != 0)
		return 1;
	unsigned char *rw = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	unsigned char *rx = mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_SHARED, mfd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED)
		return 1;
	fnbytes(rw, 107);
	if (((fn)rx)() != 107)
		return 1;
	fnbytes(b, 108);
	if (write(pfd[1], b, 6) != 6)
		return 1;
	n = read(pfd[0], rw, 6);
	check("read(2) into an alias of code", n, 6, ((fn)rx)(), 108);

	printf(failures ? "FAILED\n" : "ok\n");
	return failures != 0;
}
