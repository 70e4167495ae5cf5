/*
 * sigqueue-jit — signals with siginfo arrive while code is being patched.
 *
 * sigqueue-jit SIGNALS
 *
 * The main thread patches its RWX page byte by byte (under ptjit's W^X
 * every store is a fault ptjit handles, often by injecting an mprotect or
 * single-stepping the store), calls it, and flips a second JIT page
 * between RW and RX with mprotect. Meanwhile a second thread (which blocks
 * the signals itself) sends SIGNALS signals to it, one at a time, each
 * waiting for the last to be handled:
 *   - SIGUSR1 and SIGRTMIN with sigqueue (process-directed) and
 *     pthread_sigqueue (thread-directed), si_code SI_QUEUE, the sender's
 *     pid and uid, and a value: the signal's number in the sequence;
 *   - every 16th, SIGCHLD from the kernel: the sender forks a child that
 *     exits with status (number & 0x7f), si_code CLD_EXITED.
 * The handlers check every field against what was sent. A signal that is
 * not handled within 10 s is reported as lost (exit 3). Prints one line,
 * "signals N handled N bad 0 calls right" (bad counts wrong fields), and
 * exits 0 when every signal arrived with its own siginfo and every patched
 * call returned its value.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static pthread_t patcher;
static pid_t self;
static atomic_int expect = -1;	/* the number of the signal in flight */
static atomic_int handled;	/* signals handled */
static atomic_int bad;
static atomic_int done;

static void bad_field(const char *what, int n, long got, long want)
{
	char buf[160];
	int len = snprintf(buf, sizeof buf, "signal %d: %s %ld, want %ld\n", n, what, got, want);
	if (write(2, buf, len) < 0) {
		/* nothing to do */
	}
	atomic_fetch_add(&bad, 1);
}

static void on_queued(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	int n = atomic_load(&expect);
	int want = (n & 1) ? SIGRTMIN : SIGUSR1;
	if (sig != want || si->si_signo != want)
		bad_field("signo", n, si->si_signo, want);
	if (si->si_code != SI_QUEUE)
		bad_field("si_code", n, si->si_code, SI_QUEUE);
	if (si->si_pid != self)
		bad_field("si_pid", n, si->si_pid, self);
	if (si->si_uid != getuid())
		bad_field("si_uid", n, si->si_uid, getuid());
	if (si->si_value.sival_int != n)
		bad_field("si_value", n, si->si_value.sival_int, n);
	atomic_fetch_add(&handled, 1);
}

/* SIGCHLD's fields, checked by the sender once the handler ran (the child
 * can exit before fork returns its pid to the sender) */
static atomic_int chld_code, chld_pid, chld_status;

static void on_child(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	atomic_store(&chld_code, si->si_code);
	atomic_store(&chld_pid, si->si_pid);
	atomic_store(&chld_status, si->si_status);
	atomic_fetch_add(&handled, 1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *sender(void *arg)
{
	int count = *(int *)arg;
	sigset_t all;
	sigemptyset(&all);
	sigaddset(&all, SIGUSR1);
	sigaddset(&all, SIGRTMIN);
	sigaddset(&all, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (int n = 0; n < count; n++) {
		int before = atomic_load(&handled);
		atomic_store(&expect, n);
		pid_t c = 0;
		if (n % 16 == 15) {
			c = fork();
			if (c == 0)
				_exit(n & 0x7f);
		} else {
			int sig = (n & 1) ? SIGRTMIN : SIGUSR1;
			union sigval v = {.sival_int = n};
			int err = (n & 2) ? pthread_sigqueue(patcher, sig, v) : (sigqueue(self, sig, v) ? errno : 0);
			if (err) {
				fprintf(stderr, "sigqueue %d: %s\n", n, strerror(err));
				exit(2);
			}
		}
		double deadline = now() + 10;
		while (atomic_load(&handled) == before) {
			if (now() > deadline) {
				fprintf(stderr, "signal %d was not handled in 10 s (lost)\n", n);
				exit(3);
			}
			struct timespec ts = {0, 20000};
			nanosleep(&ts, NULL);
		}
		if (c > 0) {
			int st;
			waitpid(c, &st, 0);
			if (atomic_load(&chld_code) != CLD_EXITED)
				bad_field("SIGCHLD si_code", n, atomic_load(&chld_code), CLD_EXITED);
			if (atomic_load(&chld_pid) != c)
				bad_field("SIGCHLD si_pid", n, atomic_load(&chld_pid), c);
			if (atomic_load(&chld_status) != (n & 0x7f))
				bad_field("SIGCHLD si_status", n, atomic_load(&chld_status), n & 0x7f);
		}
	}
	atomic_store(&done, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sigqueue-jit SIGNALS\n");
		return 2;
	}
	int count = atoi(argv[1]);
	self = getpid();
	patcher = pthread_self();

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sa.sa_sigaction = on_queued;
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGRTMIN, &sa, NULL);
	sa.sa_sigaction = on_child;
	sigaction(SIGCHLD, &sa, NULL);

	/* mov eax, imm32; ret — patched one byte at a time */
	uint8_t *rwx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *flip = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rwx == MAP_FAILED || flip == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	rwx[0] = 0xb8;
	rwx[5] = 0xc3;
	flip[0] = 0xb8;
	flip[5] = 0xc3;

	pthread_t th;
	if (pthread_create(&th, NULL, sender, &count)) {
		perror("pthread_create");
		return 2;
	}
	long calls = 0;
	int wrong = 0;
	for (uint32_t v = 1; !atomic_load(&done); v++) {
		volatile uint8_t *p = rwx;
		for (int i = 0; i < 4; i++)
			p[1 + i] = (uint8_t)(v >> (8 * i));
		if (((uint32_t (*)(void))rwx)() != v)
			wrong++;
		memcpy(flip + 1, &v, 4);
		mprotect(flip, 4096, PROT_READ | PROT_EXEC);
		if (((uint32_t (*)(void))flip)() != v)
			wrong++;
		mprotect(flip, 4096, PROT_READ | PROT_WRITE);
		calls += 2;
	}
	pthread_join(th, NULL);
	int b = atomic_load(&bad);
	printf("signals %d handled %d bad %d calls %s\n", count, atomic_load(&handled), b, wrong ? "wrong" : "right");
	return b || wrong ? 1 : 0;
}
