/*
 * attach-jit — the attach tests' program (ptjit run -p): a JIT that runs
 * for a while, alone, so that ptjit can attach to it mid-run and detach
 * again, and whose output and status must be those of a run never traced.
 *
 *   attach-jit N MS STATUS [FILL [rwx|rwxprot]]
 *       N versions of one page, one every MS milliseconds: make the page
 *       RW, write version i (mov eax, i; ret; then bytes that depend on
 *       i, up to byte FILL of the page: 4096 by default; a smaller FILL
 *       makes a version cheap to single-step), make it RX (one manifest
 *       line), call it (it must return i). With rwx the page is mapped
 *       writable and executable once, and each version is written
 *       into it with plain stores (a "write" manifest line), no
 *       mprotect: the W^X case. With rwxprot each version is made
 *       executable with mprotect(PROT_READ|PROT_WRITE|PROT_EXEC)
 *       instead of PROT_READ|PROT_EXEC (W^X rewrites such calls).
 *       A second thread sleeps meanwhile (ptjit seizes every thread).
 *       With $ATTACH_JIT_FILTER (kill, trap, errno or other), a seccomp
 *       filter of the program's own, on both threads (TSYNC), answers
 *       mprotect with SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_TRAP or
 *       SECCOMP_RET_ERRNO(EPERM), or (other) kills only kexec_load:
 *       installed before the first version, as a sandbox does at
 *       start-up, or with $ATTACH_JIT_FILTER_AT=K before version K (a
 *       filter installed while a tracer may be attached). With rwx the
 *       program makes no mprotect itself, so alone the filter changes
 *       nothing.
 *       Then it prints "versions N sum S" and exits with STATUS; when it
 *       received SIGRTMIN+1 (a handler counts them: real-time signals
 *       queue, so none is lost alone), also "signals K".
 *
 * The manifest ($PTJIT_MANIFEST) has one line per version, in order, so
 * a test reads how far the program is from the number of its lines. With
 * $ATTACH_JIT_TIMES, the program also writes there, for each version,
 * "I NS ADDR": CLOCK_MONOTONIC read right after the mprotect that made
 * version I executable at ADDR returned, so a test can name exactly the versions made
 * while ptjit was attached (its recording holds the attach and detach
 * times on the same clock).
 */
#include "manifest.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>

static volatile sig_atomic_t rt_count;

static void on_rt(int sig)
{
	(void)sig;
	rt_count++;
}

/* filter installs $ATTACH_JIT_FILTER's filter (see above) on every
 * thread. */
static void filter(const char *how)
{
	uint32_t nr = SYS_mprotect, act;
	if (strcmp(how, "kill") == 0)
		act = SECCOMP_RET_KILL_PROCESS;
	else if (strcmp(how, "trap") == 0)
		act = SECCOMP_RET_TRAP;
	else if (strcmp(how, "errno") == 0)
		act = SECCOMP_RET_ERRNO | EPERM;
	else if (strcmp(how, "other") == 0)
		nr = SYS_kexec_load, act = SECCOMP_RET_KILL_PROCESS;
	else
		mf_die("ATTACH_JIT_FILTER=%s: not kill, trap, errno or other", how);
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, act),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
		mf_die("seccomp: %s", strerror(errno));
}

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4 || argc > 6)
		mf_die("usage: attach-jit N MS STATUS [FILL [rwx]]");
	int rwx = argc == 6 && strcmp(argv[5], "rwx") == 0;
	int rwxprot = argc == 6 && strcmp(argv[5], "rwxprot") == 0;
	long n = atol(argv[1]), ms = atol(argv[2]);
	size_t fill = argc >= 5 ? (size_t)atol(argv[4]) : MF_PAGE;
	if (fill > MF_PAGE)
		mf_die("FILL %zu is over a page", fill);
	int status = atoi(argv[3]);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_rt;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN + 1, &sa, NULL);
	sigset_t rt;
	sigemptyset(&rt);
	sigaddset(&rt, SIGRTMIN + 1);
	pthread_sigmask(SIG_BLOCK, &rt, NULL); /* the sleeper inherits it blocked: the main thread takes them */
	pthread_t th;
	if (pthread_create(&th, NULL, sleeper, NULL) != 0)
		mf_die("pthread_create");
	pthread_sigmask(SIG_UNBLOCK, &rt, NULL);
	uint8_t *p = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE | (rwx ? PROT_EXEC : 0), 0);
	const char *how = getenv("ATTACH_JIT_FILTER"), *at = getenv("ATTACH_JIT_FILTER_AT");
	long filter_at = at && *at ? atol(at) : 0;
	if (how && *how && filter_at == 0)
		filter(how);
	int times = -1;
	const char *tp = getenv("ATTACH_JIT_TIMES");
	if (tp && (times = open(tp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644)) < 0)
		mf_die("%s: %s", tp, strerror(errno));
	long sum = 0;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	for (long i = 0; i < n; i++) {
		if (how && *how && filter_at > 0 && i == filter_at)
			filter(how);
		if (!rwx)
			mf_mprotect(p, MF_PAGE, PROT_READ | PROT_WRITE);
		p[0] = 0xb8; /* mov eax, imm32 */
		int32_t v = (int32_t)i;
		memcpy(p + 1, &v, 4);
		p[5] = 0xc3; /* ret */
		for (size_t j = 6; j < fill; j++)
			p[j] = (uint8_t)(i * 131 + j * 7);
		if (rwx) {
			mf_lock();
			mf_log(p, MF_PAGE, "write");
			mf_unlock();
		} else {
			mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC | (rwxprot ? PROT_WRITE : 0));
		}
		if (times >= 0) {
			struct timespec now;
			clock_gettime(CLOCK_MONOTONIC, &now);
			char line[64];
			int len = snprintf(line, sizeof line, "%ld %lld %p\n", i,
					   (long long)now.tv_sec * 1000000000LL + now.tv_nsec, (void *)p);
			if (write(times, line, (size_t)len) != len)
				mf_die("write: %s", strerror(errno));
		}
		long r = ((long (*)(void))p)();
		if (r != i)
			mf_die("version %ld returned %ld", i, r);
		sum += r;
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (ms % 1000) * 1000000L;
	}
	printf("versions %ld sum %ld\n", n, sum);
	if (rt_count > 0)
		printf("signals %d\n", (int)rt_count);
	return status;
}
