/*
 * floor — the least a recorder of JIT code must do, for the benchmark
 * harness's floor rows (cmd/ptjit-bench): stop the program at every mprotect,
 * pkey_mprotect or mmap that adds PROT_EXEC, copy the range (mprotect) with
 * one process_vm_readv before the program resumes, and nothing else.
 *
 *   floor trace  -- PROG ARGS...   seccomp SECCOMP_RET_TRACE + a ptrace loop
 *   floor notif  -- PROG ARGS...   seccomp SECCOMP_RET_USER_NOTIF: the child
 *                                  installs the filter with
 *                                  SECCOMP_FILTER_FLAG_NEW_LISTENER and passes
 *                                  the listener to floor over a unix socket
 *                                  (SCM_RIGHTS) before its execve; floor
 *                                  answers SECCOMP_USER_NOTIF_FLAG_CONTINUE
 *   floor wx     -- PROG ARGS...   trace, plus the least W^X in batch mode
 *                                  (see run_wx): a write into code a fault,
 *                                  its page made writable and not executable
 *                                  by an injected mprotect; the next fetch
 *                                  there a fault, the page copied and made
 *                                  executable and not writable again
 *   floor wxpoll -- PROG ARGS...   wx, polling for each stop before it
 *                                  blocks (as ptjit's tracer does)
 *
 * The filter returns the action only when the prot argument (arg 2) has
 * PROT_EXEC; every other call runs at native speed. The copy is taken at
 * the syscall's entry (the JIT wrote the bytes before asking for exec);
 * an mmap is stopped (and counted) but not copied, as its address is not
 * known before it runs. Threads and children are followed (trace: the
 * ptrace options; notif: the filter is inherited).
 *
 * floor exits with the program's status (a signal death is re-raised on
 * itself) and prints one line on stderr:
 *   "floor: MODE N stops, B bytes copied"
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_FILTER_FLAG_NEW_LISTENER
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)
#endif

static unsigned long stops, copied;
static unsigned long wx_writes, wx_fetches, wx_injected;
static char *buf;
static size_t bufcap;

static void die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(125);
}

/* copy reads [addr, addr+len) of pid, as a recorder snapshots a version. */
static void copy(pid_t pid, uint64_t addr, uint64_t len)
{
	if (len > (64u << 20))
		len = 64u << 20;
	if (len > bufcap) {
		free(buf);
		bufcap = len;
		buf = malloc(bufcap);
		if (!buf)
			die("malloc");
	}
	struct iovec local = {buf, len}, remote = {(void *)addr, len};
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
	if (n > 0)
		copied += (unsigned long)n;
}

/* install_filter: mprotect/pkey_mprotect/mmap with PROT_EXEC in arg 2 →
 * action; everything else is allowed. Returns seccomp(2)'s result. */
static int install_filter(uint32_t action, unsigned flags)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xc000003e /* AUDIT_ARCH_X86_64 */, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pkey_mprotect, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		die("PR_SET_NO_NEW_PRIVS");
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
}

/* finish exits as the program did. */
static void finish(const char *mode, int status)
{
	fprintf(stderr, "floor: %s %lu stops, %lu bytes copied", mode, stops, copied);
	if (strncmp(mode, "wx", 2) == 0)
		fprintf(stderr, ", %lu write faults, %lu fetch faults, %lu injected", wx_writes, wx_fetches, wx_injected);
	fputc('\n', stderr);
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
	}
	exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

/* start_traced runs argv under ptrace (options opts) with the filter
 * returning SECCOMP_RET_TRACE, and returns its pid, running. */
static pid_t start_traced(char **argv, long opts)
{
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		if (ptrace(PTRACE_TRACEME, 0, 0, 0))
			die("PTRACE_TRACEME");
		raise(SIGSTOP);
		if (install_filter(SECCOMP_RET_TRACE, 0))
			die("seccomp");
		execvp(argv[0], argv);
		die(argv[0]);
	}
	int status;
	if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status))
		die("waitpid");
	if (ptrace(PTRACE_SETOPTIONS, child, 0, opts))
		die("PTRACE_SETOPTIONS");
	ptrace(PTRACE_CONT, child, 0, 0);
	return child;
}

#define TRACE_OPTS                                                                                                     \
	(PTRACE_O_EXITKILL | PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |  \
	 PTRACE_O_TRACEEXEC)

/* wx_poll: floor wxpoll polls (waitpid WNOHANG and sched_yield, up to
 * 250 µs) before it blocks, as ptjit's tracer does while stops come close
 * together: on a VM whose idle CPUs halt, a wake-up of a sleeping CPU
 * costs more than the stop. */
static int wx_poll;

static pid_t wx_wait(pid_t pid, int *status)
{
	if (wx_poll) {
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (;;) {
			pid_t r = waitpid(pid, status, __WALL | WNOHANG);
			if (r != 0)
				return r;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) > 250000)
				break;
			sched_yield();
		}
	}
	return waitpid(pid, status, __WALL);
}

/* next_stop waits for the next stop of any tracee and returns its pid;
 * exits on the way are consumed (the program's status kept in
 * *child_status); 0 when no tracee is left. */
static pid_t next_stop(pid_t child, int *status, int *child_status)
{
	for (;;) {
		pid_t pid = wx_wait(-1, status);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECHILD)
				return 0;
			die("waitpid");
		}
		if (WIFEXITED(*status) || WIFSIGNALED(*status)) {
			if (pid == child)
				*child_status = *status;
			continue;
		}
		return pid;
	}
}

static int run_trace(char **argv)
{
	pid_t child = start_traced(argv, TRACE_OPTS);
	int status, child_status = 0;
	pid_t pid;
	while ((pid = next_stop(child, &status, &child_status)) > 0) {
		int sig = WSTOPSIG(status), event = (unsigned)status >> 16;
		if (event == PTRACE_EVENT_SECCOMP) {
			struct user_regs_struct r;
			stops++;
			if (ptrace(PTRACE_GETREGS, pid, 0, &r) == 0 && r.orig_rax != SYS_mmap)
				copy(pid, r.rdi, r.rsi);
			ptrace(PTRACE_CONT, pid, 0, 0);
			continue;
		}
		if (event != 0 || sig == SIGSTOP || sig == SIGTRAP) {
			/* clone/fork/exec events, a new thread's first SIGSTOP */
			ptrace(PTRACE_CONT, pid, 0, 0);
			continue;
		}
		ptrace(PTRACE_CONT, pid, 0, sig);
	}
	finish("trace", child_status);
	return 0;
}

static int recv_fd(int sock)
{
	char dummy;
	struct iovec iov = {&dummy, 1};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
	if (recvmsg(sock, &m, 0) != 1)
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (!c || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof fd);
	return fd;
}

static void send_fd(int sock, int fd)
{
	char dummy = 0;
	struct iovec iov = {&dummy, 1};
	union {
		char b[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof fd);
	if (sendmsg(sock, &m, 0) != 1)
		die("sendmsg");
}

static int run_notif(char **argv)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		die("socketpair");
	pid_t child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		close(sv[0]);
		int lfd = install_filter(SECCOMP_RET_USER_NOTIF, SECCOMP_FILTER_FLAG_NEW_LISTENER);
		if (lfd < 0)
			die("seccomp(NEW_LISTENER)");
		send_fd(sv[1], lfd);
		close(lfd);
		close(sv[1]);
		execvp(argv[0], argv);
		die(argv[0]);
	}
	close(sv[1]);
	int lfd = recv_fd(sv[0]);
	if (lfd < 0) {
		int status;
		waitpid(child, &status, 0);
		fprintf(stderr, "floor: no listener from the child\n");
		exit(125);
	}
	close(sv[0]);
	struct seccomp_notif_sizes sz;
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz))
		die("SECCOMP_GET_NOTIF_SIZES");
	struct seccomp_notif *req = calloc(1, sz.seccomp_notif < sizeof *req ? sizeof *req : sz.seccomp_notif);
	struct seccomp_notif_resp *resp =
		calloc(1, sz.seccomp_notif_resp < sizeof *resp ? sizeof *resp : sz.seccomp_notif_resp);
	for (;;) {
		struct pollfd p = {lfd, POLLIN, 0};
		if (poll(&p, 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p.revents & POLLIN) {
			memset(req, 0, sz.seccomp_notif);
			if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_RECV, req)) {
				if (errno == EINTR || errno == ENOENT)
					continue;
				die("SECCOMP_IOCTL_NOTIF_RECV");
			}
			stops++;
			if (req->data.nr != SYS_mmap)
				copy(req->pid, req->data.args[0], req->data.args[1]);
			memset(resp, 0, sz.seccomp_notif_resp);
			resp->id = req->id;
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			if (ioctl(lfd, SECCOMP_IOCTL_NOTIF_SEND, resp) && errno != ENOENT)
				die("SECCOMP_IOCTL_NOTIF_SEND");
			continue;
		}
		if (p.revents & (POLLHUP | POLLERR))
			break; /* every task using the filter is gone */
	}
	int status;
	while (waitpid(child, &status, 0) < 0)
		if (errno != EINTR)
			die("waitpid");
	finish("notif", status);
	return 0;
}


/*
 * floor wx: the least a recorder must do to see stores into code, in
 * W^X's batch mode, with nothing of ptjit's (no database, no emulation,
 * no kernel-write handling, no aliases, one held signal a thread):
 *
 *   - an mprotect/pkey_mprotect/mmap asking for PROT_WRITE|PROT_EXEC gets
 *     PROT_EXEC taken away at its seccomp stop (its range, or an mmap's
 *     result read at its exit stop, is then W^X's: every page starts
 *     writable, as ptjit starts fresh memory); any other exec-adding call
 *     is copied as in trace mode, and its pages, where W^X's, count as code;
 *   - a SIGSEGV (SEGV_ACCERR) in W^X memory is consumed: a fetch (the
 *     address within 16 bytes after RIP) copies the page and makes it
 *     R|X, a store makes it R|W; each an mprotect injected into the
 *     faulting thread (registers saved, RIP at a syscall instruction of
 *     the vdso, one PTRACE_SINGLESTEP, registers restored);
 *   - fork children inherit their parent's W^X memory, exec forgets it.
 */
#define WX_PROCS 64
#define WX_RANGES 256

struct wx_range {
	uint64_t start, end;
	uint8_t *code; /* one byte a page: 1 executable (code), 0 writable */
};

struct wx_proc {
	pid_t tgid; /* 0: free */
	uint64_t sysinsn;
	int nr;
	struct wx_range r[WX_RANGES];
};

static struct wx_proc wx_procs[WX_PROCS];

static struct wx_proc *wx_proc(pid_t tgid, int make)
{
	struct wx_proc *free_ = NULL;
	for (int i = 0; i < WX_PROCS; i++) {
		if (wx_procs[i].tgid == tgid)
			return &wx_procs[i];
		if (!wx_procs[i].tgid && !free_)
			free_ = &wx_procs[i];
	}
	if (!make || !free_)
		return NULL;
	memset(free_, 0, sizeof *free_);
	free_->tgid = tgid;
	return free_;
}

static void wx_forget(struct wx_proc *p)
{
	for (int i = 0; i < p->nr; i++)
		free(p->r[i].code);
	memset(p, 0, sizeof *p);
}

/* tgid_of reads TID's thread group from /proc (cached for the last few). */
static pid_t tgid_of(pid_t tid)
{
	static pid_t ctid[64], ctg[64];
	unsigned h = (unsigned)tid % 64;
	if (ctid[h] == tid)
		return ctg[h];
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", tid);
	FILE *f = fopen(path, "r");
	pid_t tg = tid;
	if (f) {
		while (fgets(line, sizeof line, f))
			if (sscanf(line, "Tgid: %d", &tg) == 1)
				break;
		fclose(f);
	}
	ctid[h] = tid;
	ctg[h] = tg;
	return tg;
}

/* wx_find returns the range holding addr, or NULL. */
static struct wx_range *wx_find(struct wx_proc *p, uint64_t addr)
{
	for (int i = 0; p && i < p->nr; i++)
		if (addr >= p->r[i].start && addr < p->r[i].end)
			return &p->r[i];
	return NULL;
}

/* wx_add makes [start, end) W^X memory, every page writable (code 0);
 * ranges it overlaps are cut away first. */
static void wx_add(struct wx_proc *p, uint64_t start, uint64_t end)
{
	for (int i = 0; i < p->nr; i++) {
		struct wx_range *r = &p->r[i];
		if (r->end <= start || r->start >= end)
			continue;
		/* the minimal case: drop an overlapping range whole */
		free(r->code);
		p->r[i] = p->r[--p->nr];
		i--;
	}
	if (p->nr == WX_RANGES || end <= start)
		return;
	struct wx_range *r = &p->r[p->nr++];
	r->start = start;
	r->end = end;
	r->code = calloc((end - start) >> 12, 1);
	if (!r->code)
		die("calloc");
}

/* wx_mark sets the pages of [start, end) that are W^X memory to code. */
static void wx_mark(struct wx_proc *p, uint64_t start, uint64_t end)
{
	for (int i = 0; p && i < p->nr; i++) {
		struct wx_range *r = &p->r[i];
		uint64_t a = start > r->start ? start : r->start, b = end < r->end ? end : r->end;
		for (; a < b; a += 4096)
			r->code[(a - r->start) >> 12] = 1;
	}
}

/* wx_sysinsn finds a syscall instruction (0f 05) in pid's vdso. */
static uint64_t wx_sysinsn(struct wx_proc *p, pid_t pid)
{
	if (p->sysinsn)
		return p->sysinsn;
	char path[64], line[512];
	snprintf(path, sizeof path, "/proc/%d/maps", pid);
	FILE *f = fopen(path, "r");
	uint64_t lo = 0, hi = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof line, f))
		if (strstr(line, "[vdso]")) {
			sscanf(line, "%lx-%lx", &lo, &hi);
			break;
		}
	fclose(f);
	if (!hi || hi - lo > (1 << 20))
		return 0;
	unsigned char *b = malloc(hi - lo);
	struct iovec local = {b, hi - lo}, remote = {(void *)lo, hi - lo};
	if (b && process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)(hi - lo))
		for (uint64_t i = 0; i + 1 < hi - lo; i++)
			if (b[i] == 0x0f && b[i + 1] == 0x05) {
				p->sysinsn = lo + i;
				break;
			}
	free(b);
	return p->sysinsn;
}

/* wx_protect runs mprotect(page, 4096, prot) in the stopped thread tid,
 * whose registers are saved. A signal that stops the step is kept in
 * *held (the latest one) for the thread's resume. */
static void wx_protect(pid_t tid, uint64_t insn, struct user_regs_struct *saved, uint64_t page, int prot, int *held)
{
	struct user_regs_struct r = *saved;
	r.rip = insn;
	r.rax = SYS_mprotect;
	r.orig_rax = (uint64_t)-1;
	r.rdi = page;
	r.rsi = 4096;
	r.rdx = (uint64_t)prot;
	if (ptrace(PTRACE_SETREGS, tid, 0, &r))
		return;
	wx_injected++;
	for (int tries = 0; tries < 64; tries++) {
		int status;
		if (ptrace(PTRACE_SINGLESTEP, tid, 0, 0))
			return;
		while (wx_wait(tid, &status) < 0)
			if (errno != EINTR)
				return;
		if (!WIFSTOPPED(status))
			return;
		int sig = WSTOPSIG(status);
		if ((status >> 16) != 0)
			continue; /* an event stop: step again */
		if (sig != SIGTRAP) {
			*held = sig;
			continue;
		}
		struct user_regs_struct got;
		if (ptrace(PTRACE_GETREGS, tid, 0, &got) == 0 && got.rip == insn + 2)
			break;
	}
	ptrace(PTRACE_SETREGS, tid, 0, saved);
}

static int run_wx(char **argv)
{
	pid_t child = start_traced(argv, TRACE_OPTS | PTRACE_O_TRACESYSGOOD);
	int status, child_status = 0;
	pid_t pid;
	while ((pid = next_stop(child, &status, &child_status)) > 0) {
		int sig = WSTOPSIG(status), event = (unsigned)status >> 16;
		if (event == PTRACE_EVENT_SECCOMP) {
			struct user_regs_struct r;
			stops++;
			if (ptrace(PTRACE_GETREGS, pid, 0, &r)) {
				ptrace(PTRACE_CONT, pid, 0, 0);
				continue;
			}
			struct wx_proc *p = wx_proc(tgid_of(pid), 1);
			uint64_t len = (r.rsi + 4095) & ~4095ull;
			if ((r.rdx & (PROT_WRITE | PROT_EXEC)) == (PROT_WRITE | PROT_EXEC) && p) {
				r.rdx &= ~(uint64_t)PROT_EXEC;
				ptrace(PTRACE_SETREGS, pid, 0, &r);
				if (r.orig_rax != SYS_mmap) {
					wx_add(p, r.rdi, r.rdi + len);
					ptrace(PTRACE_CONT, pid, 0, 0);
					continue;
				}
				/* an mmap: its address at the exit stop */
				ptrace(PTRACE_SYSCALL, pid, 0, 0);
				while (waitpid(pid, &status, __WALL) < 0)
					if (errno != EINTR)
						die("waitpid");
				if (WIFSTOPPED(status) && WSTOPSIG(status) == (SIGTRAP | 0x80) &&
				    ptrace(PTRACE_GETREGS, pid, 0, &r) == 0 && r.rax < (uint64_t)-4095)
					wx_add(p, r.rax, r.rax + len);
				if (WIFSTOPPED(status))
					ptrace(PTRACE_CONT, pid, 0, 0);
				continue;
			}
			if (r.orig_rax != SYS_mmap) {
				copy(pid, r.rdi, r.rsi);
				wx_mark(p, r.rdi, r.rdi + len);
			}
			ptrace(PTRACE_CONT, pid, 0, 0);
			continue;
		}
		if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK) {
			unsigned long c;
			struct wx_proc *p = wx_proc(tgid_of(pid), 0);
			if (p && ptrace(PTRACE_GETEVENTMSG, pid, 0, &c) == 0 && event == PTRACE_EVENT_FORK) {
				struct wx_proc *q = wx_proc((pid_t)c, 1);
				for (int i = 0; q && i < p->nr; i++) {
					uint64_t n = (p->r[i].end - p->r[i].start) >> 12;
					q->r[i] = p->r[i];
					q->r[i].code = malloc(n);
					if (!q->r[i].code)
						die("malloc");
					memcpy(q->r[i].code, p->r[i].code, n);
					q->nr = i + 1;
				}
			}
			ptrace(PTRACE_CONT, pid, 0, 0);
			continue;
		}
		if (event == PTRACE_EVENT_EXEC) {
			struct wx_proc *p = wx_proc(tgid_of(pid), 0);
			if (p)
				wx_forget(p);
			ptrace(PTRACE_CONT, pid, 0, 0);
			continue;
		}
		if (event != 0 || sig == SIGSTOP || sig == SIGTRAP || sig == (SIGTRAP | 0x80)) {
			ptrace(PTRACE_CONT, pid, 0, 0);
			continue;
		}
		if (sig == SIGSEGV) {
			siginfo_t si;
			struct wx_proc *p = wx_proc(tgid_of(pid), 0);
			struct wx_range *r;
			struct user_regs_struct regs;
			if (p && ptrace(PTRACE_GETSIGINFO, pid, 0, &si) == 0 && si.si_code == SEGV_ACCERR &&
			    (r = wx_find(p, (uint64_t)si.si_addr)) && ptrace(PTRACE_GETREGS, pid, 0, &regs) == 0) {
				uint64_t addr = (uint64_t)si.si_addr, page = addr & ~4095ull;
				uint64_t insn = wx_sysinsn(p, pid);
				int held = 0, fetch = addr >= regs.rip && addr < regs.rip + 16;
				uint8_t *code = &r->code[(page - r->start) >> 12];
				stops++;
				if (insn && fetch && !*code) {
					wx_fetches++;
					copy(pid, page, 4096);
					wx_protect(pid, insn, &regs, page, PROT_READ | PROT_EXEC, &held);
					*code = 1;
					ptrace(PTRACE_CONT, pid, 0, held);
					continue;
				}
				if (insn && !fetch && *code) {
					wx_writes++;
					wx_protect(pid, insn, &regs, page, PROT_READ | PROT_WRITE, &held);
					*code = 0;
					ptrace(PTRACE_CONT, pid, 0, held);
					continue;
				}
			}
		}
		ptrace(PTRACE_CONT, pid, 0, sig);
	}
	finish(wx_poll ? "wxpoll" : "wx", child_status);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--") != 0) {
		fprintf(stderr, "usage: floor trace|notif|wx|wxpoll -- PROG ARGS...\n");
		return 2;
	}
	if (strcmp(argv[1], "trace") == 0)
		return run_trace(argv + 3);
	if (strcmp(argv[1], "notif") == 0)
		return run_notif(argv + 3);
	if (strcmp(argv[1], "wx") == 0)
		return run_wx(argv + 3);
	if (strcmp(argv[1], "wxpoll") == 0) {
		wx_poll = 1;
		return run_wx(argv + 3);
	}
	fprintf(stderr, "floor: mode %s: want trace, notif, wx or wxpoll\n", argv[1]);
	return 2;
}
