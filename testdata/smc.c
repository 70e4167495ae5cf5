/*
 * smc — self-modifying code on RWX pages.
 *
 * Case 1: function F, on the same page as G, rewrites the immediate of G's
 * "mov eax, imm32" (a store into the page it runs from); G then returns the
 * new value.
 * Case 2: function H does "add dword [rip+1], 1" which increments the
 * immediate of the very next instruction, "mov eax, imm32", before executing
 * it: each call returns one more than the last.
 * Each page is filled while RW and made RWX with mprotect (an "mprotect"
 * manifest line); every store the JIT code does is followed by a "write"
 * line with the page content after it.
 */
#include "manifest.h"

typedef int (*fn)(void);

/* call_logged runs f, which stores once into page, and logs the page. */
static int call_logged(fn f, uint8_t *page)
{
	mf_lock();
	int v = f();
	mf_log(page, MF_PAGE, "write");
	mf_unlock();
	return v;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int ok = 1;

	/* case 1: F at +0 stores 0x2a into G's immediate at +65 */
	uint8_t *p1 = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	static const uint8_t f_code[] = {
		0xc7, 0x05, 0x37, 0x00, 0x00, 0x00, 0x2a, 0x00, 0x00, 0x00, /* mov dword [rip+0x37], 42 */
		0xc3,                                                       /* ret */
	};
	memcpy(p1, f_code, sizeof f_code);       /* rip after mov = +10; 10+0x37 = 65 */
	static const uint8_t g_code[] = {0xb8, 0x01, 0x00, 0x00, 0x00, 0xc3}; /* mov eax, 1; ret */
	memcpy(p1 + 64, g_code, sizeof g_code);
	mf_mprotect(p1, MF_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC);
	int before = ((fn)(p1 + 64))();
	call_logged((fn)p1, p1);
	int after = ((fn)(p1 + 64))();
	printf("case 1: G returned %d, F rewrote it, G returns %d %s\n", before, after,
	       before == 1 && after == 42 ? "ok" : "WRONG");
	ok &= before == 1 && after == 42;

	/* case 2: H increments the immediate of its next instruction */
	uint8_t *p2 = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	static const uint8_t h_code[] = {
		0x83, 0x05, 0x01, 0x00, 0x00, 0x00, 0x01, /* add dword [rip+1], 1 */
		0xb8, 0x00, 0x00, 0x00, 0x00,             /* mov eax, imm32 (counts calls) */
		0xc3,                                     /* ret */
	};
	memcpy(p2, h_code, sizeof h_code);
	mf_mprotect(p2, MF_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC);
	for (int i = 1; i <= 3; i++) {
		int v = call_logged((fn)p2, p2);
		printf("case 2: call %d returned %d %s\n", i, v, v == i ? "ok" : "WRONG");
		ok &= v == i;
	}
	return ok ? 0 : 1;
}
