package tracker

import (
	"encoding/binary"
	"reflect"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestKernelWriteVecDests: the ranges a readv-family call may copy into,
// read from the calling process's memory (here this test's own, through
// process_vm_readv as for a tracee): every iovec (a zero-length one adds
// nothing, one across a page boundary both pages), a message's header,
// name and control buffers, each message of a recvmmsg; an array ptjit
// cannot read, or one longer than UIO_MAXIOV, adds nothing (the kernel
// fails such a call as alone).
func TestKernelWriteVecDests(t *testing.T) {
	const P = pageSize
	mem, err := unix.Mmap(-1, 0, 16*P, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	base := uint64(uintptr(unsafe.Pointer(&mem[0])))
	put64 := func(off uint64, v uint64) { binary.LittleEndian.PutUint64(mem[off:], v) }
	put32 := func(off uint64, v uint32) { binary.LittleEndian.PutUint32(mem[off:], v) }
	pg := func(lo, hi uint64) ival { return ival{base + lo*P, base + hi*P} }
	// three iovecs at page 0: page 2, pages 4-5 (across), empty
	put64(0, base+2*P+100)
	put64(8, 10)
	put64(16, base+5*P-3)
	put64(24, 6)
	put64(32, base+9*P)
	put64(40, 0)
	iovs := []ival{pg(2, 3), pg(4, 6)}
	// a msghdr at page 1: name at page 7, the iovecs, control at page 8
	msg := uint64(P)
	put64(msg, base+7*P+10)
	put32(msg+8, 16)
	put64(msg+16, base)
	put64(msg+24, 3)
	put64(msg+32, base+8*P)
	put64(msg+40, 64)
	// two mmsghdrs at page 10: the first as msg, the second with one
	// iovec (the second of page 0's) and no name or control
	mm := uint64(10 * P)
	copy(mem[mm:mm+msghdrSize], mem[msg:msg+msghdrSize])
	put64(mm+mmsghdrSize+16, base+16)
	put64(mm+mmsghdrSize+24, 1)

	th := &thread{tid: unix.Gettid()}
	for _, tc := range []struct {
		name string
		nr   int
		args [6]uint64
		want []ival
	}{
		{"readv", unix.SYS_READV, [6]uint64{3, base, 3}, iovs},
		{"preadv", unix.SYS_PREADV, [6]uint64{3, base, 3, 0}, iovs},
		{"preadv2", unix.SYS_PREADV2, [6]uint64{3, base, 2, 0, 0}, iovs},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV, [6]uint64{1, base, 3, 0, 0, 0}, iovs},
		{"recvmsg", unix.SYS_RECVMSG, [6]uint64{3, base + msg, 0}, append([]ival{pg(1, 2), pg(7, 8), pg(8, 9)}, iovs...)},
		{"recvmmsg", unix.SYS_RECVMMSG, [6]uint64{3, base + mm, 2, 0, 0}, append(append([]ival{pg(10, 11), pg(7, 8), pg(8, 9)}, iovs...), pg(10, 11), pg(4, 6))},
		{"readv, more than UIO_MAXIOV", unix.SYS_READV, [6]uint64{3, base, uioMaxIOV + 1}, nil},
		{"readv, array not readable", unix.SYS_READV, [6]uint64{3, 8, 3}, nil},
		{"recvmsg, header not readable", unix.SYS_RECVMSG, [6]uint64{3, 8, 0}, nil},
		{"read (not an array call)", unix.SYS_READ, [6]uint64{3, base, 10}, nil},
	} {
		got := kernelWriteVecDests(th, &pendingOp{nr: tc.nr, args: tc.args})
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := Compile(KernelWriteVecRules()); err != nil {
		t.Fatal(err)
	}
}
