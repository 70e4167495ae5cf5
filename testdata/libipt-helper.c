/* libipt-helper: decodes a raw PT trace through one raw image with libipt's
 * instruction or block decoder.
 *
 *   libipt-helper insn|block|bench-insn|bench-block PT IMAGE BASE
 *       insn, block: every instruction's address (hex), errors as
 *       "error OFFSET IP CODE", then "insns N"; bench-*: "N NANOSECONDS".
 *   libipt-helper time PT IMAGE BASE CTC-RATIO MTC-FREQ
 *       every instruction's address (hex), pt_insn_time and lost MTCs, with
 *       CPUID 0x15 = 1:CTC-RATIO and the given MTC frequency.
 *
 * Used by the libipt differential tests (decode/libipt_cgo_test.go,
 * softpt/libipt_cgo_test.go) and by ptjit-bench's decoders row; built into
 * bin/ where libipt-dev is installed. */
#include <intel-pt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint8_t *load(const char *path, size_t *size) {
	FILE *f = fopen(path, "rb");
	if (!f) { perror(path); exit(2); }
	fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
	uint8_t *buf = malloc(n ? n : 1);
	if (fread(buf, 1, n, f) != (size_t) n) { perror(path); exit(2); }
	fclose(f); *size = n; return buf;
}

static uint64_t now(void) {
	struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int main(int argc, char **argv) {
	const char *mode = argc > 1 ? argv[1] : "";
	int timed = strcmp(mode, "time") == 0;
	if (argc != (timed ? 7 : 5)) {
		fprintf(stderr, "usage: insn|block|bench-insn|bench-block PT IMAGE BASE\n"
				"       time PT IMAGE BASE CTC-RATIO MTC-FREQ\n");
		return 2;
	}
	int print = strncmp(mode, "bench", 5) != 0;
	int block = strstr(mode, "block") != NULL;
	size_t size;
	struct pt_config config;
	pt_config_init(&config);
	config.begin = load(argv[2], &size);
	config.end = config.begin + size;
	if (timed) {
		config.cpuid_0x15_eax = 1;
		config.cpuid_0x15_ebx = strtoul(argv[5], NULL, 0);
		config.mtc_freq = strtoul(argv[6], NULL, 0);
	}
	uint64_t base = strtoull(argv[4], NULL, 0);
	/* Like ptxed: sections through an image section cache. */
	struct pt_image_section_cache *iscache = pt_iscache_alloc(NULL);
	struct pt_image *image = pt_image_alloc(NULL);
	int isid = pt_iscache_add_file(iscache, argv[3], 0, UINT64_MAX, base);
	if (isid < 0 || pt_image_add_cached(image, iscache, isid, NULL) < 0) { fprintf(stderr, "image\n"); return 2; }
	uint64_t ninsn = 0, t0 = now();
	if (!block) {
		struct pt_insn_decoder *d = pt_insn_alloc_decoder(&config);
		pt_insn_set_image(d, image);
		for (;;) {
			int st = pt_insn_sync_forward(d);
			if (st < 0) break;
			for (;;) {
				while (st & pts_event_pending) {
					struct pt_event ev;
					st = pt_insn_event(d, &ev, sizeof(ev));
					if (st < 0) break;
				}
				if (st < 0 || (st & pts_eos)) break;
				struct pt_insn insn;
				st = pt_insn_next(d, &insn, sizeof(insn));
				if (st < 0) {
					if (print) { uint64_t off = 0; pt_insn_get_offset(d, &off); printf("error %" PRIx64 " %" PRIx64 " %d\n", off, insn.ip, -st); }
					break;
				}
				ninsn++;
				if (timed) {
					uint64_t tsc = 0; uint32_t lost_mtc = 0, lost_cyc = 0;
					if (pt_insn_time(d, &tsc, &lost_mtc, &lost_cyc) < 0) { printf("error time\n"); return 0; }
					printf("%" PRIx64 " %" PRIu64 " %u\n", insn.ip, tsc, lost_mtc);
				} else if (print) {
					printf("%" PRIx64 "\n", insn.ip);
				}
			}
		}
	} else {
		struct pt_block_decoder *d = pt_blk_alloc_decoder(&config);
		pt_blk_set_image(d, image);
		for (;;) {
			int st = pt_blk_sync_forward(d);
			if (st < 0) break;
			for (;;) {
				while (st & pts_event_pending) {
					struct pt_event ev;
					st = pt_blk_event(d, &ev, sizeof(ev));
					if (st < 0) break;
				}
				if (st < 0 || (st & pts_eos)) break;
				struct pt_block b;
				st = pt_blk_next(d, &b, sizeof(b));
				ninsn += b.ninsn;
				if (st < 0) break;
			}
		}
	}
	uint64_t t1 = now();
	if (print) printf("insns %" PRIu64 "\n", ninsn);
	else printf("%" PRIu64 " %" PRIu64 "\n", ninsn, t1 - t0);
	return 0;
}
