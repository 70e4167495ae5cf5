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
#include <unistd.h>

#ifndef SECCOMP_FILTER_FLAG_NEW_LISTENER
#define SECCOMP_FILTER_FLAG_NEW_LISTENER (1UL << 3)
#endif

static unsigned long stops, copied;
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
	fprintf(stderr, "floor: %s %lu stops, %lu bytes copied\n", mode, stops, copied);
	if (WIFSIGNALED(status)) {
		signal(WTERMSIG(status), SIG_DFL);
		raise(WTERMSIG(status));
	}
	exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

static int run_trace(char **argv)
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
	long opts = PTRACE_O_EXITKILL | PTRACE_O_TRACESECCOMP | PTRACE_O_TRACECLONE |
		    PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC;
	if (ptrace(PTRACE_SETOPTIONS, child, 0, opts))
		die("PTRACE_SETOPTIONS");
	ptrace(PTRACE_CONT, child, 0, 0);
	int child_status = 0;
	for (;;) {
		pid_t pid = waitpid(-1, &status, __WALL);
		if (pid < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ECHILD)
				break;
			die("waitpid");
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			if (pid == child)
				child_status = status;
			continue;
		}
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

int main(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--") != 0) {
		fprintf(stderr, "usage: floor trace|notif -- PROG ARGS...\n");
		return 2;
	}
	if (strcmp(argv[1], "trace") == 0)
		return run_trace(argv + 3);
	if (strcmp(argv[1], "notif") == 0)
		return run_notif(argv + 3);
	fprintf(stderr, "floor: mode %s: want trace or notif\n", argv[1]);
	return 2;
}
