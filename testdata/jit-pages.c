/*
 * jit-pages [VERSIONS [KIB [seccomp|uffd]]] — a large JIT region of which each version
 * rewrites a few pages: what changed-page tracking (ptjit run --copy) is
 * for. A KIB KiB (default 4096) anonymous region is filled with one small
 * function per page and made executable; then VERSIONS times (default 24)
 * it is made writable, two pages get a new function, and the region is made
 * executable and the new functions are called and checked. In every fifth
 * of the first 20 versions one more page is dropped with MADV_DONTNEED
 * first (it reads as zeros: changed without a store); unless it was one of
 * the two, it is filled again as a version of its own. Prints one line:
 * the sum of the results, and how many descriptors it holds at the end.
 *
 * With "seccomp" the program first installs a seccomp filter of its own that
 * allows every call; with "uffd" it holds a userfaultfd of its own
 * (registering nothing): where ptjit must not make one in the program.
 * With "remap", before the third version a second region of the same size
 * (page k's function returns k*1000+500) is made executable and moved
 * over the first with mremap (MREMAP_FIXED): the versions go on there.
 * With "shared" the region is shared anonymous memory (MAP_SHARED |
 * MAP_ANONYMOUS, as PHP's opcache JIT buffer); with "shared-fork" too, and
 * before each version from the third on a forked child writes one more
 * page of it (page c returns c*1000+v+100) and exits: the parent's next
 * version holds the child's store, which no fault of the parent's saw.
 *
 * Page k's function is "mov eax, imm32; ret" with imm32 = k*1000 + the
 * version it was last written in.
 * Manifest: 1 + VERSIONS + up to 4 lines × mprotect, the whole region
 * (remap: 2 more, the second region's mprotect and the mremap).
 */
#include "manifest.h"

#include <dirent.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

typedef int (*fn)(void);

static void emit(uint8_t *page, int32_t k)
{
	page[0] = 0xb8; /* mov eax, imm32 */
	memcpy(page + 1, &k, 4);
	page[5] = 0xc3; /* ret */
}

static void call(uint8_t *base, long k, int32_t want, int64_t *total)
{
	int got = ((fn)(void *)(base + k * MF_PAGE))();
	if (got != want)
		mf_die("page %ld: got %d, want %d", k, got, want);
	*total += got;
}

int main(int argc, char **argv)
{
	long versions = argc > 1 ? atol(argv[1]) : 24;
	long kib = argc > 2 ? atol(argv[2]) : 4096;
	if (versions < 0 || kib < 4) {
		fprintf(stderr, "usage: jit-pages [VERSIONS [KIB [seccomp|uffd|remap]]]\n");
		return 2;
	}
	const char *own = argc > 3 ? argv[3] : "";
	if (strcmp(own, "seccomp") == 0) {
		struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
		struct sock_fprog prog = {1, allow};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
			mf_die("seccomp: %s", strerror(errno));
	} else if (strcmp(own, "uffd") == 0) {
		if (syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */) < 0)
			mf_die("userfaultfd: %s", strerror(errno));
	} else if (*own && strcmp(own, "remap") != 0 && strcmp(own, "shared") != 0 && strcmp(own, "shared-fork") != 0) {
		fprintf(stderr, "usage: jit-pages [VERSIONS [KIB [seccomp|uffd|remap|shared|shared-fork]]]\n");
		return 2;
	}
	int shared = strncmp(own, "shared", 6) == 0, forks = strcmp(own, "shared-fork") == 0;
	long pages = kib * 1024 / (long)MF_PAGE;
	size_t size = (size_t)pages * MF_PAGE;
	uint8_t *r;
	if (shared) {
		r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (r == MAP_FAILED)
			mf_die("mmap shared: %s", strerror(errno));
	} else
		r = mf_mmap(NULL, size, PROT_READ | PROT_WRITE, 0);
	for (long k = 0; k < pages; k++)
		emit(r + k * MF_PAGE, (int32_t)(k * 1000));
	mf_mprotect(r, size, PROT_READ | PROT_EXEC);
	int64_t total = 0;
	call(r, pages - 1, (int32_t)((pages - 1) * 1000), &total);
	for (long v = 1; v <= versions; v++) {
		if (v == 3 && strcmp(own, "remap") == 0) {
			/* a second region, made executable (a recorder tracks
			 * it too), moves over the first */
			uint8_t *o = mf_mmap(NULL, size, PROT_READ | PROT_WRITE, 0);
			for (long k = 0; k < pages; k++)
				emit(o + k * MF_PAGE, (int32_t)(k * 1000 + 500));
			mf_mprotect(o, size, PROT_READ | PROT_EXEC);
			call(o, 1, 1500, &total);
			mf_lock();
			if (mremap(o, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, r) != r)
				mf_die("mremap: %s", strerror(errno));
			mf_log(r, size, "mremap");
			mf_unlock();
			call(r, 1, 1500, &total);
		}
		mf_mprotect(r, size, PROT_READ | PROT_WRITE);
		long a = (v * 7) % pages, b = (v * 131 + 3) % pages, d = -1;
		long c = (v * 61 + 5) % pages;
		if (forks && v >= 3 && c != a && c != b) {
			pid_t pid = fork();
			if (pid < 0)
				mf_die("fork: %s", strerror(errno));
			if (pid == 0) {
				emit(r + c * MF_PAGE, (int32_t)(c * 1000 + v + 100));
				_exit(0);
			}
			int st;
			if (waitpid(pid, &st, 0) != pid || st != 0)
				mf_die("child: status %d", st);
		}
		if (v % 5 == 0 && v <= 20 && !shared) {
			d = (v * 17 + 1) % pages;
			if (madvise(r + d * MF_PAGE, MF_PAGE, MADV_DONTNEED) != 0)
				mf_die("madvise: %s", strerror(errno));
		}
		emit(r + a * MF_PAGE, (int32_t)(a * 1000 + v));
		emit(r + b * MF_PAGE, (int32_t)(b * 1000 + v));
		mf_mprotect(r, size, PROT_READ | PROT_EXEC);
		call(r, a, (int32_t)(a * 1000 + v), &total);
		call(r, b, (int32_t)(b * 1000 + v), &total);
		if (forks && v >= 3 && c != a && c != b)
			call(r, c, (int32_t)(c * 1000 + v + 100), &total);
		if (d >= 0 && d != a && d != b) {
			/* zeros now: refill it as a new version */
			mf_mprotect(r, size, PROT_READ | PROT_WRITE);
			if (r[d * MF_PAGE] != 0)
				mf_die("page %ld after MADV_DONTNEED: not zero", d);
			emit(r + d * MF_PAGE, (int32_t)(d * 1000 + v));
			mf_mprotect(r, size, PROT_READ | PROT_EXEC);
			call(r, d, (int32_t)(d * 1000 + v), &total);
		}
	}
	/* the descriptors it holds: a recorder must leave it none of its own */
	int fds = 0;
	DIR *dir = opendir("/proc/self/fd");
	for (struct dirent *e; dir && (e = readdir(dir));)
		fds += e->d_name[0] != '.';
	if (dir)
		closedir(dir);
	printf("sum %" PRId64 ", %d descriptors\n", total, fds - 1 /* dir's own */);
	return 0;
}
