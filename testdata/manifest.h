/*
 * manifest.h — shared by every ptjit test program: a small SHA-256 and the
 * manifest writer.
 *
 * Each program states, in the file named by $PTJIT_MANIFEST, every code
 * buffer it makes executable, one line per event, in the order the events
 * happened:
 *
 *     ADDR SIZE SHA256 CAUSE PID TID
 *
 * ADDR is the page-aligned start (0x... hex), SIZE the page-aligned length in
 * bytes (decimal), SHA256 the lowercase hex digest of the bytes
 * [ADDR, ADDR+SIZE) right after the event, CAUSE the syscall that made the
 * range executable ("mmap", "mprotect", "mremap") or "write" for a store into
 * a page that was already writable and executable (RWX; only a W^X-enforcing
 * recorder sees those), PID and TID the process and thread that did it.
 * The end-to-end tests compare these lines with `ptjit history --json`.
 *
 * Syscall and log happen under one process-wide lock (mf_lock), so with
 * several threads the lines are in syscall order. Each line is written with
 * one write(2) on an O_APPEND descriptor, so processes sharing the file
 * (fork, exec) never interleave inside a line.
 *
 * Header-only on purpose: every program is a single .c file.
 */
#ifndef PTJIT_MANIFEST_H
#define PTJIT_MANIFEST_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MF_PAGE 4096UL

/* MF_FN marks helpers a program may not use. */
#define MF_FN static __attribute__((unused))

/* ---- SHA-256 (FIPS 180-4) ---- */

typedef struct {
	uint32_t h[8];
	uint64_t len;     /* bytes hashed so far */
	uint8_t buf[64];
	size_t nbuf;
} mf_sha256;

static const uint32_t mf_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t mf_ror(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

static void mf_sha256_block(mf_sha256 *s, const uint8_t *p)
{
	uint32_t w[64], a, b, c, d, e, f, g, h;
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 64; i++) {
		uint32_t s0 = mf_ror(w[i - 15], 7) ^ mf_ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = mf_ror(w[i - 2], 17) ^ mf_ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
		w[i] = w[i - 16] + s0 + w[i - 7] + s1;
	}
	a = s->h[0]; b = s->h[1]; c = s->h[2]; d = s->h[3];
	e = s->h[4]; f = s->h[5]; g = s->h[6]; h = s->h[7];
	for (int i = 0; i < 64; i++) {
		uint32_t t1 = h + (mf_ror(e, 6) ^ mf_ror(e, 11) ^ mf_ror(e, 25)) +
			      ((e & f) ^ (~e & g)) + mf_k[i] + w[i];
		uint32_t t2 = (mf_ror(a, 2) ^ mf_ror(a, 13) ^ mf_ror(a, 22)) +
			      ((a & b) ^ (a & c) ^ (b & c));
		h = g; g = f; f = e; e = d + t1;
		d = c; c = b; b = a; a = t1 + t2;
	}
	s->h[0] += a; s->h[1] += b; s->h[2] += c; s->h[3] += d;
	s->h[4] += e; s->h[5] += f; s->h[6] += g; s->h[7] += h;
}

static void mf_sha256_init(mf_sha256 *s)
{
	static const uint32_t iv[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};
	memcpy(s->h, iv, sizeof iv);
	s->len = 0;
	s->nbuf = 0;
}

static void mf_sha256_update(mf_sha256 *s, const void *data, size_t n)
{
	const uint8_t *p = data;
	s->len += n;
	while (n > 0) {
		size_t take = 64 - s->nbuf;
		if (take > n)
			take = n;
		memcpy(s->buf + s->nbuf, p, take);
		s->nbuf += take;
		p += take;
		n -= take;
		if (s->nbuf == 64) {
			mf_sha256_block(s, s->buf);
			s->nbuf = 0;
		}
	}
}

/* mf_sha256_hex finishes s and writes 64 hex digits and a NUL to out. */
static void mf_sha256_hex(mf_sha256 *s, char out[65])
{
	uint64_t bits = s->len * 8;
	uint8_t pad[72] = {0x80};
	size_t npad = (s->nbuf < 56 ? 56 : 120) - s->nbuf;
	for (int i = 0; i < 8; i++)
		pad[npad + i] = (uint8_t)(bits >> (56 - 8 * i));
	mf_sha256_update(s, pad, npad + 8);
	for (int i = 0; i < 8; i++)
		sprintf(out + 8 * i, "%08x", s->h[i]);
}

MF_FN void mf_hash(const void *p, size_t n, char out[65])
{
	mf_sha256 s;
	mf_sha256_init(&s);
	mf_sha256_update(&s, p, n);
	mf_sha256_hex(&s, out);
}

/* ---- manifest ---- */

static pthread_mutex_t mf_mu = PTHREAD_MUTEX_INITIALIZER;
static int mf_fd = -2; /* -2: not opened yet, -1: no manifest wanted */

MF_FN void mf_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* mf_lock / mf_unlock bracket a syscall and its mf_log line. */
static void mf_lock(void) { pthread_mutex_lock(&mf_mu); }
static void mf_unlock(void) { pthread_mutex_unlock(&mf_mu); }

static uintptr_t mf_page_down(uintptr_t a) { return a & ~(MF_PAGE - 1); }
static uintptr_t mf_page_up(uintptr_t a) { return (a + MF_PAGE - 1) & ~(MF_PAGE - 1); }

/*
 * mf_log writes the line for the page-aligned range covering [addr, addr+len)
 * as it is now. Precondition: the range is readable; the caller holds mf_lock
 * when other threads may log.
 */
MF_FN void mf_log(const void *addr, size_t len, const char *cause)
{
	if (mf_fd == -2) {
		const char *path = getenv("PTJIT_MANIFEST");
		mf_fd = -1;
		if (path && *path) {
			mf_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
			if (mf_fd < 0)
				mf_die("manifest %s: %s", path, strerror(errno));
		}
	}
	if (mf_fd < 0)
		return;
	uintptr_t lo = mf_page_down((uintptr_t)addr);
	uintptr_t hi = mf_page_up((uintptr_t)addr + len);
	char hex[65], line[160];
	mf_hash((const void *)lo, hi - lo, hex);
	int n = snprintf(line, sizeof line, "0x%lx %lu %s %s %d %d\n",
			 (unsigned long)lo, (unsigned long)(hi - lo), hex, cause,
			 (int)getpid(), (int)syscall(SYS_gettid));
	if (write(mf_fd, line, (size_t)n) != n)
		mf_die("manifest write: %s", strerror(errno));
}

/* mf_mprotect is mprotect that logs a line when the result is executable. */
MF_FN void mf_mprotect(void *addr, size_t len, int prot)
{
	mf_lock();
	if (mprotect(addr, len, prot) != 0)
		mf_die("mprotect(%p, %zu, %d): %s", addr, len, prot, strerror(errno));
	if (prot & PROT_EXEC)
		mf_log(addr, len, "mprotect");
	mf_unlock();
}

/* mf_mmap is an anonymous private mmap that logs a line when executable. */
MF_FN void *mf_mmap(void *hint, size_t len, int prot, int extra_flags)
{
	mf_lock();
	void *p = mmap(hint, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
	if (p == MAP_FAILED)
		mf_die("mmap(%zu, %d): %s", len, prot, strerror(errno));
	if (prot & PROT_EXEC)
		mf_log(p, len, "mmap");
	mf_unlock();
	return p;
}

MF_FN void mf_munmap(void *addr, size_t len)
{
	if (munmap(addr, len) != 0)
		mf_die("munmap(%p, %zu): %s", addr, len, strerror(errno));
}

/*
 * mf_store8 writes v to the 8-byte aligned word at p with one store
 * instruction (a W^X recorder sees exactly one write) and logs the page as a
 * "write" line. Used for patches on RWX pages.
 */
MF_FN void mf_store8(void *p, uint64_t v)
{
	if ((uintptr_t)p & 7)
		mf_die("mf_store8: %p not 8-byte aligned", p);
	mf_lock();
	__atomic_store_n((uint64_t *)p, v, __ATOMIC_RELEASE); /* a plain mov */
	mf_log(p, 8, "write");
	mf_unlock();
}

#endif
