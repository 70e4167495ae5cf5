/*
 * filemap-jit memfd|deleted|anon — code in a 2 MiB file with holes, mapped
 * shared and executable: a memfd, or a file on disk removed once open (a
 * runtime's backing file). The file is written with pwrite only at three
 * places (its first page, a page past 1 MiB, its last page), one function
 * "mov eax, K; ret" at each; the rest of the file is holes. Then the whole
 * file is mapped PROT_READ|PROT_EXEC, MAP_SHARED, and each function is
 * called.
 *
 * A recorder reads the mapping's bytes (no file the decoder could open
 * later): they must be the file's, holes read as zeros. Manifest: one
 * "mmap" line (the 2 MiB hashed). Prints "functions 11 22 33".
 *
 * With anon it maps 512 KiB of anonymous memory executable instead, which
 * holds only zeros (a recorder needs to read none of it), and prints
 * "anon zeros". Manifest: one "mmap" line.
 */
#include "manifest.h"

#define SIZE (2UL << 20)

typedef int (*int_fn)(void);

int main(int argc, char **argv)
{
	int fd;
	if (argc > 1 && strcmp(argv[1], "anon") == 0) {
		const size_t n = 512UL << 10;
		mf_lock();
		uint8_t *p = mmap(NULL, n, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			mf_die("mmap: %s", strerror(errno));
		mf_log(p, n, "mmap");
		mf_unlock();
		for (size_t i = 0; i < n; i++)
			if (p[i] != 0)
				mf_die("anonymous memory not zero at %zu", i);
		printf("anon zeros\n");
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "deleted") == 0) {
		const char *dir = getenv("TMPDIR");
		char path[4096];
		snprintf(path, sizeof path, "%s/filemap-jit.XXXXXX", dir && *dir ? dir : "/tmp");
		fd = mkstemp(path);
		if (fd < 0)
			mf_die("mkstemp %s: %s", path, strerror(errno));
		unlink(path);
	} else {
		fd = memfd_create("filemap-jit", 0);
		if (fd < 0)
			mf_die("memfd_create: %s", strerror(errno));
	}
	if (ftruncate(fd, SIZE) != 0)
		mf_die("ftruncate: %s", strerror(errno));
	const off_t at[3] = {0, (1UL << 20) + 2 * MF_PAGE, SIZE - MF_PAGE};
	for (int i = 0; i < 3; i++) {
		uint8_t code[6] = {0xb8, 0, 0, 0, 0, 0xc3}; /* mov eax, imm32; ret */
		uint32_t k = 11 * (uint32_t)(i + 1);
		memcpy(code + 1, &k, 4);
		if (pwrite(fd, code, sizeof code, at[i]) != (ssize_t)sizeof code)
			mf_die("pwrite: %s", strerror(errno));
	}
	mf_lock();
	uint8_t *p = mmap(NULL, SIZE, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		mf_die("mmap: %s", strerror(errno));
	mf_log(p, SIZE, "mmap");
	mf_unlock();
	int got[3];
	for (int i = 0; i < 3; i++)
		got[i] = ((int_fn)(void *)(p + at[i]))();
	printf("functions %d %d %d\n", got[0], got[1], got[2]);
	return 0;
}
