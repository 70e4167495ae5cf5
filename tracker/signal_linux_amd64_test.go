package tracker_test

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ptjit/ptjit/tracker"
	"golang.org/x/sys/unix"
)

// TestSignalsAndStatus: job control (a child stops itself, its parent sees
// it stopped, continues it), a handled signal, and death by signal behave
// exactly as without ptjit, and the status is passed through.
func TestSignalsAndStatus(t *testing.T) {
	prog := cprog(t, "stopper")
	for _, c := range []struct {
		name string
		args []string
		want int
	}{
		{"exit 0", nil, 0},
		{"killed by SIGUSR1", []string{strconv.Itoa(int(unix.SIGUSR1))}, 128 + int(unix.SIGUSR1)},
		{"killed by SIGABRT", []string{strconv.Itoa(int(unix.SIGABRT))}, 128 + int(unix.SIGABRT)},
	} {
		t.Run(c.name, func(t *testing.T) {
			argv := append([]string{prog}, c.args...)
			out, st := run(t, argv...)
			if st != c.want {
				t.Fatalf("alone: status %d, want %d (%q)", st, c.want, out)
			}
			tr := trace(t, tracker.PinOff, argv...)
			if tr.stdout != out || tr.res.Status != c.want {
				t.Errorf("under the tracker: status %d stdout %q; alone: status %d stdout %q", tr.res.Status, tr.stdout, st, out)
			}
			procs, err := tr.db.Processes()
			if err != nil {
				t.Fatal(err)
			}
			if len(procs) != 2 {
				t.Fatalf("%d processes recorded, want 2 (stopper and its child)", len(procs))
			}
			for _, p := range procs {
				want := 3 // the child
				if p.PID == procs[0].PID {
					want = c.want // stopper itself
				}
				if !p.HasExit || p.ExitStatus != want {
					t.Errorf("pid %d: exit status %d (recorded %v), want %d", p.PID, p.ExitStatus, p.HasExit, want)
				}
			}
		})
	}
}

// TestStopContFromOutside: SIGSTOP sent to a traced program stops it (a
// group-stop, held with PTRACE_LISTEN), SIGCONT resumes it, SIGTERM kills
// it with status 143 — as without ptjit.
func TestStopContFromOutside(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	done := make(chan traced, 1)
	pidc := make(chan int, 1)
	go func() {
		done <- traceOpts(t, func(o *tracker.Options) {
			o.OnStart = func(pid int) { pidc <- pid }
		}, sleep, "30")
	}()
	pid := <-pidc
	state := func() string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		f := strings.Fields(string(b))
		if len(f) < 3 {
			return "gone"
		}
		return f[2]
	}
	waitState := func(want string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !strings.Contains(want, state()); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				unix.Kill(pid, unix.SIGKILL)
				t.Fatalf("pid %d: state %s, want one of %q", pid, state(), want)
			}
		}
	}
	// wait for the exec of sleep, then stop it
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(b)) == "sleep" {
			break
		}
		if time.Now().After(deadline) {
			unix.Kill(pid, unix.SIGKILL)
			t.Fatal("sleep did not start")
		}
	}
	unix.Kill(pid, unix.SIGSTOP)
	waitState("Tt")
	unix.Kill(pid, unix.SIGCONT)
	waitState("SR")
	unix.Kill(pid, unix.SIGTERM)
	tr := <-done
	if tr.res.Status != 128+int(unix.SIGTERM) {
		t.Errorf("status %d, want 143", tr.res.Status)
	}
}
