/*
 * forker — processes that JIT: fork, fork + exec, vfork + exec.
 *
 * The parent JITs a function, then
 *   1. fork()s a child that JITs its own function and exits 3;
 *   2. fork()s a child that execs ubpf-test (next to this binary);
 *   3. vfork()s a child that execs this program as "forker child 7", which
 *      JITs a function and exits 7;
 * waits for each in turn and JITs once more. Every process writes its own
 * manifest lines (with its pid) to the shared $PTJIT_MANIFEST.
 */
#include "jitlib.h"

#include <libgen.h>
#include <sys/wait.h>

static int64_t jit_and_call(int32_t a, int32_t b)
{
	uint8_t *code = jit_affine(1, a, b);
	int64_t v = ((affine_fn)code)(10);
	return v;
}

static void report(const char *what, pid_t pid)
{
	int st;
	if (waitpid(pid, &st, 0) != pid)
		mf_die("waitpid: %s", strerror(errno));
	if (WIFEXITED(st))
		printf("%s: exited %d\n", what, WEXITSTATUS(st));
	else
		printf("%s: killed by signal %d\n", what, WTERMSIG(st));
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "child") == 0) {
		int a = atoi(argv[2]);
		printf("exec'd child: f(10) = %lld\n", (long long)jit_and_call(a, 1));
		return a;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: forker\n");
		return 2;
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n < 0)
		mf_die("readlink /proc/self/exe: %s", strerror(errno));
	self[n] = 0;
	char dir[4096], ubpf[4200];
	snprintf(dir, sizeof dir, "%s", self);
	snprintf(ubpf, sizeof ubpf, "%s/ubpf-test", dirname(dir));

	printf("parent: f(10) = %lld\n", (long long)jit_and_call(5, 0));

	pid_t pid = fork();
	if (pid < 0)
		mf_die("fork: %s", strerror(errno));
	if (pid == 0) {
		printf("forked child: f(10) = %lld\n", (long long)jit_and_call(3, 2));
		fflush(stdout);
		_exit(3);
	}
	report("forked child", pid);

	pid = fork();
	if (pid < 0)
		mf_die("fork: %s", strerror(errno));
	if (pid == 0) {
		execl(ubpf, ubpf, (char *)NULL);
		fprintf(stderr, "exec %s: %s\n", ubpf, strerror(errno));
		_exit(127);
	}
	report("fork+exec ubpf-test", pid);

	pid = vfork();
	if (pid < 0)
		mf_die("vfork: %s", strerror(errno));
	if (pid == 0) {
		execl(self, self, "child", "7", (char *)NULL);
		_exit(127);
	}
	report("vfork+exec child", pid);

	printf("parent again: f(10) = %lld\n", (long long)jit_and_call(6, 4));
	return 0;
}
