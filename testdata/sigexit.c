/*
 * sigexit — a program that handles SIGINT, SIGTERM and SIGHUP as servers
 * do: it prints "ready", and on the first of those signals waits 300 ms
 * (so a second delivery of it would be counted), prints
 * "caught SIG COUNT" (COUNT: the signals handled) and exits 3. With the
 * argument "ignore" it ignores SIGINT instead and prints "ignoring".
 * Runs for at most 30 s.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t got, count;

static void handler(int sig)
{
	if (!got)
		got = sig;
	count++;
}

int main(int argc, char **argv)
{
	int ignore = argc == 2 && strcmp(argv[1], "ignore") == 0;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	if (ignore) {
		signal(SIGINT, SIG_IGN);
	} else {
		sigaction(SIGINT, &sa, NULL);
	}
	printf(ignore ? "ignoring\n" : "ready\n");
	fflush(stdout);
	for (int i = 0; i < 3000 && !got; i++)
		usleep(10000);
	if (!got) {
		printf("no signal\n");
		return 1;
	}
	struct timespec ts = {0, 300 * 1000 * 1000};
	while (nanosleep(&ts, &ts) != 0)
		;
	printf("caught %s %d\n", strsignal(got), (int)count);
	return 3;
}
