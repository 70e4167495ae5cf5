/*
 * sigbus-store: a store into RWX memory that faults with SIGBUS, not
 * SIGSEGV. A one-page shared anonymous RWX mapping is grown to 16 pages
 * with mremap; the shared memory object stays one page long, so a store
 * at page 10 raises SIGBUS (BUS_ADRERR) alone. Under ptjit's W^X the page
 * is write-protected first, so ptjit meets the store before the kernel's
 * SIGBUS does.
 *
 *   sigbus-store          dies of SIGBUS (status 128+7)
 *   sigbus-store handler  its handler prints the fault's code and page and
 *                         exits 7
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static unsigned char *g;

static void on_bus(int sig, siginfo_t *si, void *uc) {
	(void)uc;
	char buf[96];
	int n = snprintf(buf, sizeof buf, "signal %d code %d page %ld\n", sig, si->si_code,
			 (long)(((unsigned char *)si->si_addr - g) / 4096));
	write(1, buf, n);
	_exit(7);
}

int main(int argc, char **argv) {
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc > 1 && strcmp(argv[1], "handler") == 0) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_bus;
		sa.sa_flags = SA_SIGINFO;
		sigaction(SIGBUS, &sa, NULL);
	}
	unsigned char *f = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (f == MAP_FAILED)
		return 1;
	f[0] = 0xc3; /* ret */
	((void (*)(void))f)();
	g = mremap(f, 4096, 16 * 4096, MREMAP_MAYMOVE);
	if (g == MAP_FAILED)
		return 1;
	printf("remapped\n");
	*(volatile unsigned char *)(g + 10 * 4096) = 0xc3;
	printf("stored\n");
	return 0;
}
