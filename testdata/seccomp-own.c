// seccomp-own: a program with its own seccomp filter, to check that its
// filter means under ptjit what it means alone (TestSeccompOwnFilter).
//
// Usage: seccomp-own          the filter test (below); deterministic output
//        seccomp-own ptrace   PTRACE_TRACEME in a child, PTRACE_SEIZE of a
//                             child: succeed alone, fail with EPERM under a
//                             tracer (ptjit), so the output differs
//
// The filter (installed after PR_SET_NO_NEW_PRIVS, with a listener):
//   getppid                      → RET_TRACE|42   (no tracer: ENOSYS)
//   mprotect, len 3 pages        → RET_TRACE|0    (ptjit's filter traces it too)
//   getpid(0x5ecc)               → RET_ERRNO|EXDEV
//   mprotect, len 4 pages        → RET_ERRNO|EDOM (ptjit traces it too)
//   syscall 999                  → RET_TRAP|7     (SIGSYS; the handler sets the result)
//   munmap, len 5 pages          → RET_TRAP|9     (ptjit traces it too)
//   getsid(0x5ecc)               → RET_USER_NOTIF (the listener thread answers 4242)
//   getsid(0x5ecd)               → RET_USER_NOTIF (the listener sends the caller an
//                                  ignored signal before it answers 4243)
//   mprotect, len 6 pages        → RET_USER_NOTIF (the listener lets it continue)
// and prints what each call returned, errno, and what the handlers saw.
// Exit status 0 when every result is the one the kernel gives a program
// without a tracer.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define PG 4096
#define MAGIC 0x5ecc
#define BOGUS 999

#define LD(off) BPF_STMT(BPF_LD | BPF_W | BPF_ABS, (off))
#define RET(v) BPF_STMT(BPF_RET | BPF_K, (v))
#define IF_NOT(v, skip) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (v), 0, (skip))
#define NR offsetof(struct seccomp_data, nr)
#define ARG(i) offsetof(struct seccomp_data, args[i]) // low half (little-endian)

static struct sock_filter filter[] = {
	LD(offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	RET(SECCOMP_RET_ALLOW),

	LD(NR), IF_NOT(__NR_getppid, 1),
	RET(SECCOMP_RET_TRACE | 42),

	LD(NR), IF_NOT(BOGUS, 1),
	RET(SECCOMP_RET_TRAP | 7),

	LD(NR), IF_NOT(__NR_getpid, 4),
	LD(ARG(0)), IF_NOT(MAGIC, 1), RET(SECCOMP_RET_ERRNO | EXDEV),
	RET(SECCOMP_RET_ALLOW),

	LD(NR), IF_NOT(__NR_mprotect, 8),
	LD(ARG(1)),
	IF_NOT(3 * PG, 1), RET(SECCOMP_RET_TRACE | 0),
	IF_NOT(4 * PG, 1), RET(SECCOMP_RET_ERRNO | EDOM),
	IF_NOT(6 * PG, 1), RET(SECCOMP_RET_USER_NOTIF),
	RET(SECCOMP_RET_ALLOW),

	LD(NR), IF_NOT(__NR_munmap, 4),
	LD(ARG(1)), IF_NOT(5 * PG, 1), RET(SECCOMP_RET_TRAP | 9),
	RET(SECCOMP_RET_ALLOW),

	LD(NR), IF_NOT(__NR_getsid, 6),
	LD(ARG(0)),
	IF_NOT(MAGIC, 1), RET(SECCOMP_RET_USER_NOTIF),
	IF_NOT(MAGIC + 1, 1), RET(SECCOMP_RET_USER_NOTIF),
	RET(SECCOMP_RET_ALLOW),

	RET(SECCOMP_RET_ALLOW),
};

static int failed;

static void expect(int ok, const char *what) {
	if (!ok) {
		printf("  WRONG: %s\n", what);
		failed = 1;
	}
}

// What the SIGSYS handler saw, printed after the call returns.
static volatile struct {
	int n, signo, code, syscall, data;
	unsigned arch;
} sys;

static void on_sigsys(int sig, siginfo_t *si, void *ctx) {
	ucontext_t *uc = ctx;
	sys.n++;
	sys.signo = sig;
	sys.code = si->si_code;
	sys.syscall = si->si_syscall;
	sys.data = si->si_errno; // SECCOMP_RET_DATA
	sys.arch = si->si_arch;
	uc->uc_mcontext.gregs[REG_RAX] = 1000 + si->si_errno; // the call's result
}

static void report(const char *what, long ret, int err) {
	printf("%-42s ret=%ld errno=%s\n", what, ret, ret == -1 ? strerrorname_np(err) : "-");
}

static void report_sys(void) {
	printf("%-42s SIGSYS n=%d signo=%d code=%d syscall=%d data=%d arch=%#x\n", "  handler:", sys.n, sys.signo,
	       sys.code, sys.syscall, sys.data, sys.arch);
}

// protection of the page at p, from /proc/self/maps: "r-x", "rw-", ...
static const char *prot_of(void *p) {
	static char perm[5];
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long a = (unsigned long)p, s, e;
	strcpy(perm, "none");
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%lx-%lx %4s", &s, &e, perm) == 3 && s <= a && a < e)
			break;
		else
			strcpy(perm, "none");
	if (f)
		fclose(f);
	perm[3] = 0;
	return perm;
}

// The listener: answers getsid(MAGIC) with 4242, getsid(MAGIC+1) with 4243
// after sending the caller SIGURG (ignored by default: alone the signal is
// discarded; under a tracer it interrupts the wait, the kernel drops the
// notification and restarts the call with a new id, so SEND fails with
// ENOENT and the listener answers the new one, as seccomp_unotify(2) says
// a supervisor must), and lets mprotect continue.
static int listener;
static pid_t main_tid;
static int restarts;

static void *supervise(void *arg) {
	(void)arg;
	struct seccomp_notif req;
	struct seccomp_notif_resp resp;
	int kicked = 0;
	for (;;) {
		memset(&req, 0, sizeof req);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
			if (errno == EINTR || errno == ENOENT)
				continue;
			return NULL; // the listener closed: done
		}
		memset(&resp, 0, sizeof resp);
		resp.id = req.id;
		if (req.data.nr == __NR_getsid && req.data.args[0] == MAGIC) {
			resp.val = 4242;
		} else if (req.data.nr == __NR_getsid && req.data.args[0] == MAGIC + 1) {
			if (!kicked++) {
				syscall(SYS_tgkill, getpid(), main_tid, SIGURG);
				usleep(100 * 1000);
			}
			resp.val = 4243;
		} else if (req.data.nr == __NR_mprotect) {
			resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
		} else {
			resp.error = -ENOTSUP;
		}
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0) {
			if (errno == ENOENT) {
				restarts++; // the call was interrupted; it comes again
				continue;
			}
			perror("SECCOMP_IOCTL_NOTIF_SEND");
			exit(2);
		}
	}
}

static int filter_test(void) {
	struct sigaction sa = {.sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO};
	sigaction(SIGSYS, &sa, NULL);
	main_tid = gettid();

	// Pages for the mprotect/munmap cases, mapped before the filter.
	char *m = mmap(NULL, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		perror("mmap");
		return 2;
	}
	memset(m, 0xc3, 16 * PG);

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
		perror("PR_SET_NO_NEW_PRIVS");
		return 2;
	}
	struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
	listener = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (listener < 0) {
		perror("seccomp(SECCOMP_SET_MODE_FILTER, NEW_LISTENER)");
		return 2;
	}
	pthread_t sup;
	if (pthread_create(&sup, NULL, supervise, NULL) != 0) {
		perror("pthread_create");
		return 2;
	}

	long r;
	errno = 0;
	r = syscall(SYS_getppid);
	report("RET_TRACE getppid:", r, errno);
	expect(r == -1 && errno == ENOSYS, "RET_TRACE without a tracer fails with ENOSYS");

	errno = 0;
	r = syscall(SYS_mprotect, m, 3 * PG, PROT_READ | PROT_EXEC);
	report("RET_TRACE mprotect 3 pages RX:", r, errno);
	printf("%-42s %s\n", "  page now:", prot_of(m));
	expect(r == -1 && errno == ENOSYS && strcmp(prot_of(m), "rw-") == 0, "RET_TRACE mprotect is not executed");

	errno = 0;
	r = syscall(SYS_getpid, MAGIC);
	report("RET_ERRNO getpid(0x5ecc):", r, errno);
	expect(r == -1 && errno == EXDEV, "RET_ERRNO|EXDEV");
	expect(syscall(SYS_getpid, 0) == getpid(), "getpid(0) allowed");

	errno = 0;
	r = syscall(SYS_mprotect, m, 4 * PG, PROT_READ | PROT_EXEC);
	report("RET_ERRNO mprotect 4 pages RX:", r, errno);
	printf("%-42s %s\n", "  page now:", prot_of(m));
	expect(r == -1 && errno == EDOM && strcmp(prot_of(m), "rw-") == 0, "RET_ERRNO mprotect is not executed");

	errno = 0;
	r = syscall(BOGUS, 1, 2, 3);
	report("RET_TRAP syscall 999:", r, errno);
	report_sys();
	expect(r == 1007 && sys.n == 1 && sys.syscall == BOGUS && sys.data == 7 && sys.code == 1 /* SYS_SECCOMP */ &&
		       sys.arch == AUDIT_ARCH_X86_64,
	       "RET_TRAP: SIGSYS with si_syscall, the data, the handler's result");

	errno = 0;
	r = syscall(SYS_munmap, m, 5 * PG);
	report("RET_TRAP munmap 5 pages:", r, errno);
	report_sys();
	printf("%-42s %s\n", "  page now:", prot_of(m));
	expect(r == 1009 && sys.n == 2 && sys.syscall == __NR_munmap && sys.data == 9 && strcmp(prot_of(m), "rw-") == 0,
	       "RET_TRAP munmap is not executed");

	errno = 0;
	r = syscall(SYS_getsid, MAGIC);
	report("RET_USER_NOTIF getsid(0x5ecc):", r, errno);
	expect(r == 4242, "the listener's answer");

	errno = 0;
	r = syscall(SYS_getsid, MAGIC + 1);
	report("RET_USER_NOTIF getsid(0x5ecd) + SIGURG:", r, errno);
	expect(r == 4243, "the listener's answer after an ignored signal");

	errno = 0;
	r = syscall(SYS_mprotect, m + 8 * PG, 6 * PG, PROT_READ | PROT_EXEC);
	report("RET_USER_NOTIF mprotect 6 pages CONTINUE:", r, errno);
	printf("%-42s %s\n", "  page now:", prot_of(m + 8 * PG));
	expect(r == 0 && strcmp(prot_of(m + 8 * PG), "r-x") == 0, "continued mprotect is executed");

	if (getenv("SECCOMP_OWN_DEBUG"))
		fprintf(stderr, "seccomp-own: listener saw %d interrupted notifications\n", restarts);
	printf("%s\n", failed ? "FAIL" : "ok");
	return failed;
}

// ptrace_test: what a debugger does. Alone both calls succeed; under a
// tracer both fail with EPERM (a process has one tracer).
static int ptrace_test(void) {
	fflush(stdout);
	pid_t c = fork();
	if (c == 0) {
		errno = 0;
		long r = ptrace(PTRACE_TRACEME, 0, 0, 0);
		report("PTRACE_TRACEME:", r, errno);
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(c, &st, 0);

	int p[2];
	if (pipe(p) != 0)
		return 2;
	c = fork();
	if (c == 0) {
		char b;
		close(p[1]);
		while (read(p[0], &b, 1) < 0 && errno == EINTR)
			;
		_exit(0);
	}
	close(p[0]);
	errno = 0;
	long r = ptrace(PTRACE_SEIZE, c, 0, 0);
	report("PTRACE_SEIZE child:", r, errno);
	fflush(stdout);
	if (r == 0)
		ptrace(PTRACE_DETACH, c, 0, 0);
	close(p[1]);
	waitpid(c, &st, 0);
	return 0;
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "ptrace") == 0)
		return ptrace_test();
	return filter_test();
}
