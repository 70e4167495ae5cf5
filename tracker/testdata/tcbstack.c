// tcbstack: threads whose stacks, and so whose control blocks (glibc's
// struct pthread, at the top of the stack: the tid word the kernel sets at
// clone and clears at exit, the rseq area it updates whenever the thread
// returns to user mode), are writable and executable memory the program
// mapped itself (pthread_attr_setstack). Each thread writes a function
// into a buffer in its first frame, in the same page as its tid word,
// runs it, rewrites it, runs it again, and yields between (each return to
// the thread is an rseq update); after each run the kernel writes into the
// page (clock_gettime as a syscall), as it writes the control block
// there: it must not fail; and after the first run the page must be
// writable (/proc/self/maps), as the kernel may write it any time. main joins every thread and prints their
// results: pthread_join must wait for each (the kernel clears the tid word
// and wakes the joiner), and each result is known in advance.
//
// Where the first frame lies relative to the control block is glibc's
// business: main first probes stack tops at offsets 0, 64, 128... into a
// page, with threads that only report whether their buffer shares the
// page of their tid word, and uses the first top where it does (exit 2 if
// none does).
//
// Each thread also has the kernel write into its stack the ordinary ways
// (pipe, read, a signal frame). A last thread, on an ordinary stack, makes
// the page of its first frame writable and executable itself (as glibc
// does to every thread stack when it loads a library that needs an
// executable stack), runs code there and does the same.
//
// Output: "tcb page CODE_ADDR" per thread (in thread order), then
// "thread I: SUM" per thread, "selfexec: 7", then "ok".
#define _GNU_SOURCE
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { NTHREADS = 3, ROUNDS = 40, STACK = 256 << 10 };

static char maps[1 << 16];
static volatile sig_atomic_t signals;

static void onusr1(int sig) {
	(void)sig;
	signals++; // runs on the thread's stack: the kernel writes the frame there
}

// kernelWrites has the kernel write into the calling thread's stack the
// ways a program does: a syscall's output (pipe's descriptors, read's
// bytes) and a signal frame. It returns 0, or prints what failed.
static int kernelWrites(long id) {
	int fds[2];
	char buf[8];
	if (pipe(fds) != 0) {
		printf("thread %ld: pipe into its stack: %m\n", id);
		return -1;
	}
	if (write(fds[1], "hello", 5) != 5 || read(fds[0], buf, sizeof buf) != 5 || memcmp(buf, "hello", 5) != 0) {
		printf("thread %ld: read into its stack: %m\n", id);
		return -1;
	}
	close(fds[0]);
	close(fds[1]);
	int before = signals;
	pthread_kill(pthread_self(), SIGUSR1);
	if (signals != before + 1) {
		printf("thread %ld: no signal handled\n", id);
		return -1;
	}
	return 0;
}

// perms returns the permissions /proc/self/maps gives the mapping that
// holds a ("rwxp"; "????" if none does).
static const char *perms(const volatile void *a) {
	static char out[5] = "????";
	int fd = open("/proc/self/maps", O_RDONLY);
	ssize_t n = 0, r;
	while (fd >= 0 && n < (ssize_t)sizeof maps - 1 && (r = read(fd, maps + n, sizeof maps - 1 - n)) > 0)
		n += r;
	if (fd >= 0)
		close(fd);
	maps[n] = 0;
	memcpy(out, "????", 4);
	for (char *l = maps; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
		unsigned long lo, hi;
		char p[5];
		if (sscanf(l, "%lx-%lx %4s", &lo, &hi, p) == 3 && (uintptr_t)a >= lo && (uintptr_t)a < hi) {
			memcpy(out, p, 4);
			break;
		}
	}
	return out;
}

// tidWord returns the calling thread's tid word in its control block (the
// word the kernel sets at clone and clears at exit): the first int equal
// to the thread's id from the start of its struct pthread.
static const volatile int *tidWord(void) {
	const volatile int *p = (const volatile int *)pthread_self();
	int tid = (int)syscall(SYS_gettid);
	for (int i = 0; i < 1024; i++)
		if (p[i] == tid)
			return p + i;
	return NULL;
}

static void *worker(void *arg) {
	// The first local: right under the TLS block and the control block.
	volatile unsigned char code[64];
	long id = (long)arg, sum = 0;
	int inpage = ((uintptr_t)code >> 12) == ((uintptr_t)tidWord() >> 12);
	if (id == 0)
		return (void *)(long)inpage; // a probe (see main)
	if (!inpage) {
		fprintf(stderr, "thread %ld: code at %p is not in the page of its tid word %p\n",
		        id, (void *)code, (void *)tidWord());
		exit(2);
	}
	printf("tcb page %p\n", (void *)code);
	fflush(stdout);
	for (int i = 0; i < ROUNDS; i++) {
		int v = (int)id * 1000 + i;
		// The code has the kernel write into its own page first, as
		// the kernel may write the control block there any time:
		//	mov eax, SYS_clock_gettime; mov edi, CLOCK_MONOTONIC
		//	lea rsi, [rip+16]; syscall
		//	test rax, rax; jnz 1f; mov eax, v; 1: ret
		static const unsigned char tmpl[] = {
			0xb8, 0xe4, 0x00, 0x00, 0x00, 0xbf, 0x01, 0x00, 0x00, 0x00,
			0x48, 0x8d, 0x35, 0x10, 0x00, 0x00, 0x00, 0x0f, 0x05,
			0x48, 0x85, 0xc0, 0x75, 0x05, 0xb8, 0, 0, 0, 0, 0xc3,
		};
		memcpy((void *)code, tmpl, sizeof tmpl);
		memcpy((void *)(code + 25), &v, 4);
		__builtin___clear_cache((char *)code, (char *)code + sizeof tmpl);
		long r = ((long (*)(void))(uintptr_t)code)();
		if (r < 0) {
			printf("thread %ld: clock_gettime into the page, from the code there: %ld\n", id, r);
			fflush(stdout);
		}
		sum += (int)r;
		if (i == 0 && kernelWrites(id) != 0)
			fflush(stdout);
		if (i == 0 && perms(code)[1] != 'w') {
			// The kernel must be able to write it at any time.
			printf("thread %ld: the page of its control block is %s after running code there\n", id, perms(code));
			fflush(stdout);
		}
		sched_yield();
	}
	return (void *)sum;
}

// start runs fn(arg) on a new RWX stack whose top is off bytes into a
// page, and returns its result.
static long start(void *(*fn)(void *), long arg, size_t off) {
	void *stk = mmap(NULL, STACK + 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (stk == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	pthread_attr_t a;
	pthread_t t;
	void *r;
	pthread_attr_init(&a);
	pthread_attr_setstack(&a, stk, STACK - 4096 + off);
	if (pthread_create(&t, &a, fn, (void *)arg) != 0 || pthread_join(t, &r) != 0) {
		perror("pthread_create/join");
		exit(1);
	}
	pthread_attr_destroy(&a);
	return (long)r;
}

// selfexec runs on an ordinary (not executable) stack and makes the page
// of its first frame, where its control block is, writable and executable
// itself (as glibc does to every thread stack when a library that needs
// an executable stack is loaded), then runs code there and has the kernel
// write there.
static void *selfexec(void *arg) {
	volatile unsigned char code[64];
	(void)arg;
	uintptr_t page = (uintptr_t)code & ~(uintptr_t)4095;
	if (mprotect((void *)page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) != 0) {
		printf("selfexec: mprotect: %m\n");
		return (void *)-1;
	}
	// The kernel writes the page made executable before any code ran
	// there (after, a page of stack that ran code is W^X's code, whose
	// kernel writes fail, unless it holds the thread's control words).
	if (kernelWrites(99) != 0)
		return (void *)-1;
	static const unsigned char ret7[] = {0xb8, 7, 0, 0, 0, 0xc3}; // mov eax, 7; ret
	memcpy((void *)code, ret7, sizeof ret7);
	__builtin___clear_cache((char *)code, (char *)code + sizeof ret7);
	long r = ((long (*)(void))(uintptr_t)code)();
	sched_yield();
	return (void *)r;
}

int main(void) {
	signal(SIGUSR1, onusr1);
	size_t off = 0;
	while (off < 4096 && start(worker, 0, off) == 0)
		off += 64;
	if (off == 4096) {
		fprintf(stderr, "no stack top puts the first frame in the control block's page\n");
		return 2;
	}
	for (long i = 1; i <= NTHREADS; i++) {
		long want = 0, got = start(worker, i, off);
		for (int k = 0; k < ROUNDS; k++)
			want += i * 1000 + k;
		printf("thread %ld: %ld%s\n", i, got, got == want ? "" : " (wrong)");
	}
	pthread_t t;
	void *r;
	if (pthread_create(&t, NULL, selfexec, NULL) != 0 || pthread_join(t, &r) != 0) {
		perror("pthread_create/join");
		return 1;
	}
	printf("selfexec: %ld\n", (long)r);
	printf("ok\n");
	return 0;
}
