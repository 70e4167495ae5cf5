/*
 * family: every way a program makes new tasks, each making code.
 *
 *   family            3 threads, a fork, a vfork+exec of "family child",
 *                     then exec of "family exec"
 *   family child|exec make one code buffer and exit 0
 *
 * Each code buffer is one page, mapped RW, filled with a tag byte, made RX
 * with mprotect; for each, a line "TAG ADDR PID TID" goes to stdout (one
 * write(2) per line, so processes never interleave within a line).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void code(int tag) {
	unsigned char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		exit(1);
	memset(p, tag, 4096);
	p[0] = 0xc3;
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0)
		exit(1);
	((void (*)(void))p)();
	char line[128];
	int n = snprintf(line, sizeof line, "%d %p %d %d\n", tag, (void *)p, getpid(), (int)syscall(SYS_gettid));
	if (write(1, line, n) != n)
		exit(1);
}

static void *thread(void *arg) {
	code((int)(long)arg);
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "child") == 0) {
		code(0x40);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "exec") == 0) {
		code(0x50);
		return 0;
	}
	code(0x10);
	pthread_t th[3];
	for (long i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, thread, (void *)(0x20 + i));
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	pid_t pid = fork();
	if (pid == 0) {
		code(0x30);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	pid = vfork();
	if (pid == 0) {
		execl("/proc/self/exe", argv[0], "child", (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	execl("/proc/self/exe", argv[0], "exec", (char *)NULL);
	return 127;
}
