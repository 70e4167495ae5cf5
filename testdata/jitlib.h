/*
 * jitlib.h — the tiny code generator shared by jit-threads and forker: it
 * emits f(x) = x*A + B as real x86-64 machine code.
 */
#ifndef PTJIT_JITLIB_H
#define PTJIT_JITLIB_H

#include "manifest.h"

typedef int64_t (*affine_fn)(int64_t);

/* emit_affine writes f(x) = x*a + b at p and returns its length (17). */
static size_t emit_affine(uint8_t *p, int32_t a, int32_t b)
{
	size_t n = 0;
	p[n++] = 0x48; p[n++] = 0x89; p[n++] = 0xf8;              /* mov rax, rdi */
	p[n++] = 0x48; p[n++] = 0x69; p[n++] = 0xc0;              /* imul rax, rax, a */
	memcpy(p + n, &a, 4); n += 4;
	p[n++] = 0x48; p[n++] = 0x05;                             /* add rax, b */
	memcpy(p + n, &b, 4); n += 4;
	p[n++] = 0xc3;                                            /* ret */
	return n;
}

/*
 * jit_affine maps pages RW, fills them with copies of f(x) = x*a + b (one
 * every 64 bytes, so every page differs from a zero page), makes them RX
 * (one manifest line) and returns the mapping.
 */
MF_FN uint8_t *jit_affine(size_t pages, int32_t a, int32_t b)
{
	size_t len = pages * MF_PAGE;
	uint8_t *p = mf_mmap(NULL, len, PROT_READ | PROT_WRITE, 0);
	for (size_t off = 0; off + 64 <= len; off += 64)
		emit_affine(p + off, a, b + (int32_t)(off / 64));
	mf_mprotect(p, len, PROT_READ | PROT_EXEC);
	return p;
}

#endif
