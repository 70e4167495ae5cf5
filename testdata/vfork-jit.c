/*
 * vfork-jit — a vfork child that runs the parent's JIT code.
 *
 * The parent JITs f(x) = 3x + 4 and calls it; it then vfork()s a child
 * that calls the same code (the child shares the parent's memory, and the
 * parent waits in the kernel until the child exits) and exits with
 * f(5) = 19; the parent prints both and calls the code once more.
 *
 * Under --soft-filter=jit the child enters JIT code while the parent is in
 * its vfork wait, which PTRACE_INTERRUPT cannot end: opening the shared
 * space must not wait for the parent (it hung before).
 */
#include "jitlib.h"

#include <sys/wait.h>

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint8_t *code = jit_affine(1, 3, 4);
	affine_fn f = (affine_fn)code;
	long long v = (long long)f(10);
	pid_t pid = vfork();
	if (pid < 0)
		mf_die("vfork: %s", strerror(errno));
	if (pid == 0)
		_exit((int)f(5) & 0xff);
	int st;
	if (waitpid(pid, &st, 0) != pid)
		mf_die("waitpid: %s", strerror(errno));
	printf("parent: f(10) = %lld; vfork child: exit %d\n", v, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	printf("parent again: f(1) = %lld\n", (long long)f(1));
	return 0;
}
