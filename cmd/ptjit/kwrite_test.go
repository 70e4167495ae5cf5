package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKernelWrites runs kwrite (testdata/kwrite.c: read, pread, a read
// across two pages, recv and getrandom into RWX code that already ran;
// readv, preadv, preadv2 across two pages, recvmsg, recvmmsg and
// process_vm_readv of itself with their second buffer in that code; read
// into the writable view of a memfd mapped twice; and fstat, statx,
// wait4, pipe2, clock_gettime, uname, rt_sigaction, getsockname,
// epoll_wait and poll writing their structs into that code, getsockname's
// and epoll_wait's a function that then runs) under every W^X
// mode with soft PT. W^X keeps that code
// not writable for the kernel: without the kernel-write stops each call
// failed with EFAULT, or copied only its first buffer. The program behaves as alone, the decoded flow of
// its JIT code equals the instructions it executed (so the versions hold
// the bytes the kernel copied), and the meta table counts the pages
// opened for the kernel's copies.
func TestKernelWrites(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("kwrite")
	native := e2eRun(t, []string{prog}, nil, "", "")
	if native.code != 0 {
		t.Fatalf("alone: exit %d\n%s", native.code, native.stdout)
	}
	for _, mode := range []string{"precise", "batch", "auto"} {
		t.Run(mode, func(t *testing.T) {
			dir, gt := filepath.Join(t.TempDir(), "rec"), filepath.Join(t.TempDir(), "truth")
			r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "--wx="+mode, "--ground-truth", gt, "-o", dir, "--", prog)
			if r.code != native.code || r.stdout != native.stdout {
				t.Fatalf("under --wx=%s: exit %d\n%s\nalone:\n%s\n%s", mode, r.code, r.stdout, native.stdout, r.stderr)
			}
			tids, total := checkFlows(t, dir, groundTruth(t, gt))
			t.Logf("%d threads, %d JIT instructions, decoded exactly", len(tids), total)
			meta := recordingMeta(t, dir)
			// read, pread, the read across pages 1 and 2, recv,
			// getrandom (page 1 again), readv, preadv, preadv2 (two
			// pages), recvmsg, recvmmsg, process_vm_readv, the alias,
			// then the struct calls
			if n, _ := strconv.Atoi(meta["wx_kernel_write_pages"]); n < 20 {
				t.Errorf("wx_kernel_write_pages %q, want at least 20", meta["wx_kernel_write_pages"])
			}
		})
	}
}

// TestKernelWritesScatter: kwrite scatter 12 has code in 12 mappings
// 256 MiB apart, more places than ptjit's kernel-write filters have
// ranges for (8), and reads a new function over the one that ran in each.
// Every read succeeds as alone: the last filter covers every address
// (and says so once). Found by the new-user trial: the ninth and later
// reads failed with EFAULT and the program crashed.
func TestKernelWritesScatter(t *testing.T) {
	e2eSetup(t)
	argv := []string{e2eProg("kwrite"), "scatter", "12"}
	native := e2eRun(t, argv, nil, "", "")
	if native.code != 0 {
		t.Fatalf("alone: exit %d\n%s", native.code, native.stdout)
	}
	for _, mode := range []string{"auto", "precise"} {
		dir := filepath.Join(t.TempDir(), "rec")
		r := e2ePtjit(t, nil, append([]string{"run", "--wx=" + mode, "-o", dir, "--"}, argv...)...)
		if r.code != native.code || r.stdout != native.stdout {
			t.Errorf("--wx=%s: exit %d\n%s\nalone:\n%s\n%s", mode, r.code, r.stdout, native.stdout, r.stderr)
		}
		e2eCheckMessages(t, r.stderr)
		if !strings.Contains(r.stderr, "every read(2) and the like of the process stops") {
			t.Errorf("--wx=%s: no line says every read stops:\n%s", mode, r.stderr)
		}
	}
}

// TestKernelWritesRace runs kwrite race (a second thread runs a function
// at the start of a code page in a loop while the main thread reads new
// functions from a pipe into the middle of that page, with readv and
// read, and runs each) under every W^X mode, with each event source, and
// once with soft PT against the ground truth. The copies must all succeed
// and every function return its value, as alone: before the pages of a
// copy in flight stayed writable when the other thread ran code there,
// about 1,900 of 2,000 copies failed with EFAULT.
func TestKernelWritesRace(t *testing.T) {
	e2eSetup(t)
	prog := e2eProg("kwrite")
	const copies = "1000"
	native := e2eRun(t, []string{prog, "race", copies}, nil, "", "")
	if native.code != 0 || native.stdout != "race: "+copies+" copies, 0 bad\n" {
		t.Fatalf("alone: exit %d\n%s", native.code, native.stdout)
	}
	for _, events := range e2eEventSources(t) {
		for _, mode := range []string{"precise", "batch", "auto"} {
			t.Run(events+"/"+mode, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "rec")
				r := e2ePtjit(t, nil, "run", "-q", "--pt=off", "--events="+events, "--wx="+mode, "-o", dir, "--", prog, "race", copies)
				if r.code != native.code || r.stdout != native.stdout {
					t.Fatalf("exit %d\n%s\nalone:\n%s\n%s", r.code, r.stdout, native.stdout, r.stderr)
				}
			})
		}
	}
	t.Run("soft", func(t *testing.T) {
		dir, gt := filepath.Join(t.TempDir(), "rec"), filepath.Join(t.TempDir(), "truth")
		r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "--ground-truth", gt, "-o", dir, "--", prog, "race", "100")
		if r.code != 0 || r.stdout != "race: 100 copies, 0 bad\n" {
			t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
		}
		tids, total := checkFlows(t, dir, groundTruth(t, gt))
		if len(tids) != 2 {
			t.Errorf("%d threads ran JIT code, want 2", len(tids))
		}
		t.Logf("%d threads, %d JIT instructions, decoded exactly", len(tids), total)
	})
}
