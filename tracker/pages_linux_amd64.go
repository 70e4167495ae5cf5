package tracker

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/snapshot"
	"golang.org/x/sys/unix"
)

// Copying only what changed (design in doc.go, "Changed pages";
// measurements in docs/decisions.md). A JIT range's first version is read
// whole and the range is write-protected with a userfaultfd in asynchronous mode
// (UFFD_FEATURE_WP_ASYNC: a store to a protected page is not reported, the
// kernel just marks the page written and lets it go on). Each later
// version of the same range asks PAGEMAP_SCAN which pages were written
// since (and protects them again in the same call), reads those, and
// names the previous version's pages for the rest (db.AddVersionPages).
// The userfaultfd is made by a syscall injected at a stop: the seccomp
// stop of the first exec-adding call over a tracked range
// (restartForPages) or, with BPF events, where such calls make no
// seccomp stop, the fallback stop of the first one (pagesAtEventStop).

// CopyMode is --copy: how later versions of a JIT range are read.
type CopyMode string

const (
	// CopyAuto tracks written pages in ranges of changedMin or more,
	// where the kernel can (see doc.go for the measured threshold).
	CopyAuto CopyMode = "auto"
	// CopyChanged tracks them in every range it can (tests use it).
	CopyChanged CopyMode = "changed"
	// CopyFull reads every version whole.
	CopyFull CopyMode = "full"
)

// ParseCopy parses --copy.
func ParseCopy(s string) (CopyMode, error) {
	switch CopyMode(s) {
	case CopyAuto, CopyChanged, CopyFull:
		return CopyMode(s), nil
	}
	return "", fmt.Errorf("--copy: %q is not auto, changed or full", s)
}

// changedMin is the smallest range --copy=auto tracks: below it a full
// copy costs less than a scan and the write faults (doc.go).
const changedMin = 1 << 20

// CopyStats say how versions were read (Stats.Copy).
type CopyStats struct {
	Mode CopyMode
	// Ranges whose written pages were tracked, the versions read from
	// their written pages alone, and the pages read and held by every
	// version of those ranges (their first, full, versions included).
	Ranges    int
	Versions  int
	PagesRead int64
	Pages     int64
	// Fallback is why full copies ran where tracking was wanted (the
	// first reason seen); "" when none did.
	Fallback string
}

// pageState is what one address space keeps for changed-page tracking
// (space.pages).
type pageState struct {
	tried bool // setup was tried (pagesSetup), with or without success
	ok    bool // uffd and pagemap are ready
	shmem bool // the uffd write-protects shared memory too
	// forked: the process forked, or is a fork's child: its shared
	// anonymous memory is another process's too, whose stores do not
	// fault here (pagesRegister)
	forked  bool
	uffd    int // ptjit's duplicate of the userfaultfd made in the program
	pagemap *os.File
	// ranges are the write-protected ranges, by start address.
	ranges map[uint64]*trackedRange
}

// trackedRange is one write-protected range: the version last recorded
// for exactly [start, end) of region, whose bytes are the range's at the
// moment it was protected, plus the pages written since.
type trackedRange struct {
	region int64
	end    uint64
	last   int64
	shared bool // shared anonymous memory (pagesRegister)
}

// forkedShared: the process forks (or is a fork's child): its shared
// anonymous memory is no longer its own, and the ranges of it are read
// whole from now on (pagesRegister).
func (st *pageState) forkedShared() {
	st.forked = true
	for s, r := range st.ranges {
		if r.shared {
			delete(st.ranges, s)
		}
	}
}

// close releases the descriptors; the kernel drops the registration with
// the last reference to the userfaultfd.
func (st *pageState) close() {
	if st.ok {
		unix.Close(st.uffd)
		st.pagemap.Close()
	}
	st.ok = false
	st.ranges = nil
}

// forget drops the ranges of a region that ended.
func (st *pageState) forget(region int64) {
	for s, r := range st.ranges {
		if r.region == region {
			delete(st.ranges, s)
		}
	}
}

// overlapping drops the ranges that [start, end) overlaps: a new region
// there is new memory (an mremap may move pages that are protected, and
// not written, into it).
func (st *pageState) overlapping(start, end uint64) {
	for s, r := range st.ranges {
		if s < end && start < r.end {
			delete(st.ranges, s)
		}
	}
}

// pagesEffect drops the tracked ranges a successful munmap, mremap or
// mmap changed, before the Space records the call's versions: memory
// mapped anew there is not registered (the scan would fail and the range
// be read whole anyway), but pages an mremap moved in from another tracked
// range are, and hold bytes no scan reports written. An exit effect
// (syscalls_linux_amd64.go).
func (t *Tracer) pagesEffect(x *sysExit) {
	st := &x.sp.pages
	if len(st.ranges) == 0 {
		return
	}
	switch x.op.nr {
	case unix.SYS_MUNMAP:
		st.overlapping(x.op.rng.s, x.op.rng.e)
	case unix.SYS_MREMAP:
		st.overlapping(x.op.rng.s, x.op.rng.e)
		st.overlapping(x.out.s, x.out.e)
	case unix.SYS_MMAP:
		st.overlapping(x.out.s, x.out.e)
	}
}

func (t *Tracer) copyMode() CopyMode {
	if t.opts.Copy == "" {
		return CopyAuto
	}
	return t.opts.Copy
}

// pagesWanted: a range of size bytes is tracked in this mode.
func (t *Tracer) pagesWanted(size uint64) bool {
	switch t.copyMode() {
	case CopyChanged:
		return true
	case CopyAuto:
		return size >= changedMin
	}
	return false
}

func (t *Tracer) copyFallback(reason string) {
	if t.result.Stats.Copy.Fallback == "" {
		t.result.Stats.Copy.Fallback = reason
	}
}

// restartForPages handles the seccomp stop of a call that makes anonymous
// memory executable in a space that has no userfaultfd yet, and whose
// range the mode tracks: the call is skipped, the userfaultfd made at its
// exit stop (pagesSetup), and the call restarted (restartAround). Reports
// false, with nothing done, where there is nothing to set up.
//
// Precondition: on the locked tracer thread; th is in its seccomp stop.
func (t *Tracer) restartForPages(th *thread, regs unix.PtraceRegs, op *pendingOp) bool {
	sp := th.proc.space
	if sp == nil || sp.pages.tried || th.dying || t.copyMode() == CopyFull || !t.pagesCall(op) {
		return false
	}
	sp.pages.tried = true
	return t.restartAround(th, regs, op, t.pagesSetup)
}

// pagesAtEventStop handles a fallback stop of the BPF program (th is in
// the SIGSTOP's signal-delivery-stop, its registers those of the call as
// it returned) in a space that has no userfaultfd yet, when the call made
// anonymous memory executable and the mode tracks its range: it makes the
// userfaultfd there (pagesSetup). The call's version was recorded whole
// (from its event, or read when the ring was drained: the thread runs no
// code of its own between its call and this stop); the range's next
// version is read whole and registered, and the versions after it are
// read from their written pages (pagesVersion). With BPF events the
// exec-adding calls make no seccomp stop where restartForPages would do
// this, and a range the kernel cannot copy (more than the budget) is
// exactly the one worth tracking: its calls all come to such a stop.
//
// Precondition: on the locked tracer thread; th is in a
// signal-delivery-stop.
func (t *Tracer) pagesAtEventStop(th *thread, regs *unix.PtraceRegs) {
	sp := th.proc.space
	if sp == nil || sp.pages.tried || th.dying || th.proc.helper || t.copyMode() == CopyFull {
		return
	}
	op := &pendingOp{nr: int(regs.Orig_rax), args: [6]uint64{regs.Rdi, regs.Rsi, regs.Rdx, regs.R10, regs.R8, regs.R9}}
	if !t.pagesCall(op) || int64(regs.Rax) < 0 && int64(regs.Rax) >= -4095 {
		return
	}
	t.pagesSetup(th)
}

// pagesCall: op makes anonymous memory executable and not writable, over
// a range the mode tracks (a call worth making the userfaultfd for).
func (t *Tracer) pagesCall(op *pendingOp) bool {
	switch op.nr {
	case unix.SYS_MPROTECT, unix.SYS_PKEY_MPROTECT:
	case unix.SYS_MMAP:
		if op.args[3]&unix.MAP_ANONYMOUS == 0 {
			return false
		}
	default:
		return false
	}
	prot := op.args[2]
	return prot&unix.PROT_EXEC != 0 && prot&unix.PROT_WRITE == 0 && t.pagesWanted(pageUp(op.args[1]))
}

// pagesSetup makes a userfaultfd in th's process by an injected
// userfaultfd(2), takes a duplicate with pidfd_getfd and closes the
// program's descriptor again by an injected close: the program never
// holds a descriptor it did not open (for the moment between, its next
// open may get another number, as when a thread of its own opens one).
// The userfaultfd works on the mm of the process that made it, from any
// process that holds it. Any failure leaves full copies, with the reason.
//
// Precondition: on the locked tracer thread; th is at a syscall-exit stop
// or a signal-delivery-stop.
func (t *Tracer) pagesSetup(th *thread) {
	p := th.proc
	st := &p.space.pages
	st.tried = true
	if reason := t.pagesRefused(p); reason != "" {
		t.copyFallback(reason)
		return
	}
	fd, err := t.inject(th, unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly)
	if err != nil {
		if !errors.Is(err, ErrThreadGone) {
			t.copyFallback("userfaultfd: " + errnoText(err))
		}
		return
	}
	mine := -1
	pidfd, err := unix.PidfdOpen(p.pid, 0)
	if err == nil {
		mine, err = unix.PidfdGetfd(pidfd, int(fd), 0) // always close-on-exec
		unix.Close(pidfd)
	}
	if _, cerr := t.inject(th, unix.SYS_CLOSE, uint64(fd)); cerr != nil && err == nil && !errors.Is(cerr, ErrThreadGone) {
		t.warnf("pid %d: closing the userfaultfd ptjit made: %v", p.pid, cerr)
	}
	if err != nil {
		t.copyFallback("pidfd_getfd: " + errnoText(err))
		return
	}
	shmem, err := uffdAPIHandshake(mine)
	if err != nil {
		unix.Close(mine)
		t.copyFallback("the kernel has no UFFD_FEATURE_WP_ASYNC (Linux 6.7)")
		return
	}
	pm, err := os.Open("/proc/" + strconv.Itoa(p.pid) + "/pagemap")
	if err == nil {
		// PAGEMAP_SCAN came with WP_ASYNC; probed anyway (a page of the
		// vdso, which no uffd covers)
		err = pmScan(int(pm.Fd()), p.space.vdso[0], p.space.vdso[0]+pageSize, 0, 0, pageIsPresent, func(uint64, uint64) {})
		if err != nil {
			pm.Close()
		}
	}
	if err != nil {
		unix.Close(mine)
		t.copyFallback("PAGEMAP_SCAN: " + errnoText(err))
		return
	}
	st.ok, st.uffd, st.pagemap, st.shmem = true, mine, pm, shmem
	st.ranges = map[uint64]*trackedRange{}
}

// pagesRefused says why ptjit must not make a userfaultfd in p: a
// seccomp filter of the program's own might kill it for the call, and a
// program with a userfaultfd of its own may register the ranges ptjit
// would (the second registration fails with EBUSY).
func (t *Tracer) pagesRefused(p *process) string {
	dir := "/proc/" + strconv.Itoa(p.pid)
	// ptjit's own (a container's, inherited), the launcher's and those
	// ptjit injected
	if seccompFilters(dir) > seccompFilters("/proc/self")+1+p.full.filters {
		return "the program has a seccomp filter of its own"
	}
	fds, _ := os.ReadDir(dir + "/fd")
	for _, f := range fds {
		if l, _ := os.Readlink(dir + "/fd/" + f.Name()); l == "anon_inode:[userfaultfd]" {
			return "the program uses userfaultfd"
		}
	}
	return ""
}

// seccompFilters is the Seccomp_filters count of /proc/PID/status in dir
// (0 when it cannot be read).
func seccompFilters(dir string) int {
	v, _ := statusField(dir, "Seccomp_filters")
	n, _ := strconv.Atoi(v)
	return n
}

func errnoText(err error) string {
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e) + " (" + e.Error() + ")"
	}
	return err.Error()
}

// pagesVersion records v, a new version of an anonymous range read
// through pid, from its written pages when the range is tracked; full
// reads it whole. It reports false where the version is not its to
// record (the mode, the space or the protection rule tracking out: the
// caller reads it whole).
//
// Precondition: on the locked tracer thread.
func (t *Tracer) pagesVersion(sp *space, pid int, v db.Version, prot int, full func() int64) (int64, bool) {
	st := &sp.pages
	// W^X keeps writable+executable memory itself (a store is emulated or
	// stepped); tracking is for code the program writes while it is not
	// executable
	if !st.ok || prot&unix.PROT_WRITE != 0 || !t.pagesWanted(v.Size) {
		return 0, false
	}
	start, end := v.Addr, v.Addr+v.Size
	cs := &t.result.Stats.Copy
	if r := st.ranges[start]; r != nil && r.region == v.Region && r.end == end {
		if id, ok := t.changedVersion(sp, pid, r, v); ok {
			return id, true
		}
	}
	// protecting the range again resets what the scan would report for
	// any tracked range it overlaps: those are read whole next time
	st.overlapping(start, end)
	shared, reason := t.pagesRegister(st, pid, start, end)
	if reason != "" {
		t.copyFallback(reason)
		return 0, false
	}
	id := full()
	st.ranges[start] = &trackedRange{region: v.Region, end: end, last: id, shared: shared}
	cs.Ranges++
	n := int64(v.Size / pageSize)
	cs.PagesRead += n
	cs.Pages += n
	return id, true
}

// pagesRegister registers [start, end) with the space's userfaultfd and
// write-protects it, before its bytes are read: a store after this is
// seen by the next scan. Private anonymous memory qualifies, and shared
// anonymous memory (MAP_SHARED|MAP_ANONYMOUS, as PHP's opcache JIT
// buffer) in a process that has not forked and is no fork's child: no
// other process maps it then (it has no name to open it by, /proc's
// map_files aside), so every store into it is made through this mapping.
// A store through another mapping of shared or file memory (a memfd, a
// file, SysV shm, anonymous memory a fork shares) changes these pages
// without a fault here. It returns whether the range is shared memory,
// or why it cannot be tracked.
func (t *Tracer) pagesRegister(st *pageState, pid int, start, end uint64) (shared bool, reason string) {
	maps, err := snapshot.ReadMaps(pid)
	if err != nil {
		return false, "reading the maps: " + err.Error()
	}
	at := start
	for _, m := range maps {
		if m.End <= at || m.Start >= end {
			continue
		}
		if m.Start > at {
			break
		}
		switch {
		case m.Shared && m.Path == "/dev/zero (deleted)" && st.shmem && !st.forked:
			shared = true
		case m.Shared || m.Inode != 0 || strings.HasPrefix(m.Path, "[v"):
			return false, "shared, file-backed or special memory"
		}
		at = m.End
	}
	if at < end {
		return false, "a range not mapped whole"
	}
	if err := uffdRegisterWP(st.uffd, start, end); err != nil {
		return false, "UFFDIO_REGISTER: " + errnoText(err)
	}
	if err := uffdProtect(st.uffd, start, end); err != nil {
		return false, "UFFDIO_WRITEPROTECT: " + errnoText(err)
	}
	return shared, ""
}

// changedVersion records v from the pages of r written since its last
// version: those PAGEMAP_SCAN reports written (and write-protects again in
// the same call), and those no longer populated (MADV_DONTNEED drops
// anonymous pages with their protection marker: they read as zeros now).
// It reports false when a part of the range is no longer registered (the
// program mapped something new there): the caller registers it again and
// reads it whole.
func (t *Tracer) changedVersion(sp *space, pid int, r *trackedRange, v db.Version) (int64, bool) {
	st := &sp.pages
	start, end := v.Addr, v.Addr+v.Size
	fd := int(st.pagemap.Fd())
	var dirty []ival
	add := func(s, e uint64) { dirty = append(dirty, ival{max(s, start), min(e, end)}) }
	err := pmScan(fd, start, end, pmScanWPMatching|pmScanCheckWPAsync, 0, pageIsWritten, add)
	if err == nil {
		none := uint64(pageIsPresent | pageIsSwapped)
		err = pmScan(fd, start, end, pmScanCheckWPAsync, none, none, add)
	}
	if err != nil {
		return 0, false
	}
	var runs []db.PageRun
	var read int64
	for _, d := range mergeIvals(dirty) {
		// read and queued a chunk at a time, as AddVersionRead does
		for s := d.s; s < d.e; s += db.ChunkSize {
			b := db.Buffer(int(min(db.ChunkSize, d.e-s)))
			if err := snapshot.ReadMem(pid, s, b); err != nil {
				clear(b)
				t.result.Stats.ReadErrors++
				t.warnf("%v (recorded as zeros)", err)
			}
			runs = append(runs, db.PageRun{Addr: s, Data: b})
			read += int64(len(b))
		}
	}
	id, _ := t.rec.AddVersionPages(v, r.last, runs)
	r.last = id
	cs := &t.result.Stats.Copy
	cs.Versions++
	cs.PagesRead += read / pageSize
	cs.Pages += int64(v.Size / pageSize)
	t.result.Stats.Bytes += read
	return id, true
}

// CopySummary is the run summary's part on copies: which mode ran, and
// how much it read.
func CopySummary(c CopyStats) string {
	if c.Ranges > 0 {
		s := fmt.Sprintf("copy: changed pages for %d %s (%d of %d pages read)", c.Ranges, plur(c.Ranges, "range", "ranges"), c.PagesRead, c.Pages)
		if c.Fallback != "" {
			s += ", full elsewhere (" + c.Fallback + ")"
		}
		return s
	}
	switch {
	case c.Fallback != "":
		return "copy: full (" + c.Fallback + ")"
	case c.Mode == CopyFull:
		return "copy: full (--copy=full)"
	case c.Mode == CopyChanged:
		return "copy: full (no anonymous range made executable)"
	}
	return fmt.Sprintf("copy: full (no range of %d MiB or more made executable)", changedMin>>20)
}

func plur(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Sparse reads. A JIT or a Lisp reserves large anonymous RWX memory and
// uses a little of it (SBCL maps a 1 GiB dynamic space and a 171 MiB
// one, MAP_NORESERVE): a version of such a range read whole copied a
// gigabyte of zeros through process_vm_readv. Private anonymous pages
// that are neither present nor swapped out have never been written since
// they were mapped or dropped (MADV_DONTNEED): they read as zeros, and
// PAGEMAP_SCAN finds the others in one call per 64 runs. A file mapping's
// absent pages hold the file's bytes, and a shared one's may be in the
// page cache: only private anonymous memory qualifies there. A version
// of a shared mapping of a file (Erlang's 8 MiB memfd JIT area, read
// whole when mapped) reads only the file's data runs instead: its holes
// are zeros (fileDataRuns).

// populatedRuns are the runs of pages of a range that may hold other
// bytes than zeros.
type populatedRuns []ival

// populated returns the populated runs of [start, end) of pid's memory,
// when the range is private anonymous memory of sparseMin or more and
// PAGEMAP_SCAN answers; ok false means: read it all.
func populated(pid int, start, end uint64) (runs populatedRuns, ok bool) {
	return sparseRuns(pid, start, end, false)
}

// versionRuns is populated for reading a version: it also answers for one
// shared mapping of a file (a memfd, shared anonymous memory, a file on
// disk), with the runs of the file that hold data (fileDataRuns).
func versionRuns(pid int, start, end uint64) (runs populatedRuns, ok bool) {
	return sparseRuns(pid, start, end, true)
}

// sparseRuns is populated (files false) or versionRuns (files true).
func sparseRuns(pid int, start, end uint64, files bool) (runs populatedRuns, ok bool) {
	least := uint64(sparseMin)
	if files {
		least = fileSparseMin
	}
	if end-start < least {
		return nil, false
	}
	maps, ok := mapsOver(pid, start, end)
	if !ok {
		return nil, false
	}
	if files && len(maps) == 1 && maps[0].Shared && maps[0].Inode != 0 {
		return fileDataRuns(pid, start, end, maps[0])
	}
	if end-start < sparseMin {
		return nil, false
	}
	for _, m := range maps {
		if m.Shared || m.Inode != 0 || m.Path != "" {
			return nil, false
		}
	}
	return pagemapRuns(pid, start, end)
}

// mapsOver returns the mappings that cover [start, end) of pid's memory
// with no gap (asked of the kernel one by one where it can: mapAt).
func mapsOver(pid int, start, end uint64) ([]snapshot.Mapping, bool) {
	var out []snapshot.Mapping
	for at := start; at < end; {
		m, ok := mapAt(pid, at)
		if !ok || m.Start > at || m.End <= at {
			return nil, false
		}
		out = append(out, m)
		at = m.End
	}
	return out, true
}

// pagemapRuns: the runs of [start, end), private anonymous memory, whose
// pages are present or swapped out (PAGEMAP_SCAN).
func pagemapRuns(pid int, start, end uint64) (runs populatedRuns, ok bool) {
	pm, err := os.Open("/proc/" + strconv.Itoa(pid) + "/pagemap")
	if err != nil {
		return nil, false
	}
	defer pm.Close()
	// The scan's categories must all hold (after inversion): it finds
	// the pages neither present nor swapped; the runs are the rest.
	none := uint64(pageIsPresent | pageIsSwapped)
	at := start
	err = pmScan(int(pm.Fd()), start, end, 0, none, none, func(s, e uint64) {
		if s > at {
			runs = append(runs, ival{at, s})
		}
		at = max(at, e)
	})
	if err != nil {
		return nil, false
	}
	if at < end {
		runs = append(runs, ival{at, end})
	}
	return runs, true
}

// fileDataRuns returns the runs of [start, end), inside m, a shared
// mapping of a file, where the file holds data: a shared mapping's bytes
// are the file's, and a hole of the file (never written; SEEK_HOLE, which
// tmpfs, a memfd and the disk file systems answer) reads as zeros. Beyond
// the file's end there is nothing to read either (an access there is a
// SIGBUS). The file is opened through /proc/PID/map_files, which takes
// CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; ok false (read it all) where
// that fails or the file is another than the mapping's.
func fileDataRuns(pid int, start, end uint64, m snapshot.Mapping) (runs populatedRuns, ok bool) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	if err != nil {
		return nil, false
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || st.Ino != m.Inode {
		return nil, false
	}
	fd := int(f.Fd())
	off := int64(m.Offset + (start - m.Start))
	lim := off + int64(end-start)
	for pos := off; pos < lim; {
		d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) || err == nil && d >= lim {
			break // no data from pos on (or past the file's end)
		}
		if err != nil {
			return nil, false
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return nil, false
		}
		h = min(h, lim)
		s := start + uint64(d-off)&^(pageSize-1)
		e := min(pageUp(start+uint64(h-off)), end)
		if n := len(runs); n > 0 && runs[n-1].e >= s {
			runs[n-1].e = max(runs[n-1].e, e)
		} else {
			runs = append(runs, ival{s, e})
		}
		pos = h
	}
	return runs, true
}

// sharedDataRuns returns the runs of [start, upTo) of pid's memory that
// hold data of the files they map, where upTo is as far from start
// (page-aligned) as shared mappings of files whose file can be asked run
// without a gap (upTo == start: none at start). Past upTo the caller
// knows nothing.
func sharedDataRuns(pid int, start, end uint64) (data populatedRuns, upTo uint64) {
	for upTo = start; upTo < end; {
		m, ok := mapAt(pid, upTo)
		if !ok || !m.Shared || m.Inode == 0 || m.Start > upTo {
			break
		}
		e := min(end, m.End)
		runs, ok := fileDataRuns(pid, upTo, e, m)
		if !ok {
			break
		}
		data, upTo = append(data, runs...), e
	}
	return data, upTo
}

// sparseMin is the smallest range read sparsely: below it the maps and
// the scan cost more than reading the zeros.
const sparseMin = 1 << 20

// fileSparseMin is sparseMin for one shared mapping of a file (a memfd, a
// runtime's JIT buffer written through another view): its holes cost one
// lseek pair each to find, and reading one through the mapping would
// fault a page into the program's file (shmem gives a page, not the zero
// page, to a fault on a hole), so ranges from 16 pages on are read
// sparsely.
const fileSparseMin = 16 * pageSize

// touches reports whether any run overlaps [s, e).
func (runs populatedRuns) touches(s, e uint64) bool {
	for _, r := range runs {
		if r.s < e && s < r.e {
			return true
		}
	}
	return false
}

// bytes is how many bytes the runs cover.
func (runs populatedRuns) bytes() uint64 {
	n := uint64(0)
	for _, r := range runs {
		n += r.e - r.s
	}
	return n
}

// read returns a reader of pid's memory that reads the populated runs and
// zeros the rest (TestPopulated checks the runs with it).
func (runs populatedRuns) read(pid int) func(addr uint64, b []byte) error {
	return func(addr uint64, b []byte) error {
		clear(b)
		end := addr + uint64(len(b))
		i := sort.Search(len(runs), func(i int) bool { return runs[i].e > addr })
		for ; i < len(runs) && runs[i].s < end; i++ {
			s, e := max(runs[i].s, addr), min(runs[i].e, end)
			if err := snapshot.ReadMem(pid, s, b[s-addr:e-addr]); err != nil {
				return err
			}
		}
		return nil
	}
}
