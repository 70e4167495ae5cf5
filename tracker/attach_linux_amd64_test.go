package tracker

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCheckAttach: what cannot be attached to is refused with one line
// naming the pid: no such process, ptjit itself, a thread id, a process
// that already has a tracer.
func TestCheckAttach(t *testing.T) {
	self := os.Getpid()
	var thread int // a thread of this test process other than the leader
	if ents, err := os.ReadDir("/proc/self/task"); err == nil {
		for _, e := range ents {
			if n, _ := strconv.Atoi(e.Name()); n != self && n != 0 {
				thread = n
			}
		}
	}
	cases := []struct {
		pid  int
		want string
	}{
		{0, "not a process id"},
		{4194305, "no such process"},
		{self, "that is ptjit itself"},
	}
	if thread != 0 {
		cases = append(cases, struct {
			pid  int
			want string
		}{thread, "a thread of process " + strconv.Itoa(self)})
	}
	for _, c := range cases {
		err := CheckAttach(c.pid)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "pid "+strconv.Itoa(c.pid)+": ") {
			t.Errorf("CheckAttach(%d) = %v, want pid %d: ...%s", c.pid, err, c.pid, c.want)
		}
	}

	// a child stopped by PTRACE_TRACEME is traced by this process
	cmd := exec.Command("/bin/sleep", "10")
	cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	err := CheckAttach(cmd.Process.Pid)
	if err == nil || !strings.Contains(err.Error(), "already traced by pid") {
		t.Errorf("CheckAttach of a traced child = %v, want already traced", err)
	}
	unix.Kill(cmd.Process.Pid, unix.SIGKILL)
}

// TestStatPPID parses /proc/PID/stat's parent pid past a command with
// spaces and parentheses.
func TestStatPPID(t *testing.T) {
	for _, c := range []struct {
		line string
		want int
	}{
		{"42 (sleep) S 7 42 42 0", 7},
		{"42 (a) b) (c) R 1234 42", 1234},
		{"garbage", 0},
	} {
		if got := statPPID([]byte(c.line)); got != c.want {
			t.Errorf("statPPID(%q) = %d, want %d", c.line, got, c.want)
		}
	}
	if got := statPPID(readStat(os.Getpid())); got != os.Getppid() {
		t.Errorf("statPPID of this process = %d, want %d", got, os.Getppid())
	}
}
