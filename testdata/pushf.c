/*
 * pushf — code that reads its own flags register, in a file and in JIT
 * code.
 *
 * A tracer that single-steps pushf leaves the trap flag (TF, bit 8) it set
 * for the step in the pushed copy, unless it clears it there; a popf of
 * that copy then keeps TF set after the tracer stops stepping, and the
 * program dies of SIGTRAP at its next instruction. HotSpot's CPU probe
 * (pushf; ...; popf) does exactly that at JVM start.
 *
 * Calls, several times each: a native function (pushfq; pop %rax) and a
 * JIT page (pushfq; pop %rax; push %rax; popfq; ret), and runs a loop
 * after each. Prints the TF bit each one saw (0 when run alone) and a
 * checksum; exit 0.
 */
#include "manifest.h"

uint64_t native_flags(void);
__asm__(
	".text\n"
	".globl native_flags\n"
	"native_flags:\n"
	"	pushfq\n"
	"	pop %rax\n"
	"	ret\n");

typedef uint64_t (*flags_fn)(void);

int main(void)
{
	static const uint8_t code[] = {
		0x9c,       /* pushfq */
		0x58,       /* pop %rax */
		0x50,       /* push %rax */
		0x9d,       /* popfq */
		0xc3,       /* ret */
	};
	uint8_t *p = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	memcpy(p, code, sizeof code);
	mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC);
	flags_fn jit = (flags_fn)p;
	uint64_t tf_native = 0, tf_jit = 0, sum = 0;
	for (int i = 0; i < 5; i++) {
		tf_native |= native_flags() & 0x100;
		tf_jit |= jit() & 0x100;
		for (volatile int k = 0; k < 1000; k++)
			sum += (uint64_t)k * (uint64_t)(i + 1);
	}
	printf("native tf %d, jit tf %d, sum %llu\n", tf_native != 0, tf_jit != 0, (unsigned long long)sum);
	return 0;
}
