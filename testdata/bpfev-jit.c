/*
 * bpfev-jit — the BPF event source's test program (bpfev's tests): it
 * makes a JIT page executable with mprotect from a thread of its own,
 * through one syscall instruction whose return address it prints, so the
 * test can check what the kernel-side copy saw: the bytes, the thread, the
 * user IP, and the TSC around each call.
 *
 *   bpfev-jit toggle N      N versions of one page: write version i (RW),
 *                           mprotect RX, call it (it returns i), mprotect RW
 *   bpfev-jit fallback K    one mprotect RX of 8 pages that the kernel
 *                           cannot copy whole, for K =
 *                             present   all 8 pages written (too many for
 *                                       a small budget or a tiny ring)
 *                             absent    only page 0 written: pages 1..7
 *                                       were never touched
 *                           with a SIGUSR1 handler that records which
 *                           thread got the fallback signal and whether it
 *                           came before the code after the syscall ran
 *   bpfev-jit mremap        two pages (versions 0, 1) made RX, then moved
 *                           with mremap (MREMAP_MAYMOVE|MREMAP_FIXED);
 *                           and two RW pages moved the same way; prints
 *                           "exec 0 ADDR 0 0" for the RX pages' new
 *                           address and "moved ADDR" for the RW pages'
 *   bpfev-jit race N        N rounds of: map 16 pages RW at one address
 *                           (MAP_FIXED), write versions 16I..16I+15 into
 *                           them, mprotect RX, while a second thread
 *                           munmaps them in a loop (a write that faults
 *                           skips the round);
 *                           prints an exec line for each mprotect that
 *                           succeeded
 *   bpfev-jit pages N       the kernel's page cache, from the main thread
 *                           (the only one: the cache is for processes of
 *                           one thread): 4 pages (versions 0..3) made
 *                           RX as "exec 0"; then N rounds S = 1..N: RW,
 *                           the last byte of page S%4 set to S, RX as
 *                           "exec S"; then the range unmapped and mapped
 *                           anew with versions 100..103 (RX, "exec N+1"),
 *                           and once more with the same bytes ("exec
 *                           N+2")
 *
 * Protocol: it prints "ready PID", waits for a line on stdin (the test
 * adds the PID to the source meanwhile), runs, prints its results and
 * exits 0:
 *   ip ADDR                   the address after the syscall instruction
 *   tid TID                   the thread that makes the calls
 *   exec I ADDR TSC0 TSC1     version I made executable at ADDR, with the
 *                             TSC read right before and after the call
 *   signal TID CODE SEEN      the fallback signal: the thread it ran on,
 *                             its si_code, and 1 when it was handled before
 *                             the instruction after the syscall
 * Version I's bytes: mov eax, I; ret; then byte J = I*131 + J*7 + J/256
 * (mod 256) up to the page's end.
 */
#include "manifest.h"

#include <setjmp.h>
#include <signal.h>
#include <x86intrin.h>

#define PAGES_FALLBACK 8

/* raw_mprotect is mprotect through one syscall instruction, followed by
 * the global label bpfev_ret, and records in *seen whether the signal
 * handler ran before the instruction after the syscall. */
extern char bpfev_ret[];
static volatile int sig_count;
static volatile pid_t sig_tid;
static volatile int sig_code;

static __attribute__((noinline)) long raw_mprotect(void *addr, size_t len, int prot, int *seen)
{
	long ret;
	int before = sig_count, after;
	__asm__ volatile("syscall\n"
			 ".globl bpfev_ret\n"
			 "bpfev_ret:\n"
			 "\tmovl %[cnt], %[after]\n"
			 : "=a"(ret), [after] "=r"(after)
			 : "0"((long)SYS_mprotect), "D"(addr), "S"(len), "d"((long)prot), [cnt] "m"(sig_count)
			 : "rcx", "r11", "memory");
	if (seen)
		*seen = after != before;
	return ret;
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	sig_tid = (pid_t)syscall(SYS_gettid);
	sig_code = si->si_code;
	sig_count++;
}

static void fill(uint8_t *p, uint32_t i)
{
	p[0] = 0xb8;
	memcpy(p + 1, &i, 4);
	p[5] = 0xc3;
	for (size_t j = 6; j < MF_PAGE; j++)
		p[j] = (uint8_t)(i * 131 + j * 7 + j / 256);
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static int n_versions;
static const char *mode;

static void *toggle(void *arg)
{
	(void)arg;
	printf("tid %ld\n", syscall(SYS_gettid));
	uint8_t *p = mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	for (int i = 0; i < n_versions; i++) {
		fill(p, (uint32_t)i);
		_mm_lfence();
		uint64_t t0 = __rdtsc();
		_mm_lfence();
		long r = raw_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC, NULL);
		unsigned aux;
		uint64_t t1 = __rdtscp(&aux);
		_mm_lfence();
		if (r != 0) {
			errno = (int)-r;
			die("mprotect RX");
		}
		int (*fn)(void) = (int (*)(void))p;
		if (fn() != i) {
			fprintf(stderr, "version %d returned %d\n", i, fn());
			exit(1);
		}
		printf("exec %d %p %llu %llu\n", i, (void *)p, (unsigned long long)t0, (unsigned long long)t1);
		if (raw_mprotect(p, MF_PAGE, PROT_READ | PROT_WRITE, NULL) != 0)
			die("mprotect RW");
	}
	return NULL;
}

static void *fallback(void *arg)
{
	(void)arg;
	printf("tid %ld\n", syscall(SYS_gettid));
	size_t len = PAGES_FALLBACK * MF_PAGE;
	uint8_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	size_t touched = strcmp(mode, "absent") == 0 ? 1 : PAGES_FALLBACK;
	for (size_t k = 0; k < touched; k++)
		fill(p + k * MF_PAGE, (uint32_t)k);
	int seen = 0;
	long r = raw_mprotect(p, len, PROT_READ | PROT_EXEC, &seen);
	if (r != 0) {
		errno = (int)-r;
		die("mprotect RX");
	}
	printf("exec 0 %p 0 0\n", (void *)p);
	printf("signal %d %d %d\n", (int)sig_tid, sig_code, seen);
	return NULL;
}

static void *move(uint8_t *p)
{
	void *to = mmap(NULL, 2 * MF_PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (to == MAP_FAILED)
		die("mmap");
	void *q = mremap(p, 2 * MF_PAGE, 2 * MF_PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, to);
	if (q != to)
		die("mremap");
	return q;
}

static void *remap(void *arg)
{
	(void)arg;
	printf("tid %ld\n", syscall(SYS_gettid));
	uint8_t *p = mmap(NULL, 2 * MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *w = mmap(NULL, 2 * MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED || w == MAP_FAILED)
		die("mmap");
	fill(p, 0);
	fill(p + MF_PAGE, 1);
	fill(w, 2);
	fill(w + MF_PAGE, 3);
	if (mprotect(p, 2 * MF_PAGE, PROT_READ | PROT_EXEC) != 0)
		die("mprotect");
	printf("exec 0 %p 0 0\n", move(p));
	printf("moved %p\n", move(w));
	return NULL;
}

#define RACE_PAGES 16
static uint8_t *race_page;
static volatile int race_done;
static sigjmp_buf race_jmp;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(race_jmp, 1);
}

static void *race_unmapper(void *arg)
{
	(void)arg;
	while (!race_done) {
		munmap(race_page, RACE_PAGES * MF_PAGE);
		for (volatile int k = 0; k < 2000; k++)
			; /* a few microseconds: the reader keeps up with the events */
	}
	return NULL;
}

static void *race(void *arg)
{
	(void)arg;
	printf("tid %ld\n", syscall(SYS_gettid));
	race_page = mmap(NULL, RACE_PAGES * MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (race_page == MAP_FAILED)
		die("mmap");
	struct sigaction sa = {.sa_handler = on_segv, .sa_flags = SA_NODEFER};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		die("sigaction");
	pthread_t th;
	if (pthread_create(&th, NULL, race_unmapper, NULL) != 0)
		die("pthread_create");
	int faults = 0;
	for (volatile int i = 0; i < n_versions; i++) {
		if (sigsetjmp(race_jmp, 1)) {
			faults++; /* the page went away under the write */
			continue;
		}
		uint8_t *p = mmap(race_page, RACE_PAGES * MF_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		if (p == MAP_FAILED)
			die("mmap fixed");
		for (uint32_t k = 0; k < RACE_PAGES; k++)
			fill(p + k * MF_PAGE, (uint32_t)i * RACE_PAGES + k);
		if (raw_mprotect(p, RACE_PAGES * MF_PAGE, PROT_READ | PROT_EXEC, NULL) == 0)
			printf("exec %d %p 0 0\n", (int)i, (void *)p);
	}
	race_done = 1;
	pthread_join(th, NULL);
	fprintf(stderr, "bpfev-jit race: %d writes faulted\n", faults);
	return NULL;
}

#define PAGES_CACHED 4

static void pages_rx(uint8_t *p, int step)
{
	if (mprotect(p, PAGES_CACHED * MF_PAGE, PROT_READ | PROT_EXEC) != 0)
		die("mprotect RX");
	printf("exec %d %p 0 0\n", step, (void *)p);
}

static uint8_t *pages_map(uint8_t *at, uint32_t first)
{
	uint8_t *p = mmap(at, PAGES_CACHED * MF_PAGE, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED : 0), -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	for (uint32_t k = 0; k < PAGES_CACHED; k++)
		fill(p + k * MF_PAGE, first + k);
	return p;
}

static void *pages(void *arg)
{
	(void)arg;
	printf("tid %ld\n", syscall(SYS_gettid));
	uint8_t *p = pages_map(NULL, 0);
	pages_rx(p, 0);
	for (int s = 1; s <= n_versions; s++) {
		if (mprotect(p, PAGES_CACHED * MF_PAGE, PROT_READ | PROT_WRITE) != 0)
			die("mprotect RW");
		p[(s % PAGES_CACHED + 1) * MF_PAGE - 1] = (uint8_t)s;
		pages_rx(p, s);
	}
	for (int k = 1; k <= 2; k++) {
		if (munmap(p, PAGES_CACHED * MF_PAGE) != 0)
			die("munmap");
		pages_map(p, 100);
		pages_rx(p, n_versions + k);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 3 && !(argc == 2 && strcmp(argv[1], "mremap") == 0)) {
		fprintf(stderr, "usage: bpfev-jit toggle N | pages N | race N | fallback present|absent | mremap\n");
		return 2;
	}
	void *(*fn)(void *);
	if (strcmp(argv[1], "toggle") == 0) {
		n_versions = atoi(argv[2]);
		fn = toggle;
	} else if (strcmp(argv[1], "mremap") == 0) {
		fn = remap;
	} else if (strcmp(argv[1], "pages") == 0) {
		n_versions = atoi(argv[2]);
		fn = pages;
	} else if (strcmp(argv[1], "race") == 0) {
		n_versions = atoi(argv[2]);
		fn = race;
	} else if (strcmp(argv[1], "fallback") == 0 && (strcmp(argv[2], "present") == 0 || strcmp(argv[2], "absent") == 0)) {
		mode = argv[2];
		fn = fallback;
	} else {
		fprintf(stderr, "bpfev-jit: unknown mode %s\n", argv[1]);
		return 2;
	}
	struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL) != 0)
		die("sigaction");
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d\n", (int)getpid());
	char line[16];
	if (!fgets(line, sizeof line, stdin))
		die("stdin");
	if (fn == pages) {
		pages(NULL); /* one thread: the page cache is used */
	} else {
		pthread_t th;
		if (pthread_create(&th, NULL, fn, NULL) != 0)
			die("pthread_create");
		pthread_join(th, NULL);
	}
	printf("ip %p\n", (void *)bpfev_ret);
	return 0;
}
