/*
 * retpush — returns that do not go back to their call, in JIT code.
 *
 * pushed: what HotSpot's interpreter does between compiled methods.
 * Compiled code calls a method that runs interpreted (call: its return
 * address is pushed by a call); the interpreter invokes a compiled method
 * through a return address it pushes itself (lea; push; jmp), so that
 * method's ret goes where no call returns to; the interpreter then leaves
 * its frame with pop; jmp *reg to the compiled caller, and the compiled
 * code returns with an ordinary ret:
 *
 *   pushed:  call inner      ; returns to 5
 *       5:   ret
 *   inner:   call f          ; returns to b
 *       b:   ret             ; to 5: the call at 0 pushed it
 *   f:       lea L(%rip),%rcx; push %rcx; jmp g
 *   g:       mov $41,%eax; ret          ; to L, pushed by f
 *   L:       pop %rcx; add $1,%eax; jmp *%rcx   ; to b
 *
 * zerolen: a call to the next instruction (position-independent code
 * takes its own address so) that a ret then follows:
 *
 *   zerolen: call inner2; ret
 *   inner2:  mov $7,%eax; call N
 *   N:       ret             ; to N itself, then to zerolen's ret
 *
 * A trace with return compression must write every ret here so that a
 * decoder's call stack (libipt's: calls push, compressed rets pop; a call
 * of length 0 is no call) gives its target: the ret at b goes to 5, not
 * to b again. main calls each 3 times and prints the sums (126 and 21).
 */
#include "manifest.h"

int main(void)
{
	static const uint8_t code[] = {
		/* 0x00 pushed */
		0xe8, 0x01, 0x00, 0x00, 0x00,             /* call inner (0x06) */
		0xc3,                                     /* ret */
		/* 0x06 inner */
		0xe8, 0x01, 0x00, 0x00, 0x00,             /* call f (0x0c) */
		0xc3,                                     /* 0x0b: ret */
		/* 0x0c f */
		0x48, 0x8d, 0x0d, 0x09, 0x00, 0x00, 0x00, /* lea L(%rip),%rcx */
		0x51,                                     /* push %rcx */
		0xeb, 0x00,                               /* jmp g */
		/* 0x16 g */
		0xb8, 0x29, 0x00, 0x00, 0x00,             /* mov $41,%eax */
		0xc3,                                     /* ret */
		/* 0x1c L */
		0x59,                                     /* pop %rcx */
		0x83, 0xc0, 0x01,                         /* add $1,%eax */
		0xff, 0xe1,                               /* jmp *%rcx */
		/* 0x22 zerolen */
		0xe8, 0x01, 0x00, 0x00, 0x00,             /* call inner2 (0x28) */
		0xc3,                                     /* ret */
		/* 0x28 inner2 */
		0xb8, 0x07, 0x00, 0x00, 0x00,             /* mov $7,%eax */
		0xe8, 0x00, 0x00, 0x00, 0x00,             /* call N (0x32) */
		/* 0x32 N */
		0xc3,                                     /* ret */
	};
	uint8_t *p = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	memcpy(p, code, sizeof code);
	mf_mprotect(p, MF_PAGE, PROT_READ | PROT_EXEC);
	int (*pushed)(void) = (int (*)(void))p;
	int (*zerolen)(void) = (int (*)(void))(p + 0x22);
	int a = 0, b = 0;
	for (int i = 0; i < 3; i++) {
		a += pushed();
		b += zerolen();
	}
	printf("pushed %d zerolen %d\n", a, b);
	return 0;
}
