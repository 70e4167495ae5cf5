/*
 * wpprobe — what tracking written pages would cost on this machine (issue
 * 12 item 3), against copying a 64 KiB JIT area whole.
 *
 * ITERS times, one page of a 64 KiB area is written, then:
 *   - userfaultfd write-protect in async mode (UFFD_FEATURE_WP_ASYNC,
 *     Linux 6.7): the cost of the store's write fault, and of the
 *     PAGEMAP_SCAN ioctl on /proc/self/pagemap that finds the written
 *     pages and write-protects them again (PM_SCAN_WP_MATCHING);
 *   - PAGEMAP_SCAN without write-protecting (the query alone);
 *   - soft-dirty: clear_refs "4", the store, a pagemap read; reports
 *     whether the kernel keeps soft-dirty bits at all;
 *   - process_vm_readv of the whole 64 KiB, and of the one page.
 * Prints one line per measurement in µs, or why it could not run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Linux 6.7 uapi, absent from older headers (must match linux/fs.h and
 * linux/userfaultfd.h) */
#define WP_UNPOPULATED (1u << 13) /* UFFD_FEATURE_WP_UNPOPULATED */
#define WP_ASYNC (1u << 15)       /* UFFD_FEATURE_WP_ASYNC */
struct pm_region {
	uint64_t start, end, categories;
};
struct pm_scan {
	uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
	uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define SCAN_WP_MATCHING (1u << 0)
#define SCAN_CHECK_WPASYNC (1u << 1)
#define IS_WRITTEN (1u << 1)
#define PAGEMAP_SCAN_IOCTL _IOWR('f', 16, struct pm_scan)

#define AREA (64 << 10)
#define PG 4096

static long long now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long scan(int pm, uint8_t *p, uint64_t flags, struct pm_region *vec)
{
	struct pm_scan a = {.size = sizeof a, .flags = flags, .start = (uintptr_t)p, .end = (uintptr_t)p + AREA,
			    .vec = (uintptr_t)vec, .vec_len = 16, .category_mask = IS_WRITTEN, .return_mask = IS_WRITTEN};
	return ioctl(pm, PAGEMAP_SCAN_IOCTL, &a);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 5000;
	uint8_t *p = mmap(NULL, AREA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	static uint8_t buf[AREA];
	struct pm_region vec[16];
	memset(p, 1, AREA);
	int pm = open("/proc/self/pagemap", O_RDONLY);
	int uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
	struct uffdio_api api = {.api = UFFD_API, .features = WP_ASYNC | WP_UNPOPULATED};
	struct uffdio_register reg = {.range = {(uintptr_t)p, AREA}, .mode = UFFDIO_REGISTER_MODE_WP};
	struct uffdio_writeprotect wp = {.range = {(uintptr_t)p, AREA}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
	if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) || ioctl(uffd, UFFDIO_REGISTER, &reg) ||
	    ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) || scan(pm, p, 0, vec) < 0) {
		printf("uffd-wp-async: not available (%s)\n", strerror(errno));
	} else {
		long long fault = 0, t0 = now();
		long found = 0;
		for (int i = 0; i < n; i++) {
			long long w = now();
			p[(i % 16) * PG + 8] = (uint8_t)i;
			fault += now() - w;
			found += scan(pm, p, SCAN_WP_MATCHING | SCAN_CHECK_WPASYNC, vec);
		}
		long long t1 = now();
		printf("uffd-wp-async: store fault %.2f us, PAGEMAP_SCAN+re-protect %.2f us (%.2f ranges found/iter)\n",
		       fault / 1e3 / n, (t1 - t0 - fault) / 1e3 / n, (double)found / n);
		t0 = now();
		for (int i = 0; i < n; i++)
			scan(pm, p, 0, vec);
		printf("PAGEMAP_SCAN query alone: %.2f us\n", (now() - t0) / 1e3 / n);
		close(uffd);
	}
	int cr = open("/proc/self/clear_refs", O_WRONLY);
	long long clr = 0, rd = 0;
	long dirty = 0;
	for (int i = 0; i < n && cr >= 0; i++) {
		long long a = now();
		if (write(cr, "4", 1) != 1)
			break;
		clr += now() - a;
		p[(i % 16) * PG + 8] = (uint8_t)i;
		uint64_t e[16];
		a = now();
		if (pread(pm, e, sizeof e, (uintptr_t)p / PG * 8) != sizeof e)
			break;
		rd += now() - a;
		for (int k = 0; k < 16; k++)
			dirty += (e[k] >> 55) & 1;
	}
	printf("soft-dirty: clear_refs %.2f us, pagemap read %.2f us, %s\n", clr / 1e3 / n, rd / 1e3 / n,
	       dirty ? "bits kept" : "no soft-dirty bits (CONFIG_MEM_SOFT_DIRTY off?)");
	long long t0 = now();
	for (int i = 0; i < n; i++) {
		struct iovec l = {buf, AREA}, r = {p, AREA};
		process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	}
	long long t1 = now();
	for (int i = 0; i < n; i++) {
		struct iovec l = {buf, PG}, r = {p + (i % 16) * PG, PG};
		process_vm_readv(getpid(), &l, 1, &r, 1, 0);
	}
	printf("process_vm_readv: 64 KiB %.2f us, 4 KiB %.2f us\n", (t1 - t0) / 1e3 / n, (now() - t1) / 1e3 / n);
	return 0;
}
