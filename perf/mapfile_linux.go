package perf

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// MapFile maps a trace file read-only, so that decoding a trace of any size
// keeps only the pages being decoded in memory (the kernel drops clean file
// pages under pressure), instead of reading it whole. The mapping lives as
// long as the process. An empty file gives an empty slice.
func MapFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		// A pipe or device: read it.
		return os.ReadFile(name)
	}
	if st.Size() == 0 {
		return []byte{}, nil
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", name, err)
	}
	return data, nil
}
