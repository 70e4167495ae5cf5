/* tcc -run compiles this into memory and runs it. */
#include <stdio.h>
#include <stdlib.h>

static long step(long x, long i) { return (x * 31 + i) % 1000003; }

int main(int argc, char **argv) {
	long n = argc > 1 ? atol(argv[1]) : 3000, acc = 7;
	for (long i = 0; i < n; i++)
		acc = step(acc, i);
	printf("tcc result %ld\n", acc);
	return 0;
}
