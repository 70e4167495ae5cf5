package tracker

import (
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// TestPrunePending: a held new tracee whose task is gone (its process
// killed before the parent's clone event) is forgotten, so that the loop
// ends instead of waiting for ever; one that still runs is kept.
func TestPrunePending(t *testing.T) {
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { live.Process.Kill(); live.Wait() }()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	tr := &Tracer{pending: map[int]unix.WaitStatus{live.Process.Pid: 0, gone.Process.Pid: 0}}
	if tr.prunePending() {
		t.Errorf("prunePending reports none left with %d running", live.Process.Pid)
	}
	if _, ok := tr.pending[live.Process.Pid]; !ok || len(tr.pending) != 1 {
		t.Errorf("pending %v; want only the running %d", tr.pending, live.Process.Pid)
	}
	live.Process.Kill()
	live.Wait()
	if !tr.prunePending() || len(tr.pending) != 0 {
		t.Errorf("pending %v after its task was reaped", tr.pending)
	}
}
