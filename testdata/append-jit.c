/*
 * append-jit: an append-and-run JIT in RWX memory (each round writes one
 * more function after the ones that ran and calls them all), as Guile's
 * and qemu-user's JITs do, in two phases: for the tests of the protection
 * proxy (tracker/proxy_linux_amd64.go) and of testdata/floor's wx mode.
 * Under W^X each round is a write fault on a page that ran and a fetch
 * fault on a page that was written: two protection changes.
 *
 *   append-jit ROUNDS [SYNC]
 *
 * After the first phase it prints what it sees of its own process: its
 * children (waitpid(-1, __WALL) must say ECHILD: the proxy is not the
 * program's child) and its threads (/proc/self/task: one). With SYNC, it
 * then creates SYNC.ready and waits (up to 20 s) for SYNC to exist before
 * the second phase, so that a test can act in between. Each phase prints
 * the sum of every function's result, which the test compares with a run
 * alone (and which the program checks against its own arithmetic).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SLOT 16
#define AREA (64 * 4096)

static unsigned char *area;
static int nfun;

/* emit writes function n: mov eax, imm32; ret (imm = n*7+1). */
static void emit(int n)
{
	unsigned char *p = area + (size_t)n * SLOT;
	uint32_t imm = (uint32_t)n * 7 + 1;
	p[0] = 0xb8;
	memcpy(p + 1, &imm, 4);
	p[5] = 0xc3;
	for (int i = 6; i < SLOT; i++)
		p[i] = 0xcc;
}

static uint64_t phase(int rounds)
{
	uint64_t sum = 0;
	for (int r = 0; r < rounds && nfun < AREA / SLOT; r++) {
		emit(nfun++);
		for (int i = 0; i < nfun; i++) {
			uint32_t (*f)(void) = (uint32_t(*)(void))(area + (size_t)i * SLOT);
			uint32_t got = f();
			if (got != (uint32_t)i * 7 + 1) {
				fprintf(stderr, "append-jit: function %d returned %u\n", i, got);
				exit(3);
			}
			sum += got;
		}
	}
	return sum;
}

static int tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	int n = 0;
	struct dirent *e;
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 200;
	area = mmap(NULL, AREA, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	printf("phase 1 sum %llu\n", (unsigned long long)phase(rounds));
	int st;
	pid_t w = waitpid(-1, &st, WNOHANG | __WALL);
	printf("children: %s\n", w < 0 && errno == ECHILD ? "none" : "some");
	printf("threads: %d\n", tasks());
	fflush(stdout);
	if (argc > 2) {
		char ready[4096];
		snprintf(ready, sizeof ready, "%s.ready", argv[2]);
		int fd = open(ready, O_CREAT | O_WRONLY, 0644);
		if (fd < 0) {
			perror(ready);
			return 1;
		}
		close(fd);
		struct timespec ms = {0, 1000000};
		for (int i = 0; access(argv[2], F_OK) != 0; i++) {
			if (i > 20000) {
				fprintf(stderr, "append-jit: %s never came\n", argv[2]);
				return 1;
			}
			nanosleep(&ms, NULL);
		}
	}
	printf("phase 2 sum %llu\n", (unsigned long long)phase(rounds));
	return 0;
}
