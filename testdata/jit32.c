/*
 * jit32 — a 32-bit (i386) program that JIT-compiles a function: maps a
 * page RW, writes f(x) = 3x + 7 as i386 machine code, makes it RX, calls
 * it and prints "f(5) = 22". Built with gcc -m32 where the toolchain can
 * (gcc-multilib); ptjit refuses such a program (tracker/compat_linux_amd64.go).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

int main(void)
{
	static const uint8_t code[] = {
		0x8b, 0x44, 0x24, 0x04, /* mov 4(%esp),%eax */
		0x6b, 0xc0, 0x03,       /* imul $3,%eax,%eax */
		0x83, 0xc0, 0x07,       /* add $7,%eax */
		0xc3,                   /* ret */
	};
	uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memcpy(p, code, sizeof code);
	if (mprotect(p, 4096, PROT_READ | PROT_EXEC) != 0) {
		perror("mprotect");
		return 1;
	}
	int (*f)(int) = (int (*)(int))(uintptr_t)p;
	printf("f(5) = %d\n", f(5));
	return sizeof(void *) == 4 ? 0 : 3;
}
