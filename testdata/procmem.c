/*
 * procmem: rewrites its own JIT code through /proc/self/mem, which the
 * kernel lets through the page protection: no mprotect, no fault.
 *
 * A page of code returning 1 is made RX (manifest line "mprotect"); then it
 * is rewritten to return 2 with pwrite() on /proc/self/mem, to return 3
 * with lseek()+write(), and to return 4 with pwritev(); after each rewrite
 * the page is logged ("procmem") and the code is called. Prints the
 * results; exits 0 when every call returned what was written.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "manifest.h"

static void code_returning(unsigned char *b, int v)
{
	b[0] = 0xb8; /* mov $v, %eax */
	memcpy(b + 1, &v, 4);
	b[5] = 0xc3; /* ret */
}

int main(void)
{
	unsigned char *page = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	memset(page, 0xcc, MF_PAGE);
	code_returning(page, 1);
	mf_mprotect(page, MF_PAGE, PROT_READ | PROT_EXEC);
	int (*fn)(void) = (int (*)(void))page;
	int got[4], ok = 1;
	got[0] = fn();

	int fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		perror("open /proc/self/mem");
		return 2;
	}
	unsigned char b[6];

	code_returning(b, 2);
	mf_lock();
	if (pwrite(fd, b, sizeof b, (off_t)(uintptr_t)page) != sizeof b)
		mf_die("pwrite: %s", strerror(errno));
	mf_log(page, MF_PAGE, "procmem");
	mf_unlock();
	got[1] = fn();

	code_returning(b, 3);
	mf_lock();
	if (lseek(fd, (off_t)(uintptr_t)page, SEEK_SET) < 0 || write(fd, b, sizeof b) != sizeof b)
		mf_die("lseek+write: %s", strerror(errno));
	mf_log(page, MF_PAGE, "procmem");
	mf_unlock();
	got[2] = fn();

	code_returning(b, 4);
	struct iovec iov[2] = {{b, 3}, {b + 3, 3}};
	mf_lock();
	if (pwritev(fd, iov, 2, (off_t)(uintptr_t)page) != sizeof b)
		mf_die("pwritev: %s", strerror(errno));
	mf_log(page, MF_PAGE, "procmem");
	mf_unlock();
	got[3] = fn();

	for (int i = 0; i < 4; i++) {
		printf("version %d returned %d\n", i + 1, got[i]);
		ok &= got[i] == i + 1;
	}
	close(fd);
	return ok ? 0 : 1;
}
