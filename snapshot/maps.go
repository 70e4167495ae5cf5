package snapshot

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64
	Prot       int  // unix.PROT_READ|PROT_WRITE|PROT_EXEC
	Shared     bool // 's' rather than 'p'
	Offset     uint64
	Dev        uint64 // unix.Mkdev(major, minor)
	Inode      uint64
	Path       string // "" for anonymous memory, "[vdso]", "/usr/lib/...", "/memfd:x (deleted)"
}

// Size is End-Start.
func (m Mapping) Size() uint64 { return m.End - m.Start }

// IsFile reports whether the mapping is backed by a file the decoder can
// open later by name: a path that is not a pseudo-name ([vdso], [heap]),
// not deleted, not a memfd or SysV segment.
func (m Mapping) IsFile() bool {
	if m.Inode == 0 || !strings.HasPrefix(m.Path, "/") {
		return false
	}
	if strings.HasSuffix(m.Path, " (deleted)") || strings.HasPrefix(m.Path, "/memfd:") ||
		strings.HasPrefix(m.Path, "/SYSV") || strings.HasPrefix(m.Path, "/dev/") {
		return false
	}
	return true
}

// MapsError is a /proc/PID/maps line that could not be parsed.
type MapsError struct {
	File string
	Line int
	Text string
	Err  string
}

func (e *MapsError) Error() string {
	return fmt.Sprintf("%s:%d: %s: %q", e.File, e.Line, e.Err, e.Text)
}

// ReadMaps parses /proc/PID/maps.
func ReadMaps(pid int) ([]Mapping, error) {
	name := "/proc/" + strconv.Itoa(pid) + "/maps"
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return ParseMaps(name, b)
}

// ParseMaps parses the text of a /proc/PID/maps file; name is used in
// errors only.
func ParseMaps(name string, b []byte) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		m, msg := parseMapsLine(sc.Text())
		if msg != "" {
			return nil, &MapsError{name, line, sc.Text(), msg}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// parseMapsLine parses
//
//	7f1c2a000000-7f1c2a021000 r-xp 00001000 fd:01 1234   /usr/lib/x.so
func parseMapsLine(s string) (Mapping, string) {
	var m Mapping
	f := strings.Fields(s)
	if len(f) < 5 {
		return m, "too few fields"
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return m, "bad address range"
	}
	var err error
	if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, "bad start address"
	}
	if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil || m.End < m.Start {
		return m, "bad end address"
	}
	if len(f[1]) != 4 {
		return m, "bad permissions"
	}
	if f[1][0] == 'r' {
		m.Prot |= unix.PROT_READ
	}
	if f[1][1] == 'w' {
		m.Prot |= unix.PROT_WRITE
	}
	if f[1][2] == 'x' {
		m.Prot |= unix.PROT_EXEC
	}
	m.Shared = f[1][3] == 's'
	if m.Offset, err = strconv.ParseUint(f[2], 16, 64); err != nil {
		return m, "bad offset"
	}
	maj, min, ok := strings.Cut(f[3], ":")
	if !ok {
		return m, "bad device"
	}
	ma, err1 := strconv.ParseUint(maj, 16, 32)
	mi, err2 := strconv.ParseUint(min, 16, 32)
	if err1 != nil || err2 != nil {
		return m, "bad device"
	}
	m.Dev = unix.Mkdev(uint32(ma), uint32(mi))
	if m.Inode, err = strconv.ParseUint(f[4], 10, 64); err != nil {
		return m, "bad inode"
	}
	if len(f) > 5 {
		// The path is everything after the fifth field; it may contain
		// spaces (and " (deleted)").
		rest := s
		for i := 0; i < 5; i++ {
			rest = strings.TrimLeft(rest, " \t")
			j := strings.IndexAny(rest, " \t")
			if j < 0 {
				return m, "bad path"
			}
			rest = rest[j:]
		}
		m.Path = strings.TrimLeft(rest, " \t")
	}
	return m, ""
}
