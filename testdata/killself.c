/*
 * killself — kills itself with the signal given as argument (default
 * action, no core dump), so a runner must report 128+N.
 *
 * Usage: killself SIGNUM
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int sig = argc == 2 ? atoi(argv[1]) : 0;
	if (sig <= 0 || sig >= 64) {
		fprintf(stderr, "usage: killself SIGNUM\n");
		return 2;
	}
	struct rlimit no_core = {0, 0};
	setrlimit(RLIMIT_CORE, &no_core);
	signal(sig, SIG_DFL);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	printf("killing myself with signal %d\n", sig);
	fflush(stdout);
	kill(getpid(), sig);
	printf("still alive after signal %d\n", sig);
	return 99;
}
