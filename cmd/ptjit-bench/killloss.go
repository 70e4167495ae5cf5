package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func init() {
	rows = append(rows, row{name: "killloss", target: "≤ 60 ms (db/doc.go's bound)", measure: measureKillLoss})
}

// measureKillLoss measures what a SIGKILL of ptjit loses: stopbench makes a
// code version every few hundred µs, ptjit is killed at a random moment
// between 1 and 2 s in, and the loss is the time from the kill back to
// the newest version the recording kept (both CLOCK_MONOTONIC). The row
// reports the median and the largest loss of the runs.
func measureKillLoss(b *bench) ([]measurement, error) {
	runs := max(b.runs, 5) * 2
	var losses []float64
	versions := 0
	for range runs {
		// Under heavy load the program may not have started its loop
		// when the kill comes: such a run is tried again.
		loss, n, err := killOnce(b)
		for try := 1; err == errTooEarly && try < 3; try++ {
			loss, n, err = killOnce(b)
		}
		if err != nil {
			return nil, err
		}
		losses = append(losses, loss)
		versions += n
	}
	sort.Float64s(losses)
	med, worst := losses[len(losses)/2], losses[len(losses)-1]
	met := "yes"
	if worst > 60 {
		met = "NO"
	}
	return []measurement{{
		name:   fmt.Sprintf("SIGKILL of ptjit: time lost (median; max of %d runs)", runs),
		value:  fmt.Sprintf("%.1f ms; %.1f ms", med, worst),
		ref:    fmt.Sprintf("%d versions kept per run", versions/runs),
		ratio:  "-",
		target: "≤ 60 ms",
		met:    met,
	}}, nil
}

var errTooEarly = errors.New("the killed run kept no version of stopbench's loop (killed before it began, three times)")

// killOnce runs stopbench under ptjit, SIGKILLs ptjit, and returns the
// time lost in ms and the versions the recording kept.
func killOnce(b *bench) (lossMS float64, kept int, err error) {
	if err := os.RemoveAll(b.outDir); err != nil {
		return 0, 0, err
	}
	cmd := exec.Command(b.ptjit, "run", "-q", "-o", b.outDir, "--", b.prog("stopbench"), "run", "100000000", "1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	time.Sleep(time.Second + rand.N(time.Second))
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	cmd.Process.Signal(syscall.SIGKILL)
	killed := ts.Nano()
	cmd.Wait()
	// The program dies with its tracer (PTRACE_O_EXITKILL); the group
	// kill makes sure nothing outlives the run.
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	hist := exec.Command(b.ptjit, "history", "--json", "-i", b.outDir)
	out, err := hist.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("ptjit history after the kill: %v", err)
	}
	var newest int64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var v struct {
			MonoNS int64 `json:"mono_ns"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return 0, 0, fmt.Errorf("ptjit history --json: %v", err)
		}
		newest = max(newest, v.MonoNS)
		kept++
	}
	if kept < 2 {
		return 0, 0, errTooEarly
	}
	return float64(killed-newest) / 1e6, kept, nil
}
