package softpt

import (
	"bytes"
	"os"
	"strconv"
)

// cpuReader reads the CPU a thread last ran on: field 39 (processor) of
// /proc/TID/stat. For a thread in a ptrace stop that is the CPU that ran
// its last instruction. Each thread's stat file stays open (one pread per
// stop) until forget.
type cpuReader struct {
	files map[int]*os.File
	buf   [1024]byte
}

func newCPUReader() *cpuReader { return &cpuReader{files: make(map[int]*os.File)} }

// cpu returns tid's CPU, or -1 when it cannot be read.
func (r *cpuReader) cpu(tid int) int {
	f := r.files[tid]
	if f == nil {
		var err error
		if f, err = os.Open("/proc/" + strconv.Itoa(tid) + "/stat"); err != nil {
			return -1
		}
		r.files[tid] = f
	}
	n, _ := f.ReadAt(r.buf[:], 0)
	b := r.buf[:n]
	// The command name (field 2) may hold spaces and parentheses: the
	// fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	fields := bytes.Fields(b[i+1:]) // fields 3...
	const processor = 39
	if len(fields) < processor-2 {
		return -1
	}
	c, err := strconv.Atoi(string(fields[processor-3]))
	if err != nil {
		return -1
	}
	return c
}

func (r *cpuReader) forget(tid int) {
	if f := r.files[tid]; f != nil {
		f.Close()
		delete(r.files, tid)
	}
}

func (r *cpuReader) close() {
	for tid := range r.files {
		r.forget(tid)
	}
}
