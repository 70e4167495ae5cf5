/*
 * sigsegv-handler — a program with its own SIGSEGV handler that faults on
 * purpose and recovers with siglongjmp, like JVMs and sandboxes do.
 *
 * Faults, each checked for si_code and si_addr:
 *   1. a write to address 0x10 (SEGV_MAPERR);
 *   2. a write to a PROT_READ page (SEGV_ACCERR);
 *   3. a write into its own RX JIT page (SEGV_ACCERR): under W^X enforcement
 *      ptjit must deliver this one, it is the program's own fault;
 *   4. a read from a PROT_NONE page (SEGV_ACCERR);
 *   5. a call into a RW page that is not executable (SEGV_ACCERR at the page).
 * Then it calls the JIT page to show it is intact, and prints the count.
 */
#include "jitlib.h"

#include <setjmp.h>
#include <signal.h>

static sigjmp_buf env;
static volatile sig_atomic_t faults;
static void *volatile fault_addr;
static volatile int fault_code;

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig, (void)uc;
	faults++;
	fault_addr = si->si_addr;
	fault_code = si->si_code;
	siglongjmp(env, 1);
}

static int expect(int n, const char *what, void *addr, int code)
{
	int ok = fault_addr == addr && fault_code == code;
	printf("fault %d (%s): si_code=%s si_addr %s\n", n, what,
	       fault_code == SEGV_MAPERR ? "SEGV_MAPERR" :
	       fault_code == SEGV_ACCERR ? "SEGV_ACCERR" : "other",
	       fault_addr == addr ? "as expected" : "WRONG");
	return ok;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	struct sigaction sa = {.sa_sigaction = on_segv, .sa_flags = SA_SIGINFO};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		mf_die("sigaction: %s", strerror(errno));

	uint8_t *ro = mf_mmap(NULL, MF_PAGE, PROT_READ, 0);
	uint8_t *none = mf_mmap(NULL, MF_PAGE, PROT_NONE, 0);
	uint8_t *rw = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	emit_affine(rw, 2, 3);
	uint8_t *code = jit_affine(1, 4, 5);
	int ok = 1;

	int *volatile unmapped = (int *)0x10;
	if (sigsetjmp(env, 1) == 0)
		*unmapped = 1;
	ok &= expect(1, "write to 0x10", (void *)0x10, SEGV_MAPERR);
	if (sigsetjmp(env, 1) == 0)
		*(volatile int *)(ro + 64) = 1;
	ok &= expect(2, "write to read-only page", ro + 64, SEGV_ACCERR);
	if (sigsetjmp(env, 1) == 0)
		*(volatile uint8_t *)(code + 8) = 0x90;
	ok &= expect(3, "write to RX JIT page", code + 8, SEGV_ACCERR);
	if (sigsetjmp(env, 1) == 0)
		(void)*(volatile int *)(none + 128);
	ok &= expect(4, "read from PROT_NONE page", none + 128, SEGV_ACCERR);
	if (sigsetjmp(env, 1) == 0)
		((affine_fn)rw)(1);
	ok &= expect(5, "call into non-executable page", rw, SEGV_ACCERR);

	int64_t v = ((affine_fn)code)(10);
	printf("JIT code intact: f(10) = %lld %s\n", (long long)v, v == 45 ? "ok" : "WRONG");
	ok &= v == 45;
	printf("%d faults handled\n", (int)faults);
	return ok && faults == 5 ? 0 : 1;
}
