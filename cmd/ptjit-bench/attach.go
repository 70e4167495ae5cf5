package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ptjit/ptjit/db"
)

func init() {
	rows = append(rows, row{name: "attach", target: "20 attach/detach cycles: 0 versions lost, behaviour unchanged", measure: measureAttach})
}

// attachCycles is how many times the attach row attaches to one program.
const attachCycles = 20

// measureAttach starts testdata/attach-jit alone (a version of its JIT
// page every 5 ms) and attaches ptjit run -p to it attachCycles times,
// 100 ms each. A version is lost when the program made it while attached
// (its own clock read right after the mprotect falls between the
// recording's attach and detach times) and the recording does not hold
// it with its bytes; behaviour changed when the program's output or
// status differ from a run alone, or when a seccomp filter or a tracer
// is left in it after a detach.
func measureAttach(b *bench) ([]measurement, error) {
	prog := filepath.Join(b.testdata, "bin", "attach-jit")
	const n, ms = 2000, "5"
	want := fmt.Sprintf("versions %d sum %d\n", n, n*(n-1)/2)
	tmp, err := os.MkdirTemp("", "ptjit-bench-attach-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	manifest, times := filepath.Join(tmp, "manifest"), filepath.Join(tmp, "times")
	cmd := exec.Command(prog, strconv.Itoa(n), ms, "0")
	cmd.Env = append(os.Environ(), "PTJIT_MANIFEST="+manifest, "ATTACH_JIT_TIMES="+times)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	time.Sleep(200 * time.Millisecond)
	var lost, recorded, changed int
	var notes []string
	for c := range attachCycles {
		r, err := b.ptjitExec("run", "-q", "-p", strconv.Itoa(pid), "--duration", "100ms", "-o", b.outDir)
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %v", c, err)
		}
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); !bytes.Contains(st, []byte("TracerPid:\t0\n")) ||
			!bytes.Contains(st, []byte("Seccomp_filters:\t0\n")) {
			changed++
			notes = append(notes, fmt.Sprintf("cycle %d: a tracer or filter left", c))
		}
		l, k, err := attachLost(b.outDir, manifest, times)
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %v (%s)", c, err, strings.TrimSpace(r.stderr))
		}
		lost, recorded = lost+l, recorded+k
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Wait(); err != nil || out.String() != want {
		changed++
		notes = append(notes, fmt.Sprintf("the program: %v, output %q (alone: status 0, %q)", err, out.String(), want))
	}
	for _, s := range notes {
		fmt.Fprintln(os.Stderr, "ptjit-bench: attach:", s)
	}
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	return []measurement{
		{name: fmt.Sprintf("attach-jit, %d attach/detach cycles: versions lost", attachCycles), value: strconv.Itoa(lost),
			ref: fmt.Sprintf("%d recorded", recorded), ratio: "-", target: "0", met: met(lost == 0 && recorded > 0)},
		{name: "  behaviour changed (output, status, tracer or filter left)", value: strconv.Itoa(changed),
			ref: "-", ratio: "-", target: "0", met: met(changed == 0)},
	}, nil
}

// attachLost counts the versions the program made while the recording in
// dir was attached (by its times file) that the recording lacks, and the
// versions it holds.
func attachLost(dir, manifest, times string) (lost, recorded int, err error) {
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		return 0, 0, err
	}
	defer d.Close()
	meta, err := d.Meta()
	if err != nil {
		return 0, 0, err
	}
	from, err1 := strconv.ParseInt(meta["attach_mono_ns"], 10, 64)
	to, err2 := strconv.ParseInt(meta["detach_mono_ns"], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("meta attach_mono_ns %q, detach_mono_ns %q", meta["attach_mono_ns"], meta["detach_mono_ns"])
	}
	vs, err := d.Versions(db.VersionFilter{})
	if err != nil {
		return 0, 0, err
	}
	have := map[string]bool{}
	for _, v := range vs {
		// a version whose call returned before the attach, with its
		// time read after it, is the attach's snapshot
		have[fmt.Sprintf("%x", v.SHA256)] = true
		if v.Cause == "mprotect" {
			recorded++
		}
	}
	mb, err := os.ReadFile(manifest)
	if err != nil {
		return 0, 0, err
	}
	tb, err := os.ReadFile(times)
	if err != nil {
		return 0, 0, err
	}
	ml, tl := strings.Split(string(mb), "\n"), strings.Split(string(tb), "\n")
	for i := 0; i < len(ml) && i < len(tl); i++ {
		f, g := strings.Fields(ml[i]), strings.Fields(tl[i])
		if len(f) != 6 || len(g) < 2 {
			continue
		}
		ns, _ := strconv.ParseInt(g[1], 10, 64)
		if ns > from && ns < to && !have[f[2]] {
			lost++
		}
	}
	return lost, recorded, nil
}
