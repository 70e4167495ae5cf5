// The launcher helper (see doc.go), in C so that it costs an execve and no
// Go runtime start: a constructor that runs before the Go runtime of any
// binary that links package ptrun (ptjit itself and the test binaries).
// When argv[1] is the helper argument it does the helper's whole life and
// never returns; otherwise it returns at once.
//
// Only what a single-threaded process may do before main: raw reads and
// writes, prctl, close and execve. No allocation.

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>

#include "helper_linux_amd64.h"

extern char **environ;

// The most BPF instructions the kernel accepts in one filter.
#define MAX_INSNS 4096

static struct sock_filter insns[MAX_INSNS];

static void fail(int code, const char *what, int err) {
	char msg[512];
	const char *s = err ? strerror(err) : "";
	int n;
	if (err) {
		// Go spells errno strings in lower case; so does the rest of ptjit.
		char e[128];
		snprintf(e, sizeof e, "%s", s);
		if (e[0] >= 'A' && e[0] <= 'Z' && !(e[1] >= 'A' && e[1] <= 'Z')) {
			e[0] += 'a' - 'A';
		}
		n = snprintf(msg, sizeof msg, "ptjit: %s: %s\n", what, e);
	} else {
		n = snprintf(msg, sizeof msg, "ptjit: %s\n", what);
	}
	if (n > 0) {
		ssize_t w = write(2, msg, n < (int)sizeof msg ? (size_t)n : sizeof msg - 1);
		(void)w;
	}
	_exit(code);
}

// readFull reads exactly n bytes; it returns 0 on success, -1 at EOF or on
// an error.
static int readFull(int fd, void *buf, size_t n) {
	char *p = buf;
	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR) {
			continue;
		}
		if (r <= 0) {
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int parseFD(const char *s) {
	char *end;
	long v = strtol(s, &end, 10);
	if (*s == '\0' || *end != '\0' || v < 0 || v > 1 << 20) {
		return -1;
	}
	return (int)v;
}

// helperMain is the helper: argv is [self, HELPER_ARG, FD, CLOSED, PATH,
// ARGV0, ARGS...]. The protocol on FD: the helper writes one byte (it
// runs); the tracer seizes it and writes the filter as a little-endian
// uint16 instruction count and that many struct sock_filter; EOF instead
// means the tracer is gone, and the program must not run untraced.
static void helperMain(int argc, char **argv) {
	if (argc < 6) {
		fail(127, "launcher: bad arguments", 0);
	}
	int fd = parseFD(argv[2]);
	if (fd < 0) {
		fail(127, "launcher: bad handshake fd", 0);
	}
	int closeStd[3] = {0, 0, 0};
	if (strcmp(argv[3], "-") != 0) {
		for (const char *p = argv[3]; *p; p++) {
			if (*p >= '0' && *p <= '2') {
				closeStd[*p - '0'] = 1;
			} else if (*p != ',') {
				fail(127, "launcher: bad fd list", 0);
			}
		}
	}
	const char *path = argv[4];
	char **args = argv + 5;

	char one = 1;
	for (;;) {
		ssize_t w = write(fd, &one, 1);
		if (w == 1) {
			break;
		}
		if (w < 0 && errno == EINTR) {
			continue;
		}
		_exit(127);
	}
	uint8_t hdr[2];
	if (readFull(fd, hdr, sizeof hdr) != 0) {
		_exit(127); // the tracer is gone before tracing started
	}
	unsigned count = hdr[0] | (unsigned)hdr[1] << 8;
	if (count == 0 || count > MAX_INSNS) {
		fail(127, "launcher: bad filter length", 0);
	}
	if (readFull(fd, insns, count * sizeof insns[0]) != 0) {
		_exit(127);
	}
	close(fd);

	// Without CAP_SYS_ADMIN the kernel demands no_new_privs first; it is
	// only set in that case, so a root-run program keeps its set-uid
	// semantics.
	struct sock_fprog prog = {.len = (unsigned short)count, .filter = insns};
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
		int err = errno;
		if (err == EACCES) {
			if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
				fail(126, "prctl(PR_SET_NO_NEW_PRIVS)", errno);
			}
			if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0) {
				fail(126, "installing seccomp filter", errno);
			}
		} else {
			fail(126, "installing seccomp filter", err);
		}
	}
	for (int i = 0; i <= 2; i++) {
		if (closeStd[i]) {
			close(i);
		}
	}
	execve(path, args, environ);
	int err = errno;
	// The standard error may be one of the fds just closed: the message
	// then goes nowhere, as a shell's would.
	fail(err == ENOENT ? 127 : 126, args[0], err);
}

__attribute__((constructor)) static void ptjitHelperInit(int argc, char **argv) {
	if (argc > 1 && argv != NULL && strcmp(argv[1], PTJIT_HELPER_ARG) == 0) {
		helperMain(argc, argv);
	}
}
