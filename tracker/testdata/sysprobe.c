/*
 * sysprobe: makes one syscall of each kind the seccomp filter must or must
 * not stop, with a distinctive length so the test can tell them apart in
 * the tracker's seccomp-stop log. It prints "ok" at the end.
 *
 * Lengths (pages of 4 KiB):
 *   0x11000  mmap RW, kernel-chosen address        no stop
 *   0x12000  mmap RX                               stop
 *   0x13000  mmap RW MAP_FIXED                     stop
 *   0x14000  mmap RW MAP_FIXED_NOREPLACE           no stop
 *   0x15000  mprotect RW→R                         no stop (adds no PROT_EXEC,
 *                                                  no memory ptjit manages yet)
 *   0x7000   mprotect RW→RX                        stop
 *   0x16000  madvise MADV_WILLNEED                 no stop
 *   0x17000  madvise MADV_DONTNEED                 stop
 *   0x18000  munmap                                stop
 *   0x19000  madvise MADV_DONTFORK                 stop (no exit stop)
 *   0x30000  mmap RW (room for the MAP_FIXED)      no stop
 *   0x1a000  mmap RWX, then one byte written into it with
 *            process_vm_writev                     stop (mmap) + stop (pvw)
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

static void *map(size_t len, int prot, int flags, void *hint) {
	void *p = mmap(hint, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

int main(void) {
	char *a = map(0x11000, PROT_READ | PROT_WRITE, 0, NULL);
	char *b = map(0x12000, PROT_READ | PROT_EXEC, 0, NULL);
	char *e = map(0x30000, PROT_READ | PROT_WRITE, 0, NULL);
	map(0x13000, PROT_READ | PROT_WRITE, MAP_FIXED, e);
	char *big = map(0x100000, PROT_NONE, 0, NULL);
	munmap(big, 0x100000);
	map(0x14000, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE, big);
	char *c = map(0x18000, PROT_READ | PROT_WRITE, 0, NULL);
	mprotect(c, 0x15000, PROT_READ);
	mprotect(c, 0x7000, PROT_READ | PROT_EXEC);
	madvise(c, 0x16000, MADV_WILLNEED);
	madvise(c, 0x17000, MADV_DONTNEED);
	madvise(c, 0x19000, MADV_DONTFORK); /* ENOMEM past the end: still a stop */
	munmap(c, 0x18000);
	char *d = map(0x1a000, PROT_READ | PROT_WRITE | PROT_EXEC, 0, NULL);
	static const unsigned char ret[] = {0xc3};
	struct iovec l = {(void *)ret, 1}, r = {d + 0x1000, 1};
	if (process_vm_writev(getpid(), &l, 1, &r, 1, 0) != 1)
		perror("process_vm_writev");
	printf("ok %p %p %p\n", (void *)a, (void *)b, (void *)d);
	return 0;
}
