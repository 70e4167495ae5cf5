package bpfev

import (
	"encoding/binary"
	"fmt"
)

// The records the BPF programs write into the ring buffer. Both layouts
// are written by the programs of prog_linux_amd64.go (the offsets below
// are the ones they store at) and read by decodeCall/decodePage; the
// constants are the single source of truth for both.
//
// A call record (kindCall, callSize bytes) is written for every call of a
// traced process that a program watches. When the call made memory
// executable and its bytes were copied, the call record is followed, in
// the ring, by one page record (kindPage, pageRecSize bytes) per copied
// page, of the same thread, possibly interleaved with other threads'
// records. The call record is reserved before its pages and committed
// after them: a reader that sees it can read all its pages.
const (
	kindCall = 1
	kindPage = 2

	// call record
	offKind     = 0  // u32
	offFlags    = 4  // u32
	offTID      = 8  // u32 (the low half of bpf_get_current_pid_tgid)
	offTGID     = 12 // u32
	offTime     = 16 // u64 bpf_ktime_get_ns at the program's start
	offIP       = 24 // u64 user RIP after the syscall instruction
	offNr       = 32 // u64 syscall number (orig_ax)
	offArgs     = 40 // [6]u64 rdi rsi rdx r10 r8 r9
	offRet      = 88 // i64
	offAddr     = 96 // u64 start of the copied range
	offLen      = 104
	offNPages   = 112 // u32 pages copied (page records that follow)
	offReason   = 116 // u32 Reason
	offSigErr   = 120 // i32 bpf_send_signal_thread's result
	offDone     = 128 // u64 bpf_ktime_get_ns after the copy
	offSeq      = 136 // u64 mm_lock_seq at offTime
	offEpoch    = 144 // u64 the process's cache epoch when the copy used the page cache, else 0
	offSame     = 152 // u64 bit i: page i equals the cache's copy and has no page record
	callSize    = 160
	pageOffIdx  = 4  // u32 page index within the range
	pageOffTID  = 8  // u32 (tgid at 12, as in a call record)
	pageOffVA   = 16 // u64 the page's address
	pageOffEp   = 24 // u64 the call's offEpoch: a page cache value starts here
	pageSize    = 4096
	pageDataOff = 32
	pageRecSize = pageDataOff + pageSize
)

// Flags of an Event.
const (
	// FlagExec: the call made memory executable (mprotect or
	// pkey_mprotect with PROT_EXEC, mmap with PROT_EXEC, mremap of an
	// executable mapping, shmat with SHM_EXEC) and succeeded: the program
	// tried to copy its range.
	FlagExec = 1 << 0
	// FlagFallback: the range could not be copied in full (Reason says
	// why); the thread was sent the fallback signal (FlagSignaled) so
	// that the tracer copies the range before the thread runs on.
	FlagFallback = 1 << 1
	// FlagSignaled: bpf_send_signal_thread succeeded (SignalErr is 0).
	FlagSignaled = 1 << 2
)

// Reason says why an exec-adding call's bytes were not copied in the
// kernel.
type Reason uint32

const (
	ReasonNone        Reason = iota
	ReasonNotPresent         // bpf_probe_read_user failed: a page not present (never touched, swapped out, a file page not mapped yet) or gone
	ReasonOverBudget         // the range has more pages than Config.BudgetPages
	ReasonRingFull           // the ring buffer had no room for a page
	ReasonUnsized            // the call's size is not in its arguments (shmat)
	ReasonRaced              // another thread changed the address space during the copy
	ReasonUnknownPage        // the kernel found a page unchanged that the reader does not hold (never expected)
)

func (r Reason) String() string {
	switch r {
	case ReasonNone:
		return "none"
	case ReasonNotPresent:
		return "page not present"
	case ReasonOverBudget:
		return "range over budget"
	case ReasonRingFull:
		return "ring buffer full"
	case ReasonUnsized:
		return "size not in the arguments"
	case ReasonRaced:
		return "address space changed during the copy"
	case ReasonUnknownPage:
		return "unchanged page unknown to the reader"
	}
	return fmt.Sprintf("reason %d", uint32(r))
}

// Event is one address-space call of a traced thread, as the kernel saw it
// at the call's exit.
type Event struct {
	TGID, TID int
	Nr        int       // syscall number (unix.SYS_MPROTECT, ...)
	Args      [6]uint64 // rdi, rsi, rdx, r10, r8, r9 as the call saw them
	Ret       int64     // the call's result (-errno on failure)
	// IP is the user RIP after the syscall instruction (the instruction
	// is at IP-2), as ptrace's regs.Rip shows it at the call's stops.
	IP uint64
	// Time is CLOCK_MONOTONIC (ns) when the program started, after the
	// call's effect; Done is CLOCK_MONOTONIC after the copy (equal to
	// Time when nothing was copied). See doc.go for the ordering rules
	// and TSC for the trace's time base.
	Time, Done int64
	// MMSeq is the process's address-space write sequence at Time (the
	// kernel's mm_lock_seq: odd while a thread holds mmap_lock for
	// writing, and incremented again when it lets go). A complete copy
	// saw the same even value before and after (doc.go).
	MMSeq     uint32
	Flags     uint32
	Reason    Reason
	SignalErr int32 // bpf_send_signal_thread's result when FlagFallback (0: sent)
	// Addr and Len are the range the program copied or tried to copy
	// (page-aligned; Len rounded up to pages); zero without FlagExec.
	Addr, Len uint64
	// Bytes holds the copied pages from Addr: all Len bytes when the copy
	// is complete (FlagExec without FlagFallback), else the pages before
	// the one that failed.
	Bytes []byte
	// Gens has one number per page of Bytes: two pages with the same
	// number (of any events of one Source) have the same bytes. A page
	// the kernel copied has a new number; a page it found equal to its
	// cached copy (Same) has that copy's number (doc.go: the page cache).
	Gens []uint64
	// Same has bit i set when page i was equal to the kernel's cached
	// copy and came from the reader's copy of it, not through the ring.
	Same uint64
	// Epoch is the process's page cache epoch when the copy used the
	// cache (0: it did not).
	Epoch uint64
}

// Complete reports whether the event holds every byte of an exec-adding
// call's range.
func (e *Event) Complete() bool {
	return e.Flags&FlagExec != 0 && e.Flags&FlagFallback == 0 && uint64(len(e.Bytes)) == e.Len
}

// decodeCall fills e from a call record and returns the number of page
// records that follow it.
func decodeCall(b []byte, e *Event) (int, error) {
	if len(b) < callSize {
		return 0, fmt.Errorf("bpfev: call record of %d bytes, want %d", len(b), callSize)
	}
	le := binary.LittleEndian
	*e = Event{
		Flags:     le.Uint32(b[offFlags:]),
		TGID:      int(le.Uint32(b[offTGID:])),
		TID:       int(le.Uint32(b[offTID:])),
		Time:      int64(le.Uint64(b[offTime:])),
		IP:        le.Uint64(b[offIP:]),
		Nr:        int(le.Uint64(b[offNr:])),
		Ret:       int64(le.Uint64(b[offRet:])),
		Addr:      le.Uint64(b[offAddr:]),
		Len:       le.Uint64(b[offLen:]),
		Reason:    Reason(le.Uint32(b[offReason:])),
		SignalErr: int32(le.Uint32(b[offSigErr:])),
		Done:      int64(le.Uint64(b[offDone:])),
		MMSeq:     le.Uint32(b[offSeq:]),
		Bytes:     e.Bytes[:0],
		Gens:      e.Gens[:0],
		Epoch:     le.Uint64(b[offEpoch:]),
		Same:      le.Uint64(b[offSame:]),
	}
	for i := range e.Args {
		e.Args[i] = le.Uint64(b[offArgs+8*i:])
	}
	n := int(le.Uint32(b[offNPages:]))
	if uint64(n)*pageSize > e.Len {
		return 0, fmt.Errorf("bpfev: call record of tid %d: %d pages for a range of %#x bytes", e.TID, n, e.Len)
	}
	if e.Epoch == 0 && e.Same != 0 {
		return 0, fmt.Errorf("bpfev: call record of tid %d: unchanged pages %#x without the page cache", e.TID, e.Same)
	}
	if n < 64 {
		e.Same &= 1<<n - 1
	}
	return n, nil
}
