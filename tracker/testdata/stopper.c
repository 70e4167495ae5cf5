/*
 * stopper: job control through ptjit. A child stops itself with SIGSTOP;
 * the parent must see it stopped (waitpid WUNTRACED), continue it with
 * SIGCONT and see it exit with status 3. A SIGUSR1 handler must run once;
 * the process then kills itself with the signal named by argv[1] (or exits
 * 0 when none is given).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_usr1(int sig) { (void)sig; got++; }

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	pid_t pid = fork();
	if (pid == 0) {
		raise(SIGSTOP);
		_exit(3);
	}
	int st;
	if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st) || WSTOPSIG(st) != SIGSTOP) {
		printf("child not seen stopped: %#x\n", st);
		return 1;
	}
	printf("child stopped\n");
	kill(pid, SIGCONT);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 3) {
		printf("child did not exit 3: %#x\n", st);
		return 1;
	}
	printf("child exited 3\n");
	signal(SIGUSR1, on_usr1);
	raise(SIGUSR1);
	printf("handler ran %d time(s)\n", (int)got);
	if (argc > 1) {
		int sig = atoi(argv[1]);
		signal(sig, SIG_DFL);
		raise(sig);
	}
	return 0;
}
