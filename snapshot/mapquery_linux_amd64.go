package snapshot

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procmapQuery is struct procmap_query (include/uapi/linux/fs.h, Linux
// 6.11): the PROCMAP_QUERY ioctl on /proc/PID/maps asks the kernel for the
// one mapping that covers an address, with the fields a maps line has,
// without formatting and parsing the text of every mapping (a JIT
// runtime's process has hundreds).
type procmapQuery struct {
	Size        uint64
	QueryFlags  uint64
	QueryAddr   uint64
	VMAStart    uint64
	VMAEnd      uint64
	VMAFlags    uint64
	VMAPageSize uint64
	VMAOffset   uint64
	Inode       uint64
	DevMajor    uint32
	DevMinor    uint32
	NameSize    uint32
	BuildIDSize uint32
	NameAddr    uint64
	BuildIDAddr uint64
}

const (
	// _IOWR('f', 17, struct procmap_query)
	procmapQueryIoctl = 3<<30 | uint32(unsafe.Sizeof(procmapQuery{}))<<16 | 'f'<<8 | 17
	// procmap_query's vma_flags
	pmqReadable, pmqWritable, pmqExecutable, pmqShared = 1, 2, 4, 8
)

// ErrNoQuery: the kernel has no PROCMAP_QUERY (before Linux 6.11); the
// caller reads /proc/PID/maps instead.
var ErrNoQuery = errors.New("no PROCMAP_QUERY ioctl on /proc/PID/maps")

// QueryMap returns the mapping of pid that covers addr, as its line in
// /proc/PID/maps has it (ParseMaps), asked of the kernel with one
// PROCMAP_QUERY ioctl. It fails with ErrNoQuery where the kernel lacks
// the ioctl, and with an error wrapping unix.ENOENT where no mapping
// covers addr. A name the maps file would escape (a newline in a path)
// comes back as it is.
func QueryMap(pid int, addr uint64) (Mapping, error) {
	name := "/proc/" + strconv.Itoa(pid) + "/maps"
	f, err := os.Open(name)
	if err != nil {
		return Mapping{}, err
	}
	defer f.Close()
	var path [unix.PathMax]byte
	q := procmapQuery{Size: uint64(unsafe.Sizeof(procmapQuery{})), QueryAddr: addr,
		NameSize: uint32(len(path)), NameAddr: uint64(uintptr(unsafe.Pointer(&path[0])))}
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), uintptr(procmapQueryIoctl), uintptr(unsafe.Pointer(&q)))
	switch errno {
	case 0:
	case unix.ENOTTY, unix.EINVAL:
		return Mapping{}, ErrNoQuery
	default:
		return Mapping{}, fmt.Errorf("%s: PROCMAP_QUERY %#x: %w", name, addr, errno)
	}
	m := Mapping{Start: q.VMAStart, End: q.VMAEnd, Offset: q.VMAOffset, Inode: q.Inode,
		Dev: unix.Mkdev(q.DevMajor, q.DevMinor), Shared: q.VMAFlags&pmqShared != 0}
	for _, p := range []struct {
		flag uint64
		prot int
	}{{pmqReadable, unix.PROT_READ}, {pmqWritable, unix.PROT_WRITE}, {pmqExecutable, unix.PROT_EXEC}} {
		if q.VMAFlags&p.flag != 0 {
			m.Prot |= p.prot
		}
	}
	if q.NameSize > 0 {
		m.Path = string(path[:q.NameSize-1]) // the size counts the NUL
	}
	return m, nil
}
