/*
 * exitcode — exits with the status given as argument.
 *
 * Usage: exitcode N
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: exitcode N\n");
		return 2;
	}
	int n = atoi(argv[1]);
	printf("exiting with %d\n", n);
	return n;
}
