/*
 * jit-end — a thread that ends inside JIT code.
 *
 * jit-end fault: calls a JIT function twice; the second call stores to
 * NULL (xor %eax,%eax; mov %eax,(%rax)) and the program dies of SIGSEGV
 * (no handler): status 139, the store never completes.
 * jit-end spin: prints "spinning" and loops in JIT code (dec %rdi; jnz)
 * until killed.
 *
 * A tracer must end the trace before the instruction the thread was at:
 * a decoder must not run on to the next branch (the ret after the faulting
 * store, the jnz of the loop).
 */
#include "manifest.h"

int main(int argc, char **argv)
{
	static const uint8_t fault[] = {
		0x48, 0x85, 0xff, /* test %rdi,%rdi */
		0x74, 0x04,       /* jz +4 */
		0x31, 0xc0,       /* xor %eax,%eax */
		0x89, 0x00,       /* mov %eax,(%rax) */
		0xc3,             /* ret */
	};
	static const uint8_t spin[] = {
		0x48, 0xff, 0xcf, /* dec %rdi */
		0x75, 0xfb,       /* jnz -5 */
		0xc3,             /* ret */
	};
	int spinning = argc > 1 && strcmp(argv[1], "spin") == 0;
	if (argc < 2 || (!spinning && strcmp(argv[1], "fault") != 0)) {
		fprintf(stderr, "usage: jit-end fault|spin\n");
		return 2;
	}
	uint8_t *p = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	if (spinning)
		memcpy(p, spin, sizeof spin);
	else
		memcpy(p, fault, sizeof fault);
	mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC);
	void (*f)(long) = (void (*)(long))p;
	if (spinning) {
		printf("spinning\n");
		fflush(stdout);
		f(1L << 60);
		return 0;
	}
	f(0);
	f(1);
	return 0;
}
