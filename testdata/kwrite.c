/*
 * kwrite: the kernel copies code into JIT memory after code ran there —
 * read(2) from a pipe, pread(2) from a file, read(2) across two pages,
 * recv(2) from a socket pair, getrandom(2); readv(2), preadv(2),
 * preadv2(2), recvmsg(2) and recvmmsg(2) with one of their buffers in
 * code, process_vm_readv(2) from the program itself, and a readv(2) of
 * 2^63 bytes, which fails as alone — into RWX memory,
 * and read(2) into the writable view of a memfd mapped twice (an RW view
 * written, an RX view run); then the calls that write a struct the
 * program points into code: fstat(2), statx(2), wait4(2)'s status and
 * rusage, pipe2(2)'s descriptors, clock_gettime(2) (the syscall, not the
 * vDSO), uname(2), rt_sigaction(2)'s old action, getsockname(2), whose
 * abstract name is a function that then runs, epoll_wait(2), whose
 * event's data is one too, poll(2)'s revents, select(2)'s descriptor set
 * prctl(2)'s PR_GET_NAME and PR_GET_AUXV (across two pages), and
 * FUTEX_WAKE_OP's second word.
 * Alone each call succeeds; under a W^X recorder the code pages are not
 * writable for the kernel, and the call must succeed all the same, its
 * bytes recorded as a version where they then run.
 *
 * Each new function is "mov eax, N; ret"; the program prints one line per
 * check and "ok" (or "FAILED"), the same alone and under a tracer.
 *
 * kwrite readv N: the cost of the array calls' stops (the bench's
 * kwrite-vec row): RWX code run once (so that W^X protects it), then N
 * one-byte readv(2) calls from a pipe into an ordinary buffer.
 *
 * kwrite race N: a second thread runs a function at the start of a code
 * page in a loop while the main thread reads N new functions from a pipe
 * into the middle of the same page (readv(2) and read(2), alternately,
 * half of them after a clock_gettime(2) into the page) and runs each; prints "race: N copies, B bad" (B: calls that failed or
 * functions that returned the wrong value, 0 alone).
 *
 * kwrite scatter N: N RWX mappings of 64 KiB, 256 MiB apart, a function
 * run in each (so that W^X protects it), then a new one read(2) from a
 * pipe over it and run; prints "scatter: N mappings, B bad" (0 alone). More
 * places of code than a recorder's filters have ranges for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <signal.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096UL
#ifndef PR_GET_AUXV
#define PR_GET_AUXV 0x41555856 /* Linux 6.4 */
#endif
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

static int readv_loop(long n)
{
	unsigned char *x = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (x == MAP_FAILED)
		return 1;
	fnbytes(x, 7);
	if (((fn)x)() != 7)
		return 1;
	int pfd[2];
	if (pipe(pfd) != 0)
		return 1;
	char c = 'x', d;
	struct iovec iov = {&d, 1};
	for (long i = 0; i < n; i++)
		if (write(pfd[1], &c, 1) != 1 || readv(pfd[0], &iov, 1) != 1)
			return 1;
	printf("readv: %ld calls\n", n);
	return 0;
}

static unsigned char *race_page;
static volatile int race_stop;
static volatile long race_bad;

static void *race_runner(void *arg)
{
	(void)arg;
	while (!race_stop)
		if (((fn)race_page)() != 1)
			race_bad++;
	return NULL;
}

static int race(long n)
{
	race_page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (race_page == MAP_FAILED)
		return 1;
	fnbytes(race_page, 1);
	if (((fn)race_page)() != 1)
		return 1;
	int pfd[2];
	if (pipe(pfd) != 0)
		return 1;
	pthread_t t;
	if (pthread_create(&t, NULL, race_runner, NULL) != 0)
		return 1;
	long bad = 0;
	unsigned char *at = race_page + PAGE / 2;
	for (long i = 0; i < n; i++) {
		unsigned char b[6];
		int32_t v = 200 + (int32_t)(i % 1000);
		fnbytes(b, v);
		if (write(pfd[1], b, 6) != 6)
			return 1;
		struct iovec iov = {at, 6};
		/* every fourth copy follows another kernel copy into the page
		 * (a clock_gettime(2) after the code): the page is writable
		 * already when the read starts, and the other thread's fetch
		 * must not make it executable-only under the read */
		struct timespec *ts = (struct timespec *)(at + 512);
		if (i % 4 >= 2 && syscall(SYS_clock_gettime, CLOCK_MONOTONIC, ts) != 0)
			bad++;
		long got = i % 2 ? read(pfd[0], at, 6) : readv(pfd[0], &iov, 1);
		if (got != 6 || ((fn)at)() != v)
			bad++;
	}
	race_stop = 1;
	pthread_join(t, NULL);
	printf("race: %ld copies, %ld bad\n", n, bad + race_bad);
	return bad + race_bad != 0;
}

static int scatter(long n)
{
	const size_t size = 16 * PAGE;
	unsigned char *hint = (unsigned char *)0x200000000000UL;
	int pfd[2];
	if (pipe(pfd) != 0)
		return 1;
	long bad = 0;
	for (long i = 0; i < n; i++) {
		unsigned char *x = mmap(hint + i * (256UL << 20), size, PROT_READ | PROT_WRITE | PROT_EXEC,
					MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (x == MAP_FAILED)
			return 1;
		fnbytes(x + 2 * PAGE, 1000 + (int)i);
		if (((fn)(x + 2 * PAGE))() != 1000 + i)
			bad++;
		unsigned char b[16];
		fnbytes(b, 2000 + (int)i);
		if (write(pfd[1], b, 6) != 6)
			return 1;
		if (read(pfd[0], x + 2 * PAGE, 6) != 6 || ((fn)(x + 2 * PAGE))() != 2000 + i)
			bad++;
	}
	printf("scatter: %ld mappings, %ld bad\n", n, bad);
	return bad != 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 3 && strcmp(argv[1], "readv") == 0 && atol(argv[2]) > 0)
		return readv_loop(atol(argv[2]));
	if (argc == 3 && strcmp(argv[1], "race") == 0 && atol(argv[2]) > 0)
		return race(atol(argv[2]));
	if (argc == 3 && strcmp(argv[1], "scatter") == 0 && atol(argv[2]) > 0)
		return scatter(atol(argv[2]));
	if (argc != 1) {
		fprintf(stderr, "usage: kwrite [readv N | race N | scatter N]\n");
		return 2;
	}
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

	/* the calls with arrays of buffers: the code is the second buffer,
	 * after a plain one; each function runs, then the next call writes
	 * its page again */
	char plain[4];
	struct iovec iov[2] = {{plain, sizeof plain}, {x, 6}};
	unsigned char b2[10];
	memcpy(b2, "head", 4);
	fnbytes(b2 + 4, 111);
	if (write(pfd[1], b2, 10) != 10)
		return 1;
	n = readv(pfd[0], iov, 2);
	check("readv(2) into code", n, 10, ((fn)x)(), 111);

	fnbytes(b2 + 4, 112);
	if (pwrite(fd, b2, 10, 200) != 10)
		return 1;
	iov[1].iov_base = x + PAGE;
	n = preadv(fd, iov, 2, 200);
	check("preadv(2) into code", n, 10, ((fn)(x + PAGE))(), 112);

	fnbytes(b2 + 4, 113);
	if (pwrite(fd, b2, 10, 300) != 10)
		return 1;
	iov[1].iov_base = x + 2 * PAGE - 3; /* across pages 1 and 2 */
	n = preadv2(fd, iov, 2, 300, 0);
	check("preadv2(2) across two pages of code", n, 10, ((fn)(x + 2 * PAGE - 3))(), 113);

	fnbytes(b2 + 4, 114);
	if (send(sv[0], b2, 10, 0) != 10)
		return 1;
	iov[1].iov_base = x + 3 * PAGE;
	struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
	n = recvmsg(sv[1], &mh, 0);
	check("recvmsg(2) into code", n, 10, ((fn)(x + 3 * PAGE))(), 114);

	fnbytes(b2 + 4, 115);
	if (send(sv[0], b2, 10, 0) != 10)
		return 1;
	iov[1].iov_base = x;
	struct mmsghdr mm = {.msg_hdr = {.msg_iov = iov, .msg_iovlen = 2}};
	n = recvmmsg(sv[1], &mm, 1, 0, NULL);
	check("recvmmsg(2) into code", n == 1 ? (long)mm.msg_len : -1, 10, ((fn)x)(), 115);

	fnbytes(b2 + 4, 116);
	struct iovec remote = {b2, 10};
	iov[1].iov_base = x + PAGE;
	n = process_vm_readv(getpid(), iov, 2, &remote, 1, 0);
	check("process_vm_readv(2) of itself into code", n, 10, ((fn)(x + PAGE))(), 116);

	/* a length of 2^63 bytes: the kernel fails the call at once, copying
	 * nothing (the byte stays in the pipe); under a tracer too, at once */
	struct iovec huge[2] = {{x, 0x7fffffffffffffffUL}, {x, 16}};
	if (write(pfd[1], "z", 1) != 1)
		return 1;
	errno = 0;
	n = readv(pfd[0], huge, 2);
	printf("%-40s %ld %s\n", "readv(2) of 2^63 bytes into code", n, n < 0 ? strerror(errno) : "");
	char z;
	n = read(pfd[0], &z, 1);
	check("  the pipe's byte still there", n == 1 && z == 'z', 1, ((fn)x)(), 115);

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

	/* the calls that write structs the program points into code (each
	 * page ran code before); the function at the page's start still runs */
	unsigned char *s3 = x + 3 * PAGE;
	struct stat st, *stc = (struct stat *)(s3 + 1024);
	if (fstat(fd, &st) != 0)
		return 1;
	n = syscall(SYS_fstat, fd, stc);
	check("fstat(2) into code", n == 0 && stc->st_ino == st.st_ino, 1, ((fn)s3)(), 114);

	struct statx *sx = (struct statx *)(s3 + 1536);
	n = syscall(SYS_statx, fd, "", AT_EMPTY_PATH, STATX_INO, sx);
	check("statx(2) into code", n == 0 && sx->stx_ino == st.st_ino, 1, ((fn)s3)(), 114);

	pid_t child = fork();
	if (child < 0)
		return 1;
	if (child == 0)
		_exit(7);
	int *status = (int *)(s3 + 2048);
	struct rusage *ru = (struct rusage *)(s3 + 2112);
	n = syscall(SYS_wait4, child, status, 0, ru);
	check("wait4(2) status and rusage into code", n == child && WIFEXITED(*status) && WEXITSTATUS(*status) == 7, 1, ((fn)s3)(), 114);

	int *pfd2 = (int *)(x + 2 * PAGE + 3000);
	n = syscall(SYS_pipe2, pfd2, 0);
	char c2 = 0;
	int piped = n == 0 && write(pfd2[1], "q", 1) == 1 && read(pfd2[0], &c2, 1) == 1 && c2 == 'q';
	check("pipe2(2) descriptors into code", piped, 1, ((fn)(x + 2 * PAGE - 3))(), 113);

	struct timespec *ts = (struct timespec *)(x + 2 * PAGE + 3100);
	n = syscall(SYS_clock_gettime, CLOCK_MONOTONIC, ts);
	check("clock_gettime(2) into code", n == 0 && (ts->tv_sec > 0 || ts->tv_nsec > 0), 1, ((fn)(x + 2 * PAGE - 3))(), 113);

	struct utsname *un = (struct utsname *)(x + PAGE + 1500);
	n = syscall(SYS_uname, un);
	check("uname(2) into code", n == 0 && strcmp(un->sysname, "Linux") == 0, 1, ((fn)(x + PAGE))(), 116);

	unsigned char *oldact = x + PAGE + 2000;
	n = syscall(SYS_rt_sigaction, SIGUSR1, NULL, oldact, 8);
	check("rt_sigaction(2) old action into code", n == 0, 1, ((fn)(x + PAGE))(), 116);

	/* getsockname(2) writes the socket's abstract name, which is a
	 * function: the kernel writes code, which then runs */
	int ls = socket(AF_UNIX, SOCK_DGRAM, 0);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	fnbytes((unsigned char *)sa.sun_path + 1, 121);
	socklen_t salen = offsetof(struct sockaddr_un, sun_path) + 7;
	if (ls < 0 || bind(ls, (struct sockaddr *)&sa, salen) != 0)
		return 1;
	unsigned char *name = s3 + 3000;
	socklen_t namelen = sizeof sa;
	n = syscall(SYS_getsockname, ls, name, &namelen);
	check("getsockname(2) writes a function into code", n == 0 && namelen == salen, 1, ((fn)(name + 3))(), 121);

	/* epoll_wait(2) writes its events, whose data is a function */
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN};
	fnbytes((unsigned char *)&ev.data, 122);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev) != 0 || write(pfd[1], "e", 1) != 1)
		return 1;
	struct epoll_event *evc = (struct epoll_event *)(x + 2 * PAGE + 3200);
	n = epoll_wait(ep, evc, 4, 0);
	check("epoll_wait(2) writes a function into code", n == 1 && evc->events == EPOLLIN, 1, ((fn)((unsigned char *)evc + 4))(), 122);

	/* poll(2) writes revents into descriptors the program set in code,
	 * then ran code in that page */
	struct pollfd *pf = (struct pollfd *)(s3 + 3500);
	pf->fd = pfd[0];
	pf->events = POLLIN;
	pf->revents = 0;
	if (((fn)s3)() != 114)
		return 1;
	n = poll(pf, 1, 0);
	check("poll(2) revents into code", n == 1 && (pf->revents & POLLIN), 1, ((fn)s3)(), 114);
	if (read(pfd[0], &z, 1) != 1)
		return 1;

	/* select(2)'s descriptor set and prctl(2)'s PR_GET_NAME, in code */
	fd_set *rs = (fd_set *)(x + 2 * PAGE + 3400);
	memset(rs, 0, sizeof *rs);
	FD_SET(pfd[0], rs);
	if (((fn)(x + 2 * PAGE - 3))() != 113 || write(pfd[1], "s", 1) != 1)
		return 1;
	struct timeval tv0 = {0, 0};
	n = syscall(SYS_select, pfd[0] + 1, rs, NULL, NULL, &tv0);
	check("select(2) descriptor set in code", n == 1 && FD_ISSET(pfd[0], rs), 1, ((fn)(x + 2 * PAGE - 3))(), 113);
	if (read(pfd[0], &z, 1) != 1)
		return 1;
	char *pname = (char *)(x + PAGE + 2600);
	n = syscall(SYS_prctl, PR_GET_NAME, pname, 0, 0, 0);
	check("prctl(2) PR_GET_NAME into code", n == 0 && strncmp(pname, "kwrite", 6) == 0, 1, ((fn)(x + PAGE))(), 116);

	/* FUTEX_WAKE_OP's second word in code (the kernel adds 3 to it), and
	 * prctl(2)'s PR_GET_AUXV across two pages of code */
	int *fw1 = malloc(sizeof *fw1), *fw2 = (int *)(x + 2 * PAGE + 3600);
	*fw1 = 0;
	*fw2 = 5;
	if (((fn)(x + 2 * PAGE - 3))() != 113)
		return 1;
	n = syscall(SYS_futex, fw1, FUTEX_WAKE_OP | FUTEX_PRIVATE_FLAG, 1, NULL, fw2, FUTEX_OP(FUTEX_OP_ADD, 3, FUTEX_OP_CMP_EQ, 0));
	check("futex(2) FUTEX_WAKE_OP's second word in code", n == 0 && *fw2 == 8, 1, ((fn)(x + 2 * PAGE - 3))(), 113);
	unsigned long auxv[16];
	unsigned char *av = x + 3 * PAGE - 32;
	n = syscall(SYS_prctl, PR_GET_AUXV, auxv, sizeof auxv, 0, 0);
	long m = syscall(SYS_prctl, PR_GET_AUXV, av, sizeof auxv, 0, 0);
	check("prctl(2) PR_GET_AUXV across two pages of code", n > 0 && m == n && memcmp(av, auxv, sizeof auxv) == 0, 1, ((fn)(x + 2 * PAGE - 3))(), 113);

	printf(failures ? "FAILED\n" : "ok\n");
	return failures != 0;
}
