package tracker

import (
	"errors"
	"runtime"
	"time"

	"github.com/ptjit/ptjit/clock"
	"golang.org/x/sys/unix"
)

// waitStop is wait4(-1, flags) for the tracer's next stop, polling first
// for as long as s says (spin.go; tracker/doc.go, "Pinning (--pin)
// and the cost of a stop"). Between polls the tracer thread yields its
// CPU to any other runnable thread there (ptjit's database writer, a
// thread of the program). It returns what wait4 returned; EINTR
// included, which callers retry.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) waitStop(s *spinWait, flags int, ws *unix.WaitStatus) (int, error) {
	t0 := clock.Mono()
	if b := int64(s.budget()); b > 0 && flags&unix.WNOHANG == 0 && !t.crowded(t0) {
		for {
			tid, err := unix.Wait4(-1, ws, flags|unix.WNOHANG, nil)
			if tid != 0 || err != nil && !errors.Is(err, unix.EINTR) {
				if tid > 0 {
					s.observe(time.Duration(clock.Mono() - t0))
				}
				return tid, err
			}
			if clock.Mono()-t0 >= b {
				break
			}
			unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
		}
	}
	tid, err := unix.Wait4(-1, ws, flags, nil)
	if tid > 0 {
		s.observe(time.Duration(clock.Mono() - t0))
	}
	return tid, err
}

// spinLoad is the tracer's last count of the machine's runnable threads
// (spin.go, spinCrowded).
type spinLoad struct {
	cpus    int
	next    int64 // CLOCK_MONOTONIC ns: count again from then
	crowded bool
	buf     [128]byte
}

// crowded reports whether more threads are runnable than the machine has
// CPUs, counted at most every spinSample (at now, CLOCK_MONOTONIC ns).
func (t *Tracer) crowded(now int64) bool {
	l := &t.spinLoad
	if now < l.next {
		return l.crowded
	}
	l.next = now + int64(spinSample)
	if l.cpus == 0 {
		l.cpus = runtime.NumCPU()
	}
	l.crowded = true
	fd, err := unix.Open("/proc/loadavg", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	n, err := unix.Read(fd, l.buf[:])
	unix.Close(fd)
	if err == nil {
		l.crowded = spinCrowded(string(l.buf[:n]), l.cpus)
	}
	return l.crowded
}

// spinOff reports whether polling for stops must stay off: ptjit's
// thread may run on one CPU only (--pin=on, or an affinity or cgroup of
// one CPU), where polling would hold the CPU the stop needs.
func spinOff() bool {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return true
	}
	return set.Count() < 2
}
