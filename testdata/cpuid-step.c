/*
 * cpuid-step — CPUID followed by every kind of instruction whose flow a
 * single-stepping tracer must not lose.
 *
 * Some hypervisors emulate CPUID without raising the single-step trap the
 * SDM requires after it: a PTRACE_SINGLESTEP over CPUID then stops only
 * after the next instruction (ptjit run --pt=soft must still report both).
 * Each function below puts CPUID right before: a conditional branch (taken
 * and not taken; CPUID changes no flags), a second CPUID and a branch, a
 * jmp, a call, a ret, an indirect jmp, a syscall, and a store that faults
 * (SIGSEGV, recovered with siglongjmp). Prints what each returned; exit 0
 * when all are right.
 */
#include "manifest.h"

#include <cpuid.h>
#include <setjmp.h>
#include <signal.h>

int cpuid_jcc(int a, int b);
int cpuid_twice(int a, int b);
int cpuid_jmp(void);
int cpuid_call(void);
int cpuid_ret(void);
int cpuid_ind(void);
long cpuid_syscall(void);
void cpuid_store(int *p);

/* Each CPUID leaves EBX clobbered (callee-saved): saved around it. Leaf 0
 * (ECX 0) is valid everywhere. */
__asm__(
	".text\n"
	/* cmp; cpuid; je: 1 when a == b, else 2 */
	".globl cpuid_jcc\n"
	"cpuid_jcc:\n"
	"	push %rbx\n"
	"	cmp %esi, %edi\n"
	"	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	je 1f\n"
	"	mov $2, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	"1:	mov $1, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	/* cmp; cpuid; cpuid; jne: 1 when a == b, else 2 */
	".globl cpuid_twice\n"
	"cpuid_twice:\n"
	"	push %rbx\n"
	"	cmp %esi, %edi\n"
	"	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	cpuid\n"
	"	jne 1f\n"
	"	mov $1, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	"1:	mov $2, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	/* cpuid; jmp: 3 */
	".globl cpuid_jmp\n"
	"cpuid_jmp:\n"
	"	push %rbx\n"
	"	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	jmp 1f\n"
	"	ud2\n"
	"1:	mov $3, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	/* cpuid; call: 4 */
	".globl cpuid_call\n"
	"cpuid_call:\n"
	"	push %rbx\n"
	"	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	call 1f\n"
	"	pop %rbx\n"
	"	ret\n"
	"1:	mov $4, %eax\n"
	"	ret\n"
	/* cpuid; ret (the ret of a called function): 5 */
	".globl cpuid_ret\n"
	"cpuid_ret:\n"
	"	push %rbx\n"
	"	call 1f\n"
	"	pop %rbx\n"
	"	mov $5, %eax\n"
	"	ret\n"
	"1:	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	ret\n"
	/* cpuid; jmp *%r8: 6 */
	".globl cpuid_ind\n"
	"cpuid_ind:\n"
	"	push %rbx\n"
	"	lea 1f(%rip), %r8\n"
	"	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	jmp *%r8\n"
	"	ud2\n"
	"1:	mov $6, %eax\n"
	"	pop %rbx\n"
	"	ret\n"
	/* cpuid; syscall: leaf 0xb subleaf 5 returns EAX 0 (checked by the
	 * caller), so the syscall is read(-1, ...): -EBADF */
	".globl cpuid_syscall\n"
	"cpuid_syscall:\n"
	"	push %rbx\n"
	"	mov $-1, %rdi\n"
	"	mov $0xb, %eax\n"
	"	mov $5, %ecx\n"
	"	cpuid\n"
	"	syscall\n"
	"	pop %rbx\n"
	"	ret\n"
	/* cpuid; store to *p (faults when p is read-only) */
	".globl cpuid_store\n"
	"cpuid_store:\n"
	"	push %rbx\n"
	"	mov $0, %eax\n"
	"	mov $0, %ecx\n"
	"	cpuid\n"
	"	movl $1, (%rdi)\n"
	"	pop %rbx\n"
	"	ret\n");

static sigjmp_buf env;
static volatile sig_atomic_t faults;

static void on_segv(int sig)
{
	(void)sig;
	faults++;
	siglongjmp(env, 1);
}

static void try_store(int *p)
{
	if (sigsetjmp(env, 1) == 0)
		cpuid_store(p);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int ok = 1;
	for (int i = 0; i < 3; i++) {
		int eq = cpuid_jcc(i, 1), eq2 = cpuid_twice(i, 1);
		printf("round %d: jcc %d twice %d\n", i, eq, eq2);
		ok &= eq == (i == 1 ? 1 : 2) && eq2 == eq;
	}
	int jmp = cpuid_jmp(), call = cpuid_call(), ret = cpuid_ret(), ind = cpuid_ind();
	printf("jmp %d call %d ret %d ind %d\n", jmp, call, ret, ind);
	ok &= jmp == 3 && call == 4 && ret == 5 && ind == 6;

	/* Only where leaf 0xb subleaf 5 returns EAX 0 (x2APIC topology
	 * enumeration past its last level): otherwise EAX would be some
	 * other syscall number. */
	unsigned a, b, c, d;
	long sys = -EBADF;
	if (__get_cpuid_max(0, NULL) >= 0xb) {
		__cpuid_count(0xb, 5, a, b, c, d);
		if (a == 0)
			sys = cpuid_syscall();
	}
	printf("syscall %ld\n", sys);
	ok &= sys == -EBADF;

	struct sigaction sa = {.sa_handler = on_segv};
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSEGV, &sa, NULL) != 0)
		mf_die("sigaction: %s", strerror(errno));
	int *ro = mf_mmap(NULL, MF_PAGE, PROT_READ, 0);
	int rw = 0;
	try_store(&rw);
	try_store(ro);
	printf("store %d faults %d\n", rw, (int)faults);
	ok &= rw == 1 && faults == 1;

	puts(ok ? "ok" : "WRONG");
	return ok ? 0 : 1;
}
