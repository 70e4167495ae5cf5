/*
 * seccomp-late: an append-and-run JIT in RWX memory that, after its first
 * phase, installs a seccomp filter of its own forbidding mprotect and
 * pkey_mprotect (a sandbox that locks itself down after start-up), then
 * goes on JIT-compiling and running code. It never calls mprotect itself,
 * so alone the filter changes nothing. Under a W^X recorder that injects
 * its mprotect calls into the program's thread, those calls would pass
 * through the filter; ptjit's protection proxy (made at the exec, with
 * the filters of then) does not (tracker/proxy_linux_amd64.go), and where
 * there is none ptjit emulates the stores (ownfilter_linux_amd64.go).
 *
 *   seccomp-late ROUNDS kill|trap|errno|allow [seccomp|prctl [fork]]
 *
 * The filter's action on mprotect: SECCOMP_RET_KILL_PROCESS,
 * SECCOMP_RET_TRAP (SIGSYS, default action) or SECCOMP_RET_ERRNO(EPERM).
 * With allow the filter is a sandbox's allowlist: the calls the program
 * makes from then on run, any other call kills the process (mprotect and
 * seccomp included), and the second phase JIT-compiles into a new RWX
 * mapping made after the filter.
 * It is installed with seccomp(2) (the default) or prctl(PR_SET_SECCOMP).
 * With fork, the second phase runs in a child forked after the filter
 * (which inherits it), and the parent exits with the child's status.
 * Prints the sum of every function's result after each phase.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLOT 16
#define AREA (16 * 4096)

static unsigned char *area;
static int nfun;

static uint64_t phase(int rounds)
{
	uint64_t sum = 0;
	for (int r = 0; r < rounds && nfun < AREA / SLOT; r++) {
		unsigned char *p = area + (size_t)nfun * SLOT;
		uint32_t imm = (uint32_t)nfun * 3 + 5;
		p[0] = 0xb8; /* mov eax, imm32; ret */
		memcpy(p + 1, &imm, 4);
		p[5] = 0xc3;
		nfun++;
		for (int i = 0; i < nfun; i++) {
			uint32_t got = ((uint32_t(*)(void))(area + (size_t)i * SLOT))();
			if (got != (uint32_t)i * 3 + 5) {
				fprintf(stderr, "seccomp-late: function %d returned %u\n", i, got);
				exit(3);
			}
			sum += got;
		}
	}
	return sum;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: seccomp-late ROUNDS kill|trap|errno [seccomp|prctl [fork]]\n");
		return 2;
	}
	int use_prctl = argc > 3 && strcmp(argv[3], "prctl") == 0;
	if (argc > 3 && !use_prctl && strcmp(argv[3], "seccomp") != 0) {
		fprintf(stderr, "seccomp-late: %s: want seccomp or prctl\n", argv[3]);
		return 2;
	}
	int do_fork = argc > 4 && strcmp(argv[4], "fork") == 0;
	int rounds = atoi(argv[1]);
	uint32_t action;
	if (strcmp(argv[2], "kill") == 0)
		action = SECCOMP_RET_KILL_PROCESS;
	else if (strcmp(argv[2], "trap") == 0)
		action = SECCOMP_RET_TRAP;
	else if (strcmp(argv[2], "errno") == 0)
		action = SECCOMP_RET_ERRNO | EPERM;
	else if (strcmp(argv[2], "allow") == 0)
		action = SECCOMP_RET_ALLOW; /* the allowlist below */
	else {
		fprintf(stderr, "seccomp-late: %s: want kill, trap, errno or allow\n", argv[2]);
		return 2;
	}
	area = mmap(NULL, AREA, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	printf("phase 1 sum %llu\n", (unsigned long long)phase(rounds));
	/* the next function written but not run yet (a recorder that lets a
	 * page be written until code runs there has it writable, not
	 * executable, when the filter comes, and a fork child inherits it so) */
	if (nfun < AREA / SLOT) {
		unsigned char *p = area + (size_t)nfun * SLOT;
		uint32_t imm = (uint32_t)nfun * 3 + 5;
		p[0] = 0xb8;
		memcpy(p + 1, &imm, 4);
		p[5] = 0xc3;
	}
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_pkey_mprotect, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, action),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_filter allow[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 11, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_set_robust_list, 10, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mmap, 9, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_munmap, 8, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_brk, 7, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_newfstatat, 6, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fstat, 5, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_clone, 4, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_wait4, 3, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_exit_group, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigreturn, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof f / sizeof f[0], f};
	if (action == SECCOMP_RET_ALLOW)
		prog = (struct sock_fprog){sizeof allow / sizeof allow[0], allow};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    (use_prctl ? prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0)
		       : syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog))) {
		perror("seccomp");
		return 1;
	}
	if (do_fork) {
		fflush(stdout);
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid > 0) {
			int st;
			if (waitpid(pid, &st, 0) != pid) {
				perror("waitpid");
				return 1;
			}
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		}
	}
	if (action == SECCOMP_RET_ALLOW) {
		/* a new code area, mapped after the filter */
		area = mmap(NULL, AREA, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (area == MAP_FAILED)
			return 1;
		nfun = 0;
	}
	printf("phase 2 sum %llu\n", (unsigned long long)phase(rounds));
	fflush(stdout);
	return 0;
}
