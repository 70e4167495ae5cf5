/*
 * dualmap: the double-mapping JIT pattern. A memfd is mapped twice,
 * writable at one address and executable at another; code is written
 * through the writable alias and run through the executable one. Under
 * W^X every store through the alias must be recorded as a write at the
 * executable address. Prints "RX ADDR" once per buffer (for the test),
 * one line per check and "ok".
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef int (*fn)(void);
static int failures;

static uint64_t word(int32_t imm) {
	unsigned char b[8] = {0xb8, 0, 0, 0, 0, 0xc3, 0x90, 0x90};
	memcpy(b + 1, &imm, 4);
	uint64_t w;
	memcpy(&w, b, 8);
	return w;
}

static void check(const char *what, unsigned char *rx, int want) {
	int got = ((fn)rx)();
	printf("%-32s %s\n", what, got == want ? "ok" : "BAD");
	if (got != want)
		failures++;
}

static void store(unsigned char *rw, int32_t imm) {
	uint64_t w = word(imm);
	__asm__ volatile("movq %1, (%0)" ::"r"(rw), "r"(w) : "memory");
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	int fd = memfd_create("jit", 0);
	if (fd < 0 || ftruncate(fd, 8192) != 0)
		return 1;
	/* writable alias first, executable twin second */
	unsigned char *rw = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	unsigned char *rx = mmap(NULL, 8192, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED || rx == MAP_FAILED)
		return 1;
	printf("RX %p\n", (void *)rx);
	for (int i = 1; i <= 5; i++) {
		store(rw, i);
		check("store through the alias", rx, i);
	}
	/* the program asks for PROT_WRITE again */
	mprotect(rw, 8192, PROT_READ | PROT_WRITE);
	store(rw + 4096, 6);
	check("after mprotect RW", rx + 4096, 6);
	/* a copy through the alias (memcpy: maybe vector stores) */
	uint64_t w = word(7);
	memcpy(rw + 64, &w, 8);
	check("memcpy through the alias", rx + 64, 7);
	/* executable twin first, writable alias second */
	int fd2 = memfd_create("jit2", 0);
	if (fd2 < 0 || ftruncate(fd2, 4096) != 0)
		return 1;
	unsigned char *rx2 = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd2, 0);
	unsigned char *rw2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
	printf("RX %p\n", (void *)rx2);
	store(rw2, 8);
	check("twin first, alias second", rx2, 8);
	/* the twin goes away: the alias is plain memory again */
	munmap(rx, 8192);
	store(rw, 9);
	printf("%-32s %s\n", "store after the twin is gone", *(volatile uint32_t *)(rw + 1) == 9 ? "ok" : "BAD");
	printf(failures ? "FAILED\n" : "ok\n");
	return failures != 0;
}
