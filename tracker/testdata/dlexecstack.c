// dlexecstack LIB: threads keep having the kernel write into their stacks
// (pipe and read into a stack buffer, a signal frame) while main loads
// LIB, a library that needs an executable stack (built with -z execstack:
// its nested function's trampoline runs on the caller's stack). glibc then
// makes every thread's stack, and main's (mprotect with PROT_GROWSDOWN),
// writable and executable; the trampoline runs on main's stack. Every
// thread must go on working, and main prints the library's result and the
// threads' counts.
//
// Output: "libfn(41) = 42", "threads ok", then "ok".
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum { NTHREADS = 3 };

static atomic_int stop;
static __thread volatile int handled;

static void onusr1(int sig) {
	(void)sig;
	handled++;
}

static void *worker(void *arg) {
	long rounds = 0;
	(void)arg;
	while (!atomic_load(&stop) || rounds < 3) {
		int fds[2];
		char buf[8];
		if (pipe(fds) != 0) {
			printf("pipe into the stack: %m\n");
			return (void *)-1;
		}
		if (write(fds[1], "hi", 2) != 2 || read(fds[0], buf, sizeof buf) != 2 || memcmp(buf, "hi", 2) != 0) {
			printf("read into the stack: %m\n");
			return (void *)-1;
		}
		close(fds[0]);
		close(fds[1]);
		int before = handled;
		pthread_kill(pthread_self(), SIGUSR1);
		if (handled != before + 1) {
			printf("no signal handled\n");
			return (void *)-1;
		}
		rounds++;
		usleep(500);
	}
	return (void *)0;
}

int main(int argc, char **argv) {
	if (argc != 2) {
		fprintf(stderr, "usage: dlexecstack LIB\n");
		return 2;
	}
	signal(SIGUSR1, onusr1);
	pthread_t t[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	usleep(10000);
	void *h = dlopen(argv[1], RTLD_NOW);
	if (h == NULL) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	int (*libfn)(int) = (int (*)(int))dlsym(h, "libfn");
	printf("libfn(41) = %d\n", libfn(41));
	usleep(10000);
	atomic_store(&stop, 1);
	int bad = 0;
	for (int i = 0; i < NTHREADS; i++) {
		void *r;
		pthread_join(t[i], &r);
		bad += r != NULL;
	}
	printf(bad ? "threads failed\n" : "threads ok\n");
	printf("ok\n");
	return 0;
}
