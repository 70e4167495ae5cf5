package ptfmt

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/ptjit/ptjit/perf"
)

// TraceInput is the FILE of ptjit dump or the --pt FILE of ptjit decode,
// recognised by its content (perf.Sniff): a perf.data, file or pipe mode,
// whose AUX queues are the traces, or else a raw PT trace.
//
// FILE "-" is standard input. A non-seekable stdin (a pipe: perf record
// -o - | ptjit dump -) is first copied to an unlinked temporary file, so
// that memory stays bounded and it is read as a file would be; a stdin
// redirected from a file is read in place. "-" takes no byte range.
type TraceInput struct {
	Name string // the file as given; "stdin" for "-"
	// Perf and Trace are set for a perf.data: Trace holds an Intel PT
	// trace (perf.PerfTrace.CheckIntelPT passed).
	Perf  *perf.PerfData
	Trace *perf.PerfTrace
	// Raw is the trace of a raw file, restricted to the range given.
	Raw []byte

	files []*os.File // closed by Close: the perf.data, the copy of stdin
}

// OpenTraceInput opens arg, FILE[:FROM[-TO]]. A raw trace is read by
// readRaw(arg), ReadTraceFile or LoadPT, so that raw files behave exactly
// as before; a perf.data is loaded with its trace bytes (lazy: read from
// the file as decoded, else in memory), and one without Intel PT is an
// error naming the file and its events. FILE:FROM[-TO], with a byte range,
// is always read as raw trace, whatever the file holds: the way to look at
// the bytes of one AUXTRACE record of a perf.data. The caller closes the
// input.
func OpenTraceInput(arg string, lazy bool, readRaw func(arg string) ([]byte, error)) (*TraceInput, error) {
	name, _, _, err := ParseFileRange(arg)
	if err != nil {
		// A malformed range: readRaw reports it as it always has.
		raw, err := readRaw(arg)
		return &TraceInput{Name: arg, Raw: raw}, err
	}
	in := &TraceInput{Name: name}
	if arg != name && name != "-" {
		// A byte range always means raw bytes of the file, a perf.data
		// too (the trace bytes of one AUXTRACE record, say).
		in.Raw, err = readRaw(arg)
		if err != nil {
			return nil, err
		}
		return in, nil
	}
	path := name
	if name == "-" {
		if arg != name {
			return nil, fmt.Errorf("%s: a byte range needs a file, not stdin", arg)
		}
		in.Name = "stdin"
		if path, err = in.spoolStdin(); err != nil {
			in.Close()
			return nil, err
		}
	}
	kind, err := perf.SniffFile(path)
	if err != nil {
		in.Close()
		if name == "-" {
			return nil, fmt.Errorf("stdin: %v", err)
		}
		return nil, err
	}
	if !kind.IsPerfData() {
		if name == "-" {
			arg = path
		}
		in.Raw, err = readRaw(arg)
		if err != nil {
			in.Close()
			return nil, err
		}
		return in, nil
	}
	if err := in.openPerf(path, lazy); err != nil {
		in.Close()
		return nil, err
	}
	return in, nil
}

func (in *TraceInput) openPerf(path string, lazy bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	// The PerfData reads f; Close closes it.
	in.Perf, err = perf.NewPerfData(f, st.Size(), in.Name)
	if err != nil {
		f.Close()
		return err
	}
	in.files = append(in.files, f)
	if lazy {
		in.Trace, err = perf.LoadPerfTraceLazy(in.Perf)
	} else {
		in.Trace, err = perf.LoadPerfTrace(in.Perf)
	}
	if err != nil {
		return err
	}
	return in.Trace.CheckIntelPT(in.Perf)
}

// spoolStdin returns a path from which stdin's bytes can be read as a
// file: /dev/stdin for a regular file, else an unlinked temporary copy
// (its name is that of the open descriptor, /proc/self/fd/N).
func (in *TraceInput) spoolStdin() (string, error) {
	if st, err := os.Stdin.Stat(); err == nil && st.Mode().IsRegular() {
		return "/dev/stdin", nil
	}
	f, err := os.CreateTemp("", "ptjit-stdin-*")
	if err != nil {
		return "", fmt.Errorf("stdin: %v", err)
	}
	os.Remove(f.Name())
	in.files = append(in.files, f)
	n, err := io.Copy(f, os.Stdin)
	if err != nil {
		return "", fmt.Errorf("stdin: copying to %s: %v", f.Name(), err)
	}
	if n == 0 {
		return "", errors.New("stdin: empty input")
	}
	return fmt.Sprintf("/proc/self/fd/%d", f.Fd()), nil
}

// Close releases the perf.data and the copy of stdin.
func (in *TraceInput) Close() error {
	var err error
	for _, f := range in.files {
		if e := f.Close(); err == nil {
			err = e
		}
	}
	in.files = nil
	return err
}
