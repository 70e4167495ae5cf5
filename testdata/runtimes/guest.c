/* qemu-user's guest, run by qemu-x86_64 (TCG translates it block by block
 * into host code). Built without libc (gcc -O2 -static -nostdlib
 * -fno-builtin): glibc's static start-up alone is thousands of blocks to
 * translate and, under soft PT, to step. Prints "qemu guest result N"
 * for the loop of every program in testdata/runtimes, n from argv[1]. */

static long sys3(long n, long a, long b, long c) {
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}

static long step(long x, long i) { return (x * 31 + i) % 1000003; }

static long run(long argc, char **argv) {
	long n = 0, acc = 7;
	if (argc > 1)
		for (const char *p = argv[1]; *p >= '0' && *p <= '9'; p++)
			n = n * 10 + (*p - '0');
	for (long i = 0; i < n; i++)
		acc = step(acc, i);
	char buf[64] = "qemu guest result ", tmp[24];
	int len = 18, k = 0;
	do
		tmp[k++] = '0' + acc % 10;
	while ((acc /= 10) > 0);
	while (k > 0)
		buf[len++] = tmp[--k];
	buf[len++] = '\n';
	return sys3(1, 1, (long)buf, len) == len ? 0 : 1;
}

/* The kernel starts _start with argc at (%rsp), argv after it. */
__attribute__((used)) static void start_c(long *sp) {
	sys3(60, run(sp[0], (char **)(sp + 1)), 0, 0);
}

__asm__(".globl _start\n_start:\n\tmov %rsp, %rdi\n\tand $-16, %rsp\n\tcall start_c\n\thlt\n");
