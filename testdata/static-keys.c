/*
 * static-keys — userspace jump labels, toggled in a known sequence.
 *
 * Eight sites, each a function starting with a 5-byte nop (0f 1f 44 00 00)
 * that falls through to "return 0", or, when its key is enabled, a jmp rel32
 * (e9 03 00 00 00) to "return site+1". Sites 0-3 live on a page patched the
 * careful way (mprotect RW → patch → RX: one "mprotect" manifest line per
 * toggle); sites 4-7 on an RWX page patched directly with one aligned 8-byte
 * store (one "write" manifest line per toggle). After every toggle all eight
 * sites run and their results are checked against the expected key states.
 * Each toggle is logged to $PTJIT_TOGGLES as "SITE_ADDR OLD_HEX NEW_HEX".
 */
#include "manifest.h"

#define NSITES 8
#define SITE_STRIDE 64

static const uint8_t nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
static const uint8_t jmp5[5] = {0xe9, 0x03, 0x00, 0x00, 0x00}; /* to +8 */

static const int sequence[] = {0, 4, 1, 5, 0, 6, 2, 7, 4, 3, 5, 1, 6, 7, 2, 3, 0, 4};

static uint8_t *careful, *rwx;
static FILE *toggles;

static uint8_t *site_addr(int s)
{
	return (s < 4 ? careful : rwx) + (s % 4) * SITE_STRIDE;
}

/* emit_site writes a disabled site returning s+1 when enabled. */
static void emit_site(uint8_t *p, int s)
{
	memcpy(p, nop5, 5);
	p[5] = 0x31; p[6] = 0xc0;                /* xor eax, eax */
	p[7] = 0xc3;                             /* ret */
	p[8] = 0xb8;                             /* mov eax, s+1 */
	int32_t v = s + 1;
	memcpy(p + 9, &v, 4);
	p[13] = 0xc3;                            /* ret */
}

static void hex5(char *out, const uint8_t *b)
{
	for (int i = 0; i < 5; i++)
		sprintf(out + 2 * i, "%02x", b[i]);
}

static void toggle(int s, int enable)
{
	uint8_t *p = site_addr(s);
	uint8_t old[5];
	memcpy(old, p, 5);
	uint64_t word;
	memcpy(&word, p, 8);
	memcpy(&word, enable ? jmp5 : nop5, 5);   /* bytes 5-7 unchanged */
	if (s < 4) {
		mf_mprotect(careful, MF_PAGE, PROT_READ | PROT_WRITE);
		memcpy(p, &word, 8);
		mf_mprotect(careful, MF_PAGE, PROT_READ | PROT_EXEC);
	} else {
		mf_store8(p, word);
	}
	if (toggles) {
		char o[11], n[11];
		hex5(o, old);
		hex5(n, p);
		fprintf(toggles, "0x%lx %s %s\n", (unsigned long)(uintptr_t)p, o, n);
	}
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *tpath = getenv("PTJIT_TOGGLES");
	if (tpath && *tpath && !(toggles = fopen(tpath, "w")))
		mf_die("%s: %s", tpath, strerror(errno));

	careful = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	rwx = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE, 0);
	for (int s = 0; s < NSITES; s++)
		emit_site(site_addr(s), s);
	mf_mprotect(careful, MF_PAGE, PROT_READ | PROT_EXEC);
	mf_mprotect(rwx, MF_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC);

	int state[NSITES] = {0}, ok = 1;
	size_t nseq = sizeof sequence / sizeof sequence[0];
	for (size_t k = 0; k < nseq; k++) {
		int s = sequence[k];
		state[s] = !state[s];
		toggle(s, state[s]);
		char keys[NSITES + 1];
		int good = 1;
		for (int i = 0; i < NSITES; i++) {
			int r = ((int (*)(void))site_addr(i))();
			keys[i] = r ? '1' : '0';
			good &= r == (state[i] ? i + 1 : 0);
		}
		keys[NSITES] = 0;
		printf("toggle %2zu: site %d %s via %s, keys %s %s\n", k, s,
		       state[s] ? "on " : "off", s < 4 ? "mprotect" : "rwx store",
		       keys, good ? "ok" : "WRONG");
		ok &= good;
	}
	if (toggles)
		fclose(toggles);
	return ok ? 0 : 1;
}
