//go:build linux && amd64

package tracker

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The userfaultfd and PAGEMAP_SCAN interfaces changed-page tracking uses
// (pages_linux_amd64.go). Absent from x/sys; the structs must match
// linux/userfaultfd.h and linux/fs.h (Linux 6.7).

const (
	uffdAPI             = 0xAA
	uffdioAPI           = 0xc018aa3f // _IOWR(0xAA, 0x3F, struct uffdio_api)
	uffdioRegister      = 0xc020aa00 // _IOWR(0xAA, 0x00, struct uffdio_register)
	uffdioWriteprotect  = 0xc018aa06 // _IOWR(0xAA, 0x06, struct uffdio_writeprotect)
	uffdRegisterModeWP  = 1 << 1     // UFFDIO_REGISTER_MODE_WP
	uffdWriteprotectWP  = 1 << 0     // UFFDIO_WRITEPROTECT_MODE_WP
	uffdUserModeOnly    = 1          // UFFD_USER_MODE_ONLY
	uffdFeatureWPShmem  = 1 << 12    // UFFD_FEATURE_WP_HUGETLBFS_SHMEM
	uffdFeatureWPUnpop  = 1 << 13    // UFFD_FEATURE_WP_UNPOPULATED
	uffdFeatureWPAsync  = 1 << 15    // UFFD_FEATURE_WP_ASYNC
	pagemapScan         = 0xc0606610 // _IOWR('f', 16, struct pm_scan_arg)
	pmScanWPMatching    = 1 << 0     // PM_SCAN_WP_MATCHING
	pmScanCheckWPAsync  = 1 << 1     // PM_SCAN_CHECK_WPASYNC
	pageIsWritten       = 1 << 1     // PAGE_IS_WRITTEN
	pageIsPresent       = 1 << 3     // PAGE_IS_PRESENT
	pageIsSwapped       = 1 << 4     // PAGE_IS_SWAPPED
	pmScanVecLen        = 64
	uffdioRegisterModes = uffdRegisterModeWP
)

// must match struct uffdio_api
type uffdioAPIArg struct{ api, features, ioctls uint64 }

// must match struct uffdio_register
type uffdioRegisterArg struct{ start, len, mode, ioctls uint64 }

// must match struct uffdio_writeprotect
type uffdioWriteprotectArg struct{ start, len, mode uint64 }

// must match struct pm_scan_arg
type pmScanArg struct {
	size, flags, start, end, walkEnd, vec, vecLen, maxPages       uint64
	categoryInverted, categoryMask, categoryAnyofMask, returnMask uint64
}

// must match struct page_region
type pageRegion struct{ start, end, categories uint64 }

func ioctlPtr(fd int, req uintptr, arg unsafe.Pointer) error {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// uffdAPIHandshake enables the asynchronous write-protect features on a
// new userfaultfd, with write-protection of shared memory where the
// kernel has it (shmem reports whether it does).
func uffdAPIHandshake(fd int) (shmem bool, err error) {
	a := uffdioAPIArg{api: uffdAPI, features: uffdFeatureWPAsync | uffdFeatureWPUnpop | uffdFeatureWPShmem}
	if ioctlPtr(fd, uffdioAPI, unsafe.Pointer(&a)) == nil {
		return true, nil
	}
	a = uffdioAPIArg{api: uffdAPI, features: uffdFeatureWPAsync | uffdFeatureWPUnpop}
	return false, ioctlPtr(fd, uffdioAPI, unsafe.Pointer(&a))
}

// uffdRegisterWP registers [start, end) of the uffd's address space for
// write-protection.
func uffdRegisterWP(fd int, start, end uint64) error {
	a := uffdioRegisterArg{start: start, len: end - start, mode: uffdioRegisterModes}
	return ioctlPtr(fd, uffdioRegister, unsafe.Pointer(&a))
}

// uffdProtect write-protects [start, end): every page counts as not
// written from now on.
func uffdProtect(fd int, start, end uint64) error {
	a := uffdioWriteprotectArg{start: start, len: end - start, mode: uffdWriteprotectWP}
	return ioctlPtr(fd, uffdioWriteprotect, unsafe.Pointer(&a))
}

// pmScan runs PAGEMAP_SCAN on a /proc/PID/pagemap descriptor over [start,
// end), calling found for each range of matching pages, and continuing
// where the kernel stopped when the vector filled.
func pmScan(fd int, start, end uint64, flags, inverted, mask uint64, found func(s, e uint64)) error {
	// on the heap, which does not move: the kernel gets its address
	// inside the argument struct
	vec := new([pmScanVecLen]pageRegion)
	for start < end {
		a := pmScanArg{size: uint64(unsafe.Sizeof(pmScanArg{})), flags: flags, start: start, end: end,
			vec: uint64(uintptr(unsafe.Pointer(&vec[0]))), vecLen: pmScanVecLen,
			categoryInverted: inverted, categoryMask: mask, returnMask: mask}
		n, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), pagemapScan, uintptr(unsafe.Pointer(&a)))
		runtime.KeepAlive(vec)
		if e != 0 {
			return e
		}
		for _, r := range vec[:n] {
			found(r.start, r.end)
		}
		if a.walkEnd <= start {
			break
		}
		start = a.walkEnd
	}
	return nil
}
