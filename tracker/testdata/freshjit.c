/*
 * freshjit: a JIT's first use of fresh memory. It maps 4 pages RWX
 * (private, anonymous: zeros), writes 64 functions "mov eax, imm32; ret"
 * (b8 imm32 c3) into page 0 and 64 into page 2 (function k of page p at
 * p*4096 + k*64 returns p*1000 + k), byte by byte, then calls every one.
 * Then it patches the first function of page 0 to return 7777 with one
 * 8-byte store and calls it again. Then it moves the mapping elsewhere
 * and grows it to 8 pages (mremap, MREMAP_FIXED), writes function k = 0
 * returning 3000 into page 3 (moved, never written) and returning 5000
 * into page 5 (grown), and runs both. Last, a forked child writes one
 * returning 6000 into page 6 and runs it; the parent checks its status.
 *
 * Prints "buf ADDR" and "moved ADDR" first, then one line per check and
 * "ok".
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*fn)(void);

static void emit(volatile unsigned char *p, int32_t imm) {
	p[0] = 0xb8;
	p[1] = imm & 0xff;
	p[2] = (imm >> 8) & 0xff;
	p[3] = (imm >> 16) & 0xff;
	p[4] = (imm >> 24) & 0xff;
	p[5] = 0xc3;
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	unsigned char *buf = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return 1;
	printf("buf %p\n", (void *)buf);
	int bad = 0;
	for (int p = 0; p <= 2; p += 2)
		for (int k = 0; k < 64; k++)
			emit(buf + p * 4096 + k * 64, p * 1000 + k);
	for (int p = 0; p <= 2; p += 2)
		for (int k = 0; k < 64; k++)
			if (((fn)(buf + p * 4096 + k * 64))() != p * 1000 + k)
				bad++;
	printf("fresh code %s\n", bad ? "BAD" : "ok");
	unsigned char b[8] = {0xb8, 0, 0, 0, 0, 0xc3, 0x90, 0x90};
	int32_t imm = 7777;
	memcpy(b + 1, &imm, 4);
	uint64_t w;
	memcpy(&w, b, 8);
	__asm__ volatile("movq %1, (%0)" ::"r"(buf), "r"(w) : "memory");
	int got = ((fn)buf)();
	printf("patched code %s\n", got == 7777 ? "ok" : "BAD");
	if (bad || got != 7777)
		return 1;

	unsigned char *to = mmap(NULL, 8 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (to == MAP_FAILED)
		return 1;
	unsigned char *nb = mremap(buf, 4 * 4096, 8 * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	if (nb != to)
		return 1;
	printf("moved %p\n", (void *)nb);
	emit(nb + 3 * 4096, 3000);
	emit(nb + 5 * 4096, 5000);
	got = ((fn)nb)() + ((fn)(nb + 3 * 4096))() + ((fn)(nb + 5 * 4096))() + ((fn)(nb + 2 * 4096 + 64))();
	printf("moved and grown code %s\n", got == 7777 + 3000 + 5000 + 2001 ? "ok" : "BAD");
	if (got != 7777 + 3000 + 5000 + 2001)
		return 1;

	pid_t pid = fork();
	if (pid == 0) {
		emit(nb + 6 * 4096, 6000);
		_exit(((fn)(nb + 6 * 4096))() == 6000 ? 0 : 1);
	}
	int status;
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		printf("forked code BAD\n");
		return 1;
	}
	printf("forked code ok\n");
	printf("ok\n");
	return 0;
}
