/*
 * wxprobe: stores of every kind into RWX code, each followed by running the
 * code, plus a fault of the program's own. Under W^X every store must land
 * exactly as without ptjit and the program's own SIGSEGV must reach its
 * handler with the original address. Prints one line per check and "ok".
 *
 * Each store writes "mov eax, imm32; ret" (b8 xx xx xx xx c3) at some
 * offset of a 2-page RWX buffer; calling it must return imm.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*fn)(void);
static unsigned char *buf;
static int failures;

static void check(const char *what, int off, int want) {
	int got = ((fn)(buf + off))();
	printf("%-28s %s\n", what, got == want ? "ok" : "BAD");
	if (got != want)
		failures++;
}

static uint64_t word(int32_t imm) {
	unsigned char b[8] = {0xb8, 0, 0, 0, 0, 0xc3, 0x90, 0x90};
	memcpy(b + 1, &imm, 4);
	uint64_t w;
	memcpy(&w, b, 8);
	return w;
}

static sigjmp_buf jb;
static void *fault_addr;
static void on_segv(int sig, siginfo_t *si, void *uc) {
	(void)sig;
	(void)uc;
	fault_addr = si->si_addr;
	siglongjmp(jb, 1);
}

int main(void) {
	setvbuf(stdout, NULL, _IONBF, 0);
	buf = mmap(NULL, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return 1;
	/* 1. plain 8-byte mov */
	uint64_t w = word(1);
	__asm__ volatile("movq %1, (%0)" ::"r"(buf), "r"(w) : "memory");
	check("mov 8 bytes", 0, 1);
	/* 2. byte stores */
	volatile unsigned char *vb = buf; /* six separate byte stores */
	vb[0x40] = 0xb8; vb[0x41] = 2; vb[0x42] = 0; vb[0x43] = 0; vb[0x44] = 0; vb[0x45] = 0xc3;
	check("byte stores", 0x40, 2);
	/* 3. rep stosb fills, then a rep movsb copies code in */
	unsigned char code[8];
	w = word(3);
	memcpy(code, &w, 8);
	void *d = buf + 0x80;
	size_t n = 64;
	__asm__ volatile("rep stosb" : "+D"(d), "+c"(n) : "a"(0xcc) : "memory");
	void *s = code;
	d = buf + 0x80;
	n = 8;
	__asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
	check("rep stosb + rep movsb", 0x80, 3);
	/* 4. a 16-byte SSE store */
	unsigned char x[16] __attribute__((aligned(16)));
	w = word(4);
	memcpy(x, &w, 8);
	memcpy(x + 8, &w, 8);
	__asm__ volatile("movdqu (%1), %%xmm0\n\tmovdqu %%xmm0, (%0)" ::"r"(buf + 0xc0), "r"(x) : "xmm0", "memory");
	check("movdqu xmm", 0xc0, 4);
	/* 5. an atomic exchange (not emulated: single-stepped) */
	uint64_t v = word(5);
	__asm__ volatile("xchgq %0, (%1)" : "+r"(v) : "r"(buf + 0x100) : "memory");
	check("xchg (stepped)", 0x100, 5);
	/* 6. a store spanning the two pages */
	w = word(6);
	memcpy((void *)(buf + 4093), &w, 8);
	check("store across pages", 4093, 6);
	/* 7. many stores to one page (auto switches it to batch) */
	for (int i = 0; i < 40; i++) {
		w = word(100 + i);
		__asm__ volatile("movq %1, (%0)" ::"r"(buf + 0x200), "r"(w) : "memory");
		check("repeated stores", 0x200, 100 + i);
	}
	/* 8. a forked child stores into the inherited RWX buffer and runs it */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		w = word(7);
		__asm__ volatile("movq %1, (%0)" ::"r"(buf + 0x300), "r"(w) : "memory");
		_exit(((fn)(buf + 0x300))() == 7 ? 0 : 1);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("%-28s %s\n", "store in a forked child", WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ok" : "BAD");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		failures++;
	/* 9. the program's own fault: a store into read-only memory */
	struct sigaction sa = {0};
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, NULL);
	unsigned char *ro = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (sigsetjmp(jb, 1) == 0) {
		*(volatile unsigned char *)(ro + 8) = 1;
		printf("own fault: no fault BAD\n");
		failures++;
	} else {
		printf("own fault at +%ld %s\n", (long)((unsigned char *)fault_addr - ro), fault_addr == ro + 8 ? "ok" : "BAD");
	}
	printf(failures ? "FAILED\n" : "ok\n");
	return failures != 0;
}
