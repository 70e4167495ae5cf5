/*
 * ubpf-test — a small eBPF → x86-64 JIT in the style of uBPF.
 *
 * It compiles a 24-instruction eBPF program (mov, add, sub, mul, and, xor,
 * shifts, jset, jlt, ja, a helper call, exit) that loops 100 times, into an
 * mmap'ed RW buffer, makes it RX with mprotect and calls it. Then it patches
 * the helper address of the call in place (mprotect RW → patch → RX) and
 * runs it again, unmaps it and compiles again (the kernel hands back the same
 * address, as uBPF sees), and runs the new copy N times (argument N, default
 * 1; the benchmark uses 1000000). Every result is checked against an eBPF
 * interpreter. Manifest: three "mprotect" lines of one page each.
 *
 * Usage: ubpf-test [N]
 */
#include "manifest.h"

#include <inttypes.h>

/* ---- eBPF ---- */

struct ebpf_insn {
	uint8_t op;
	uint8_t dst : 4;
	uint8_t src : 4;
	int16_t off;
	int32_t imm;
};

enum {
	EBPF_ADD64_IMM = 0x07, EBPF_ADD64_REG = 0x0f,
	EBPF_SUB64_IMM = 0x17, EBPF_SUB64_REG = 0x1f,
	EBPF_MUL64_IMM = 0x27,
	EBPF_AND64_IMM = 0x57,
	EBPF_LSH64_IMM = 0x67, EBPF_RSH64_IMM = 0x77,
	EBPF_XOR64_IMM = 0xa7, EBPF_XOR64_REG = 0xaf,
	EBPF_MOV64_IMM = 0xb7, EBPF_MOV64_REG = 0xbf,
	EBPF_JA = 0x05, EBPF_JSET_IMM = 0x45, EBPF_JLT_IMM = 0xa5,
	EBPF_CALL = 0x85, EBPF_EXIT = 0x95,
};

#define I(o, d, s, of, im) {.op = (o), .dst = (d), .src = (s), .off = (of), .imm = (im)}

static const struct ebpf_insn prog[] = {
	/*  0 */ I(EBPF_MOV64_IMM, 6, 0, 0, 0),      /* r6 = 0 (i) */
	/*  1 */ I(EBPF_MOV64_IMM, 7, 0, 0, 7),      /* r7 = 7 (acc) */
	/*  2 */ I(EBPF_MOV64_IMM, 8, 0, 0, 1),      /* r8 = 1 */
	/*  3 */ I(EBPF_MOV64_REG, 1, 6, 0, 0),      /* loop: r1 = r6 */
	/*  4 */ I(EBPF_MOV64_REG, 2, 7, 0, 0),      /* r2 = r7 */
	/*  5 */ I(EBPF_CALL, 0, 0, 0, 1),           /* r0 = helper1(r1, r2, ...) */
	/*  6 */ I(EBPF_MOV64_REG, 7, 0, 0, 0),      /* r7 = r0 */
	/*  7 */ I(EBPF_ADD64_REG, 7, 8, 0, 0),      /* r7 += r8 */
	/*  8 */ I(EBPF_ADD64_IMM, 8, 0, 0, 2),      /* r8 += 2 */
	/*  9 */ I(EBPF_MOV64_REG, 3, 7, 0, 0),      /* r3 = r7 */
	/* 10 */ I(EBPF_RSH64_IMM, 3, 0, 0, 7),      /* r3 >>= 7 */
	/* 11 */ I(EBPF_XOR64_REG, 7, 3, 0, 0),      /* r7 ^= r3 */
	/* 12 */ I(EBPF_MUL64_IMM, 8, 0, 0, 3),      /* r8 *= 3 */
	/* 13 */ I(EBPF_AND64_IMM, 8, 0, 0, 0xffff), /* r8 &= 0xffff */
	/* 14 */ I(EBPF_JSET_IMM, 6, 0, 3, 1),       /* if r6 & 1 goto 18 */
	/* 15 */ I(EBPF_XOR64_IMM, 7, 0, 0, 0x1234), /* r7 ^= 0x1234 */
	/* 16 */ I(EBPF_LSH64_IMM, 7, 0, 0, 1),      /* r7 <<= 1 */
	/* 17 */ I(EBPF_JA, 0, 0, 2, 0),             /* goto 20 */
	/* 18 */ I(EBPF_ADD64_REG, 7, 6, 0, 0),      /* odd: r7 += r6 */
	/* 19 */ I(EBPF_SUB64_IMM, 7, 0, 0, 5),      /* r7 -= 5 */
	/* 20 */ I(EBPF_ADD64_IMM, 6, 0, 0, 1),      /* r6 += 1 */
	/* 21 */ I(EBPF_JLT_IMM, 6, 0, -19, 100),    /* if r6 < 100 goto 3 */
	/* 22 */ I(EBPF_MOV64_REG, 0, 7, 0, 0),      /* r0 = r7 */
	/* 23 */ I(EBPF_EXIT, 0, 0, 0, 0),
};
#define PROG_LEN (sizeof prog / sizeof prog[0])

typedef uint64_t (*helper_fn)(uint64_t, uint64_t, uint64_t, uint64_t, uint64_t);

static uint64_t helper_mix_a(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)c, (void)d, (void)e;
	return a * 31 + (b ^ 0x9e37);
}

static uint64_t helper_mix_b(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
	(void)c, (void)d, (void)e;
	return (a << 3) ^ b ^ 0x55aa;
}

/* interp runs prog with helper 1 = h: the reference for the JIT's result. */
static uint64_t interp(helper_fn h)
{
	uint64_t r[11] = {0};
	for (size_t pc = 0; pc < PROG_LEN; pc++) {
		const struct ebpf_insn *in = &prog[pc];
		uint64_t k = (uint64_t)(int64_t)in->imm;
		switch (in->op) {
		case EBPF_ADD64_IMM: r[in->dst] += k; break;
		case EBPF_ADD64_REG: r[in->dst] += r[in->src]; break;
		case EBPF_SUB64_IMM: r[in->dst] -= k; break;
		case EBPF_SUB64_REG: r[in->dst] -= r[in->src]; break;
		case EBPF_MUL64_IMM: r[in->dst] *= k; break;
		case EBPF_AND64_IMM: r[in->dst] &= k; break;
		case EBPF_LSH64_IMM: r[in->dst] <<= (k & 63); break;
		case EBPF_RSH64_IMM: r[in->dst] >>= (k & 63); break;
		case EBPF_XOR64_IMM: r[in->dst] ^= k; break;
		case EBPF_XOR64_REG: r[in->dst] ^= r[in->src]; break;
		case EBPF_MOV64_IMM: r[in->dst] = k; break;
		case EBPF_MOV64_REG: r[in->dst] = r[in->src]; break;
		case EBPF_JA: pc += in->off; break;
		case EBPF_JSET_IMM: if (r[in->dst] & k) pc += in->off; break;
		case EBPF_JLT_IMM: if (r[in->dst] < k) pc += in->off; break;
		case EBPF_CALL: r[0] = h(r[1], r[2], r[3], r[4], r[5]); break;
		case EBPF_EXIT: return r[0];
		default: mf_die("interp: bad opcode 0x%02x at %zu", in->op, pc);
		}
	}
	mf_die("interp: fell off the end");
	return 0;
}

/* ---- x86-64 emitter ---- */

enum { RAX, RCX, RDX, RBX, RSP, RBP, RSI, RDI, R8, R9, R10, R11, R12, R13, R14, R15 };

/* uBPF's register map: r0..r10 → x86-64. */
static const int regmap[11] = {RAX, RDI, RSI, RDX, R9, R8, RBX, R13, R14, R15, RBP};

#define STACK_SIZE 512
#define MAX_CODE 4096

struct jit {
	uint8_t buf[MAX_CODE];
	size_t n;
	size_t insn_off[PROG_LEN];  /* x86 offset of each eBPF instruction */
	struct { size_t at; int target; } fix[PROG_LEN]; /* rel32 fixups; target -1: epilogue */
	size_t nfix;
	size_t call_imm_off;        /* offset of the helper address (imm64) */
};

static void emit1(struct jit *j, uint8_t b)
{
	if (j->n >= MAX_CODE)
		mf_die("jit: code buffer full");
	j->buf[j->n++] = b;
}

static void emit4(struct jit *j, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		emit1(j, (uint8_t)(v >> (8 * i)));
}

static void emit8(struct jit *j, uint64_t v)
{
	emit4(j, (uint32_t)v);
	emit4(j, (uint32_t)(v >> 32));
}

/* rexw emits REX.W with R (reg field) and B (rm field) extensions. */
static void rexw(struct jit *j, int reg, int rm)
{
	emit1(j, 0x48 | ((reg >> 3) & 1) << 2 | ((rm >> 3) & 1));
}

static void modrm_rr(struct jit *j, int reg, int rm)
{
	emit1(j, 0xc0 | (reg & 7) << 3 | (rm & 7));
}

/* op r/m64, r64 (01 add, 29 sub, 31 xor, 89 mov, 39 cmp). */
static void alu_rr(struct jit *j, uint8_t op, int src, int dst)
{
	rexw(j, src, dst);
	emit1(j, op);
	modrm_rr(j, src, dst);
}

/* 81 /ext r/m64, imm32 (0 add, 4 and, 5 sub, 6 xor, 7 cmp). */
static void alu_imm(struct jit *j, int ext, int dst, int32_t imm)
{
	rexw(j, 0, dst);
	emit1(j, 0x81);
	modrm_rr(j, ext, dst);
	emit4(j, (uint32_t)imm);
}

static void push(struct jit *j, int r)
{
	if (r >= 8)
		emit1(j, 0x41);
	emit1(j, 0x50 | (r & 7));
}

static void pop(struct jit *j, int r)
{
	if (r >= 8)
		emit1(j, 0x41);
	emit1(j, 0x58 | (r & 7));
}

/* jump emits jmp rel32 (cc < 0) or jcc rel32 to eBPF instruction target. */
static void jump(struct jit *j, int cc, int target)
{
	if (cc < 0) {
		emit1(j, 0xe9);
	} else {
		emit1(j, 0x0f);
		emit1(j, (uint8_t)(0x80 | cc));
	}
	j->fix[j->nfix].at = j->n;
	j->fix[j->nfix].target = target;
	j->nfix++;
	emit4(j, 0);
}

enum { CC_B = 0x2, CC_NE = 0x5 };

static void compile(struct jit *j, helper_fn helper)
{
	memset(j, 0, sizeof *j);
	/* prologue: save callee-saved registers used by the map, set up r10 */
	push(j, RBP);
	push(j, RBX);
	push(j, R13);
	push(j, R14);
	push(j, R15);
	alu_rr(j, 0x89, RSP, RBP);           /* mov rbp, rsp */
	alu_imm(j, 5, RSP, STACK_SIZE);      /* sub rsp, 512 */
	for (size_t pc = 0; pc < PROG_LEN; pc++) {
		const struct ebpf_insn *in = &prog[pc];
		int dst = regmap[in->dst], src = regmap[in->src];
		j->insn_off[pc] = j->n;
		switch (in->op) {
		case EBPF_ADD64_IMM: alu_imm(j, 0, dst, in->imm); break;
		case EBPF_ADD64_REG: alu_rr(j, 0x01, src, dst); break;
		case EBPF_SUB64_IMM: alu_imm(j, 5, dst, in->imm); break;
		case EBPF_SUB64_REG: alu_rr(j, 0x29, src, dst); break;
		case EBPF_AND64_IMM: alu_imm(j, 4, dst, in->imm); break;
		case EBPF_XOR64_IMM: alu_imm(j, 6, dst, in->imm); break;
		case EBPF_XOR64_REG: alu_rr(j, 0x31, src, dst); break;
		case EBPF_MOV64_REG: alu_rr(j, 0x89, src, dst); break;
		case EBPF_MUL64_IMM: /* imul dst, dst, imm32 */
			rexw(j, dst, dst);
			emit1(j, 0x69);
			modrm_rr(j, dst, dst);
			emit4(j, (uint32_t)in->imm);
			break;
		case EBPF_MOV64_IMM: /* mov r/m64, imm32 (sign-extended) */
			rexw(j, 0, dst);
			emit1(j, 0xc7);
			modrm_rr(j, 0, dst);
			emit4(j, (uint32_t)in->imm);
			break;
		case EBPF_LSH64_IMM:
		case EBPF_RSH64_IMM: /* shl/shr r/m64, imm8 */
			rexw(j, 0, dst);
			emit1(j, 0xc1);
			modrm_rr(j, in->op == EBPF_LSH64_IMM ? 4 : 5, dst);
			emit1(j, (uint8_t)(in->imm & 63));
			break;
		case EBPF_JA:
			jump(j, -1, (int)pc + 1 + in->off);
			break;
		case EBPF_JSET_IMM: /* test r/m64, imm32; jne */
			rexw(j, 0, dst);
			emit1(j, 0xf7);
			modrm_rr(j, 0, dst);
			emit4(j, (uint32_t)in->imm);
			jump(j, CC_NE, (int)pc + 1 + in->off);
			break;
		case EBPF_JLT_IMM: /* cmp r/m64, imm32; jb */
			alu_imm(j, 7, dst, in->imm);
			jump(j, CC_B, (int)pc + 1 + in->off);
			break;
		case EBPF_CALL:
			/* r4 lives in r9 but the ABI's 4th argument is rcx */
			alu_rr(j, 0x89, R9, RCX);
			emit1(j, 0x48);      /* movabs rax, imm64 */
			emit1(j, 0xb8);
			j->call_imm_off = j->n;
			emit8(j, (uint64_t)(uintptr_t)helper);
			emit1(j, 0xff);      /* call rax */
			emit1(j, 0xd0);
			break;
		case EBPF_EXIT:
			jump(j, -1, -1);
			break;
		default:
			mf_die("jit: bad opcode 0x%02x at %zu", in->op, pc);
		}
	}
	size_t epilogue = j->n;
	alu_imm(j, 0, RSP, STACK_SIZE);      /* add rsp, 512 */
	pop(j, R15);
	pop(j, R14);
	pop(j, R13);
	pop(j, RBX);
	pop(j, RBP);
	emit1(j, 0xc3);
	for (size_t i = 0; i < j->nfix; i++) {
		size_t to = j->fix[i].target < 0 ? epilogue : j->insn_off[j->fix[i].target];
		int32_t rel = (int32_t)((int64_t)to - (int64_t)(j->fix[i].at + 4));
		memcpy(j->buf + j->fix[i].at, &rel, 4);
	}
}

/* load maps a fresh RW region, copies the code in and makes it RX. */
static uint8_t *load(const struct jit *j, size_t *region)
{
	*region = mf_page_up(j->n);
	uint8_t *p = mf_mmap(NULL, *region, PROT_READ | PROT_WRITE, 0);
	memcpy(p, j->buf, j->n);
	mf_mprotect(p, *region, PROT_READ | PROT_EXEC);
	return p;
}

typedef uint64_t (*jit_fn)(void *ctx);

static int check(const char *what, uint64_t got, uint64_t want)
{
	printf("%s: result=0x%016" PRIx64 " interpreter=0x%016" PRIx64 " %s\n",
	       what, got, want, got == want ? "ok" : "MISMATCH");
	return got == want;
}

int main(int argc, char **argv)
{
	long n = 1;
	if (argc > 2 || (argc == 2 && (n = strtol(argv[1], NULL, 10)) <= 0)) {
		fprintf(stderr, "usage: ubpf-test [N]  (N >= 1: runs of the final code)\n");
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	int ok = 1;
	static struct jit j;
	size_t region;

	compile(&j, helper_mix_a);
	uint8_t *code = load(&j, &region);
	printf("compiled %zu eBPF instructions into %zu bytes of x86-64 (region %zu bytes)\n",
	       PROG_LEN, j.n, region);
	ok &= check("run 1", ((jit_fn)code)(NULL), interp(helper_mix_a));

	/* patch the helper address in place, as a JIT relinking a call does */
	mf_mprotect(code, region, PROT_READ | PROT_WRITE);
	uint64_t h = (uint64_t)(uintptr_t)helper_mix_b;
	memcpy(code + j.call_imm_off, &h, sizeof h);
	mf_mprotect(code, region, PROT_READ | PROT_EXEC);
	printf("patched helper call at +%zu\n", j.call_imm_off);
	ok &= check("run 2", ((jit_fn)code)(NULL), interp(helper_mix_b));

	/* unload and compile again: the same address comes back */
	uint8_t *old = code;
	mf_munmap(code, region);
	compile(&j, helper_mix_a);
	code = load(&j, &region);
	printf("recompiled at the same address: %s\n", code == old ? "yes" : "no");
	uint64_t want = interp(helper_mix_a), got = 0;
	for (long i = 0; i < n; i++) {
		got = ((jit_fn)code)(NULL);
		if (got != want)
			break;
	}
	char what[64];
	snprintf(what, sizeof what, "run 3 (x%ld)", n);
	ok &= check(what, got, want);
	mf_munmap(code, region);
	return ok ? 0 : 1;
}
