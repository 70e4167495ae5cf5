/*
 * rwx-threads — one thread patches a function on an RWX page while other
 * threads execute it.
 *
 * The page is mapped PROT_READ|PROT_WRITE|PROT_EXEC directly (an "mmap"
 * manifest line: a zero page). The function "mov eax, imm32; ret" is written
 * with one aligned 8-byte store ("write" line), then the main thread stores
 * imm = 1..NPATCH, one 8-byte store each ("write" line each), and after each
 * store (and before the first patch) waits until every reader has executed
 * the current version, so every version runs at least once. Readers check
 * that the values they see only ever go up by one.
 */
#include "manifest.h"

#include <sched.h>

#define NREADERS 3
#define NPATCH 20

typedef int (*fn)(void);

static uint8_t *page;
static int seen[NREADERS]; /* last value each reader executed; -1: none yet */
static int bad[NREADERS];

static uint64_t code_word(int32_t imm)
{
	uint8_t b[8] = {0xb8, 0, 0, 0, 0, 0xc3, 0x90, 0x90}; /* mov eax, imm; ret; nop; nop */
	memcpy(b + 1, &imm, 4);
	uint64_t w;
	memcpy(&w, b, 8);
	return w;
}

static void *reader(void *arg)
{
	int id = (int)(intptr_t)arg, last = 0;
	if (((fn)page)() != 0)
		bad[id]++;
	__atomic_store_n(&seen[id], 0, __ATOMIC_RELEASE);
	while (last < NPATCH) {
		int v = ((fn)page)();
		if (v != last) {
			if (v != last + 1)
				bad[id]++;
			last = v;
			__atomic_store_n(&seen[id], v, __ATOMIC_RELEASE);
		}
		sched_yield();
	}
	return NULL;
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	page = mf_mmap(NULL, MF_PAGE, PROT_READ | PROT_WRITE | PROT_EXEC, 0);
	mf_store8(page, code_word(0));
	for (int i = 0; i < NREADERS; i++)
		seen[i] = -1;
	pthread_t th[NREADERS];
	for (int i = 0; i < NREADERS; i++)
		if (pthread_create(&th[i], NULL, reader, (void *)(intptr_t)i) != 0)
			mf_die("pthread_create failed");
	/* every version, the first included, is executed before the next store */
	for (int i = 0; i < NREADERS; i++)
		while (__atomic_load_n(&seen[i], __ATOMIC_ACQUIRE) < 0)
			sched_yield();
	for (int v = 1; v <= NPATCH; v++) {
		mf_store8(page, code_word(v));
		for (int i = 0; i < NREADERS; i++)
			while (__atomic_load_n(&seen[i], __ATOMIC_ACQUIRE) < v)
				sched_yield();
	}
	int nbad = 0;
	for (int i = 0; i < NREADERS; i++) {
		pthread_join(th[i], NULL);
		nbad += bad[i];
	}
	printf("%d readers saw values 0..%d in order: %s\n", NREADERS, NPATCH,
	       nbad ? "NO" : "ok");
	return nbad ? 1 : 0;
}
