package bpfev

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/internal/testmain"
	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) { testmain.Run(m, nil) }

// openSource opens a Source for a test, closed at its end. Where BPF
// events cannot run it skips, saying why; under CI it fails.
func openSource(t *testing.T, cfg Config) *Source {
	t.Helper()
	if err := Available(); err != nil {
		testenv.Missing(t, "BPF events cannot run here: %v", err)
	}
	s, err := Open(cfg)
	if err != nil {
		t.Fatalf("Available said yes, but Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

var prog struct {
	once sync.Once
	path string
	err  error
}

// testProg builds testdata/bin/bpfev-jit once and returns its path.
func testProg(t testing.TB) string {
	t.Helper()
	prog.once.Do(func() {
		dir, err := filepath.Abs("../testdata")
		if err != nil {
			prog.err = err
			return
		}
		if out, err := exec.Command("make", "-s", "-C", dir, "bin/bpfev-jit").CombinedOutput(); err != nil {
			prog.err = fmt.Errorf("make -C testdata bin/bpfev-jit: %v\n%s", err, out)
			return
		}
		prog.path = filepath.Join(dir, "bin", "bpfev-jit")
	})
	if prog.err != nil {
		t.Fatal(prog.err)
	}
	return prog.path
}

// child is a run of bpfev-jit, held at its "ready" line.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	pid   int
}

func startChild(t testing.TB, args ...string) *child {
	t.Helper()
	cmd := exec.Command(testProg(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: cmd.Process.Pid}
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil {
			c.cmd.Process.Kill()
			c.cmd.Wait()
		}
	})
	line, err := c.out.ReadString('\n')
	if err != nil || line != fmt.Sprintf("ready %d\n", c.pid) {
		t.Fatalf("bpfev-jit %s: first line %q, %v", strings.Join(args, " "), line, err)
	}
	return c
}

// childRun is what a run of bpfev-jit printed.
type childRun struct {
	ip, tid int64
	execs   []execLine
	signal  []int64 // tid, si_code, seen before the next instruction
	moved   uint64  // mremap: where the RW pages went
}

type execLine struct {
	version        int
	addr, tsc0, t1 uint64
}

// run lets the child go, reads its results and waits for it to exit 0.
func (c *child) run(t testing.TB) childRun {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	c.stdin.Close()
	rest, err := io.ReadAll(c.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Fatalf("bpfev-jit: %v\n%s", err, rest)
	}
	return parseRun(t, rest)
}

// parseRun reads what bpfev-jit printed after its "ready" line.
func parseRun(t testing.TB, rest []byte) childRun {
	t.Helper()
	var r childRun
	num := func(s string) uint64 {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			t.Fatalf("bpfev-jit printed %q: %v", s, err)
		}
		return v
	}
	for _, line := range strings.Split(strings.TrimSpace(string(rest)), "\n") {
		f := strings.Fields(line)
		switch {
		case f[0] == "ip" && len(f) == 2:
			r.ip = int64(num(f[1]))
		case f[0] == "tid" && len(f) == 2:
			r.tid = int64(num(f[1]))
		case f[0] == "exec" && len(f) == 5:
			r.execs = append(r.execs, execLine{int(num(f[1])), num(f[2]), num(f[3]), num(f[4])})
		case f[0] == "moved" && len(f) == 2:
			r.moved = num(f[1])
		case f[0] == "signal" && len(f) == 4:
			r.signal = []int64{int64(num(f[1])), int64(num(f[2])), int64(num(f[3]))}
		default:
			t.Fatalf("bpfev-jit printed %q", line)
		}
	}
	return r
}

// version is the page bpfev-jit writes as version i.
func version(i uint32) []byte {
	p := make([]byte, pageSize)
	p[0] = 0xb8
	p[1], p[2], p[3], p[4] = byte(i), byte(i>>8), byte(i>>16), byte(i>>24)
	p[5] = 0xc3
	for j := 6; j < pageSize; j++ {
		p[j] = byte(i*131 + uint32(j)*7 + uint32(j)/256)
	}
	return p
}

// collect returns the events of process pid that the source wrote so far.
// It reads up to a fence: an exec-adding mprotect of the test process
// itself, made after pid exited, so every record pid's calls wrote comes
// before the fence's in the ring.
func collect(t *testing.T, s *Source, pid int) []Event {
	t.Helper()
	var evs []Event
	for {
		// what is in the ring already: the fence needs room
		var e Event
		ok, err := s.TryNext(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if e.TGID == pid {
			evs = append(evs, e)
		}
	}
	fence, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(fence)
	fence[0] = 0xc3
	self := os.Getpid()
	if err := s.Add(self); err != nil {
		t.Fatal(err)
	}
	defer s.Remove(self)
	if err := unix.Mprotect(fence, unix.PROT_READ|unix.PROT_EXEC); err != nil {
		t.Fatal(err)
	}
	addr := uint64(uintptr(unsafePointer(fence)))
	s.SetDeadline(time.Now().Add(time.Minute))
	defer s.SetDeadline(time.Time{})
	for {
		var e Event
		if err := s.Next(&e); err != nil {
			t.Fatalf("reading up to the fence: %v (%d events of pid %d so far)", err, len(evs), pid)
		}
		if e.TGID == self && e.Nr == unix.SYS_MPROTECT && e.Addr == addr {
			if !e.Complete() || !bytes.Equal(e.Bytes, fence) {
				t.Fatalf("the fence event is not complete: %+v", e)
			}
			return evs
		}
		if e.TGID == pid {
			evs = append(evs, e)
		}
	}
}

// execEvents keeps the events of exec-adding calls.
func execEvents(evs []Event) []Event {
	var out []Event
	for _, e := range evs {
		if e.Flags&FlagExec != 0 {
			out = append(out, e)
		}
	}
	return out
}

// tightStamp is a clock.Stamp whose two reads are as close as a few tries
// get them: the TSC is the midpoint of two reads around CLOCK_MONOTONIC's.
func tightStamp() clock.Stamp {
	best := clock.Stamp{}
	gap := ^uint64(0)
	for range 50 {
		a := clock.RDTSC()
		m := clock.Mono()
		b := clock.RDTSC()
		if b-a < gap {
			gap, best = b-a, clock.Stamp{TSC: a + (b-a)/2, MonoNS: m}
		}
	}
	return best
}

// TestToggles: N exec-adding mprotects of a JIT page give N complete
// events, each with the bytes the program wrote, its thread, the address
// after its syscall instruction, and a time that converts into the TSC
// interval the program read around the call.
func TestToggles(t *testing.T) {
	const n = 64
	s := openSource(t, Config{})
	start := tightStamp()
	c := startChild(t, "toggle", strconv.Itoa(n))
	if err := s.Add(c.pid); err != nil {
		t.Fatal(err)
	}
	r := c.run(t)
	evs := collect(t, s, c.pid)
	time.Sleep(20 * time.Millisecond) // a TSC frequency over at least this span
	end := tightStamp()
	hz := clock.HzBetween(start, end)
	if len(r.execs) != n {
		t.Fatalf("bpfev-jit made %d versions, want %d", len(r.execs), n)
	}
	ex := execEvents(evs)
	if len(ex) != n {
		t.Fatalf("%d exec-adding events, want %d (all %d events: %+v)", len(ex), n, len(evs), evs)
	}
	var worst float64
	for i, e := range ex {
		want := r.execs[i]
		switch {
		case e.Nr != unix.SYS_MPROTECT || e.Ret != 0 || e.Args[2] != unix.PROT_READ|unix.PROT_EXEC:
			t.Errorf("version %d: nr %d args %#x ret %d, want mprotect(…, PROT_READ|PROT_EXEC) = 0", i, e.Nr, e.Args, e.Ret)
		case !e.Complete() || e.Addr != want.addr || e.Len != pageSize:
			t.Errorf("version %d: flags %#x reason %v, range %#x+%#x with %d bytes, want complete %#x+%#x", i, e.Flags, e.Reason, e.Addr, e.Len, len(e.Bytes), want.addr, pageSize)
		case !bytes.Equal(e.Bytes, version(uint32(want.version))):
			t.Errorf("version %d: the event's bytes differ from what the program wrote", i)
		case int64(e.TID) != r.tid || e.TGID != c.pid || e.TID == e.TGID:
			t.Errorf("version %d: tgid %d tid %d, want %d %d", i, e.TGID, e.TID, c.pid, r.tid)
		case int64(e.IP) != r.ip:
			t.Errorf("version %d: IP %#x, want %#x (after the syscall instruction)", i, e.IP, r.ip)
		case e.Done < e.Time:
			t.Errorf("version %d: Done %d before Time %d", i, e.Done, e.Time)
		}
		// the time base: the event's time, in TSC counts, lies within
		// the TSC the program read around the call, give or take the
		// conversion's error (the frequency's error over the distance
		// from start: tens of counts here) and 2 µs
		tsc := TSC(e.Time, start, hz)
		tol := hz * 2 / 1e6
		if tsc+tol < want.tsc0 || tsc > want.t1+tol {
			t.Errorf("version %d: event at TSC %d, outside the program's [%d, %d] (±%d)", i, tsc, want.tsc0, want.t1, tol)
		}
		if tsc < want.tsc0 {
			worst = max(worst, float64(want.tsc0-tsc)/float64(hz)*1e9)
		} else if tsc > want.t1 {
			worst = max(worst, float64(tsc-want.t1)/float64(hz)*1e9)
		}
	}
	// the other half of the toggles: RW, no copy
	rw := 0
	for _, e := range evs {
		if e.Nr == unix.SYS_MPROTECT && e.Args[0] == r.execs[0].addr && e.Args[2] == unix.PROT_READ|unix.PROT_WRITE {
			rw++
			if e.Flags != 0 || len(e.Bytes) != 0 {
				t.Errorf("an RW mprotect with flags %#x and %d bytes", e.Flags, len(e.Bytes))
			}
		}
	}
	if rw != n {
		t.Errorf("%d RW mprotect events, want %d", rw, n)
	}
	t.Logf("%d versions, %d events of the process; TSC %d Hz over %.1f ms; event times at most %.0f ns outside the program's TSC reads around their calls",
		n, len(evs), hz, float64(end.MonoNS-start.MonoNS)/1e6, worst)
}

// TestUntraced: a process that is not in the map, or was removed from it
// before it ran, gives no events.
func TestUntraced(t *testing.T) {
	s := openSource(t, Config{})
	for _, remove := range []bool{false, true} {
		c := startChild(t, "toggle", "16")
		if remove {
			if err := s.Add(c.pid); err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(c.pid); err != nil {
				t.Fatal(err)
			}
		}
		r := c.run(t)
		if len(r.execs) != 16 {
			t.Fatalf("bpfev-jit made %d versions, want 16", len(r.execs))
		}
		if evs := collect(t, s, c.pid); len(evs) != 0 {
			t.Errorf("removed=%v: %d events of a process not in the map: %+v", remove, len(evs), evs[0])
		}
	}
	if err := s.Remove(12345678); err != nil {
		t.Errorf("Remove of a process never added: %v", err)
	}
}

// TestFallback: a range the kernel cannot copy is flagged with its reason
// and the thread that made the call gets the signal before it runs the
// next instruction.
func TestFallback(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   Config
		mode  string
		why   Reason
		pages int // pages copied before the failure; -1: any
	}{
		{"over budget", Config{BudgetPages: 4}, "present", ReasonOverBudget, 0},
		{"not present", Config{}, "absent", ReasonNotPresent, 1},
		{"tiny ring", Config{RingBytes: minRing}, "present", ReasonRingFull, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Signal = unix.SIGUSR1
			s := openSource(t, tc.cfg)
			c := startChild(t, "fallback", tc.mode)
			if err := s.Add(c.pid); err != nil {
				t.Fatal(err)
			}
			r := c.run(t) // nothing reads the ring meanwhile: the tiny ring fills
			if r.signal == nil || r.signal[0] != r.tid || r.signal[1] != 0x80 /* SI_KERNEL */ || r.signal[2] != 1 {
				t.Errorf("signal (tid, si_code, seen before the next instruction) = %v, want [%d 128 1]", r.signal, r.tid)
			}
			lost, err := s.Lost()
			if err != nil {
				t.Fatal(err)
			}
			ex := execEvents(collect(t, s, c.pid))
			if tc.why == ReasonRingFull && lost > 0 && len(ex) == 0 {
				t.Logf("the call record itself was lost (%d lost): the signal alone stopped the thread", lost)
				return
			}
			if len(ex) != 1 {
				t.Fatalf("%d exec-adding events, want 1", len(ex))
			}
			e := ex[0]
			if e.Flags != FlagExec|FlagFallback|FlagSignaled || e.Reason != tc.why || e.SignalErr != 0 {
				t.Errorf("flags %#x reason %v signal error %d, want %#x %v 0", e.Flags, e.Reason, e.SignalErr, FlagExec|FlagFallback|FlagSignaled, tc.why)
			}
			if int64(e.TID) != r.tid || e.Addr != r.execs[0].addr || e.Len != 8*pageSize {
				t.Errorf("tid %d range %#x+%#x, want %d %#x+%#x", e.TID, e.Addr, e.Len, r.tid, r.execs[0].addr, 8*pageSize)
			}
			if tc.pages >= 0 && len(e.Bytes) != tc.pages*pageSize {
				t.Errorf("%d bytes copied before the failure, want %d pages", len(e.Bytes), tc.pages)
			}
			for k := 0; k < len(e.Bytes)/pageSize; k++ {
				if !bytes.Equal(e.Bytes[k*pageSize:(k+1)*pageSize], version(uint32(k))) {
					t.Errorf("page %d of the partial copy differs from what the program wrote", k)
				}
			}
			t.Logf("%v: %d pages copied, then the signal", tc.why, len(e.Bytes)/pageSize)
		})
	}
}

// TestTryNextDiscarded: a page the program could not copy leaves a
// discarded record in the ring after the call record; TryNext returns the
// event, then false, and never waits for a record to come (the reader
// skips discarded records and then polls: where the discarded record was
// the ring's last, as when the thread stops at once for the fallback,
// TryNext waited for ever; here the child's later calls may follow it).
func TestTryNextDiscarded(t *testing.T) {
	s := openSource(t, Config{Signal: unix.SIGUSR1})
	c := startChild(t, "fallback", "absent")
	if err := s.Add(c.pid); err != nil {
		t.Fatal(err)
	}
	c.run(t)
	n := 0
	for {
		var e Event
		ok, err := s.TryNext(&e)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		if e.TGID == c.pid && e.Flags&FlagFallback != 0 && e.Reason == ReasonNotPresent {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d not-present fallbacks read, want 1", n)
	}
}

// TestAvailable: on a host where the tests run, Available agrees with
// Open; its error, where there is one, is one line.
func TestAvailable(t *testing.T) {
	err := Available()
	if err != nil {
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("Available's error has several lines: %q", err)
		}
		testenv.Missing(t, "BPF events cannot run here: %v", err)
	}
}

// TestOpenRejects: bad configurations fail with one line each, before
// anything is loaded.
func TestOpenRejects(t *testing.T) {
	for _, cfg := range []Config{{Signal: 65}, {BudgetPages: 65}, {BudgetPages: -1}, {RingBytes: 12345}, {RingBytes: 4096},
		{WakeBytes: -1}, {RingBytes: 1 << 20, WakeBytes: 2 << 20}, {Poll: -time.Second}} {
		if _, err := Open(cfg); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Open(%+v) = %v, want a one-line error", cfg, err)
		}
	}
}

// TestFallbackStopsUnderPtrace: with the default signal, SIGSTOP, a
// thread whose call fell back is in a signal-delivery stop right after
// the syscall instruction (RIP the address after it, orig_rax the call,
// rax its result) with si_code SI_KERNEL; the tracer suppresses it and
// the program runs on as if nothing happened.
func TestFallbackStopsUnderPtrace(t *testing.T) {
	s := openSource(t, Config{BudgetPages: 4})
	path := testProg(t)
	type stop struct {
		tid  int
		regs unix.PtraceRegs
	}
	started := make(chan *child, 1)
	result := make(chan error, 1)
	var stops []stop
	go func() {
		// every ptrace request from this one thread
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(path, "fallback", "present")
		cmd.SysProcAttr = &syscall.SysProcAttr{Ptrace: true, Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = os.Stderr
		stdin, err1 := cmd.StdinPipe()
		stdout, err2 := cmd.StdoutPipe()
		if err := errors.Join(err1, err2, cmd.Start()); err != nil {
			started <- nil
			result <- err
			return
		}
		pid := cmd.Process.Pid
		started <- &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout), pid: pid}
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, unix.WALL, nil); err != nil || !ws.Stopped() {
			result <- fmt.Errorf("the exec stop: %v %v", ws, err)
			return
		}
		if err := unix.PtraceSetOptions(pid, unix.PTRACE_O_TRACECLONE|unix.PTRACE_O_EXITKILL); err != nil {
			result <- err
			return
		}
		resume := func(tid, sig int) {
			if err := unix.PtraceCont(tid, sig); err != nil && !errors.Is(err, unix.ESRCH) {
				t.Errorf("PTRACE_CONT %d: %v", tid, err)
			}
		}
		resume(pid, 0)
		for {
			tid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
			if err != nil {
				result <- err
				return
			}
			switch {
			case ws.Exited() || ws.Signaled():
				if tid == pid {
					if !ws.Exited() || ws.ExitStatus() != 0 {
						result <- fmt.Errorf("bpfev-jit ended with %v", ws)
					} else {
						result <- nil
					}
					return
				}
			case ws.Stopped() && ws.StopSignal() == unix.SIGTRAP:
				resume(tid, 0) // the clone event
			case ws.Stopped() && ws.StopSignal() == unix.SIGSTOP:
				code, err := siginfoCode(tid)
				if err == nil && code == 0x80 { // SI_KERNEL: the fallback's
					var st stop
					st.tid = tid
					if err := unix.PtraceGetRegs(tid, &st.regs); err != nil {
						t.Errorf("PTRACE_GETREGS %d: %v", tid, err)
					}
					stops = append(stops, st)
				}
				resume(tid, 0) // suppressed (a new thread's first stop too)
			case ws.Stopped():
				resume(tid, int(ws.StopSignal()))
			}
		}
	}()
	c := <-started
	if c == nil {
		t.Fatal(<-result)
	}
	line, err := c.out.ReadString('\n')
	if err != nil || line != fmt.Sprintf("ready %d\n", c.pid) {
		t.Fatalf("first line %q, %v", line, err)
	}
	if err := s.Add(c.pid); err != nil {
		t.Fatal(err)
	}
	io.WriteString(c.stdin, "go\n")
	c.stdin.Close()
	rest, err := io.ReadAll(c.out)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-result; err != nil {
		t.Fatal(err)
	}
	r := parseRun(t, rest)
	ex := execEvents(collect(t, s, c.pid))
	if len(ex) != 1 || ex[0].Reason != ReasonOverBudget || ex[0].Flags&FlagSignaled == 0 {
		t.Fatalf("exec events %+v, want one over budget, signaled", ex)
	}
	if len(stops) != 1 {
		t.Fatalf("%d SI_KERNEL SIGSTOP stops, want 1", len(stops))
	}
	st := stops[0]
	if int64(st.tid) != r.tid || int64(st.regs.Rip) != r.ip || st.regs.Orig_rax != unix.SYS_MPROTECT || st.regs.Rax != 0 ||
		st.regs.Rdi != ex[0].Args[0] || st.regs.Rsi != ex[0].Args[1] {
		t.Errorf("the stop: tid %d rip %#x orig_rax %d rax %#x rdi %#x rsi %#x; want tid %d rip %#x mprotect = 0 on %#x+%#x",
			st.tid, st.regs.Rip, st.regs.Orig_rax, st.regs.Rax, st.regs.Rdi, st.regs.Rsi, r.tid, r.ip, ex[0].Args[0], ex[0].Args[1])
	}
	if r.signal[2] != 0 {
		t.Errorf("the program's SIGUSR1 handler ran: %v", r.signal)
	}
}

// TestRaceMprotectMunmap: one thread maps 16 pages at one address, writes
// versions into them and makes them executable, over and over, while
// another thread unmaps them in a loop. Every exec-adding event is either complete
// with exactly the version the program wrote, or a fallback because the
// page went away (not present) or the mappings changed during the copy
// (raced), or the ring buffer was full (the reader fell behind the
// unmapping thread's events on a busy machine): never other bytes.
func TestRaceMprotectMunmap(t *testing.T) {
	const n, pages = 3000, 16
	// the unmapping thread makes an event per call: a ring of 64 MiB
	// holds them until the reader below gets its turn on a busy machine
	s := openSource(t, Config{Signal: unix.SIGUSR1, RingBytes: 64 << 20})
	want := func(v int) []byte {
		var b []byte
		for k := range pages {
			b = append(b, version(uint32(v*pages+k))...)
		}
		return b
	}
	c := startChild(t, "race", strconv.Itoa(n))
	if err := s.Add(c.pid); err != nil {
		t.Fatal(err)
	}
	// read as they come
	stop := make(chan struct{})
	got := make(chan []Event)
	go func() {
		var evs []Event
		for {
			var e Event
			s.SetDeadline(time.Now().Add(50 * time.Millisecond))
			err := s.Next(&e)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				select {
				case <-stop:
					got <- evs
					return
				default:
					continue
				}
			}
			if err != nil {
				t.Error(err)
				got <- evs
				return
			}
			if e.TGID == c.pid && e.Flags&FlagExec != 0 {
				evs = append(evs, e)
			}
		}
	}()
	r := c.run(t)
	close(stop)
	ex := append(<-got, execEvents(collect(t, s, c.pid))...)
	// match events to rounds by address and order; with call records
	// lost (a ring the reader could not keep up with), by content
	lost, err := s.Lost()
	if err != nil {
		t.Fatal(err)
	}
	if lost == 0 && len(ex) != len(r.execs) {
		t.Fatalf("%d exec-adding events for %d successful mprotects", len(ex), len(r.execs))
	}
	rounds := map[int]bool{}
	for _, x := range r.execs {
		rounds[x.version] = true
	}
	var complete, absent, raced, full int
	for k, e := range ex {
		if e.Flags&FlagFallback != 0 && e.Flags&FlagSignaled == 0 {
			t.Errorf("event %d: a fallback without the signal (error %d)", k, e.SignalErr)
		}
		if e.Addr != r.execs[0].addr || e.Len != pages*pageSize {
			t.Fatalf("event %d: range %#x+%#x, want %#x+%#x", k, e.Addr, e.Len, r.execs[0].addr, pages*pageSize)
		}
		round := k
		if lost == 0 {
			round = r.execs[k].version
		} else if len(e.Bytes) >= 5 {
			round = int(binary.LittleEndian.Uint32(e.Bytes[1:])) / pages
		}
		switch {
		case e.Complete():
			complete++
			if !rounds[round] || !bytes.Equal(e.Bytes, want(round)) {
				t.Errorf("event %d: complete, but not the bytes of round %d", k, round)
			}
		case e.Reason == ReasonNotPresent:
			absent++
			if len(e.Bytes) > 0 && !bytes.Equal(e.Bytes, want(round)[:len(e.Bytes)]) {
				t.Errorf("event %d: the pages copied before one went away are not round %d's", k, round)
			}
		case e.Reason == ReasonRaced:
			raced++
		case e.Reason == ReasonRingFull:
			full++
			if len(e.Bytes) > 0 && !bytes.Equal(e.Bytes, want(round)[:len(e.Bytes)]) {
				t.Errorf("event %d: the pages copied before the ring filled are not round %d's", k, round)
			}
		default:
			t.Errorf("event %d: flags %#x reason %v with %d bytes", k, e.Flags, e.Reason, len(e.Bytes))
		}
	}
	t.Logf("%d rounds, %d made executable, %d events: %d copied whole, %d fell back for a page gone, %d for a change during the copy, %d for a full ring; %d call records lost",
		n, len(r.execs), len(ex), complete, absent, raced, full, lost)
}

// TestNextUnblocks: a deadline ends a Next with nothing to read, and
// Close ends one in progress.
func TestNextUnblocks(t *testing.T) {
	s := openSource(t, Config{})
	s.SetDeadline(time.Now().Add(20 * time.Millisecond))
	var e Event
	if err := s.Next(&e); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Next past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
	if ok, err := s.TryNext(&e); ok || err != nil {
		t.Fatalf("TryNext on an empty ring: %v %v", ok, err)
	}
	s.SetDeadline(time.Time{})
	done := make(chan error)
	go func() {
		var e Event
		done <- s.Next(&e)
	}()
	time.Sleep(10 * time.Millisecond) // let Next block (if it is not there yet, it sees the Close)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v, want ErrClosed", err)
	}
}

// TestMremap: an mremap that moves executable pages is an exec-adding
// event with the bytes at the new address (bpf_find_vma says the mapping
// is executable); one that moves writable pages carries none.
func TestMremap(t *testing.T) {
	s := openSource(t, Config{})
	c := startChild(t, "mremap")
	if err := s.Add(c.pid); err != nil {
		t.Fatal(err)
	}
	r := c.run(t)
	var execMoves, plainMoves int
	for _, e := range collect(t, s, c.pid) {
		if e.Nr != unix.SYS_MREMAP {
			continue
		}
		switch uint64(e.Ret) {
		case r.execs[0].addr:
			execMoves++
			if !e.Complete() || e.Addr != r.execs[0].addr || e.Len != 2*pageSize ||
				!bytes.Equal(e.Bytes, append(version(0), version(1)...)) {
				t.Errorf("the executable pages' mremap: flags %#x reason %v range %#x+%#x, %d bytes; want complete %#x+%#x with versions 0 and 1",
					e.Flags, e.Reason, e.Addr, e.Len, len(e.Bytes), r.execs[0].addr, 2*pageSize)
			}
		case r.moved:
			plainMoves++
			if e.Flags != 0 || len(e.Bytes) != 0 {
				t.Errorf("the writable pages' mremap: flags %#x, %d bytes; want none", e.Flags, len(e.Bytes))
			}
		}
	}
	if execMoves != 1 || plainMoves != 1 {
		t.Errorf("%d mremap events of the executable pages and %d of the writable ones, want 1 and 1", execMoves, plainMoves)
	}
}

// cachedPages is what bpfev-jit pages N has made executable at its step
// s: 4 pages, versions 0..3, the last byte of page k set to the last
// step s' ≤ s with s'%4 == k; from step N+1 on, versions 100..103.
func cachedPages(n, s int) []byte {
	var b []byte
	for k := range 4 {
		if s > n {
			b = append(b, version(uint32(100+k))...)
			continue
		}
		p := version(uint32(k))
		for x := 1; x <= s; x++ {
			if x%4 == k {
				p[pageSize-1] = byte(x)
			}
		}
		b = append(b, p...)
	}
	return b
}

// TestPageCache: a page the kernel finds unchanged is not sent, and the
// event's bytes are still every byte of the range, against what the
// program wrote: a page that differs by its last byte is sent, pages a
// new mapping holds are sent even at the same address, and a cache too
// small for the range sends the pages it has no entry for every time.
func TestPageCache(t *testing.T) {
	const n = 12
	for _, tc := range []struct {
		name  string
		pages int
		same  bool   // unchanged pages expected in rounds 1..n
		may   uint64 // the pages that may be unchanged
	}{{"cache", 0, true, 0xf}, {"full", 2, false, 0x3}, {"off", -1, false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openSource(t, Config{CachePages: tc.pages})
			c := startChild(t, "pages", strconv.Itoa(n))
			if err := s.Add(c.pid); err != nil {
				t.Fatal(err)
			}
			r := c.run(t)
			ex := execEvents(collect(t, s, c.pid))
			if len(r.execs) != n+3 || len(ex) != n+3 {
				t.Fatalf("%d exec lines and %d exec-adding events, want %d", len(r.execs), len(ex), n+3)
			}
			sameTotal := 0
			e0 := ex[0].Epoch
			for i, e := range ex {
				want := cachedPages(n, r.execs[i].version)
				if !e.Complete() || e.Addr != r.execs[i].addr || !bytes.Equal(e.Bytes, want) {
					t.Errorf("step %d: flags %#x reason %v, %d bytes at %#x: not what the program wrote", i, e.Flags, e.Reason, len(e.Bytes), e.Addr)
					continue
				}
				if len(e.Gens) != 4 {
					t.Errorf("step %d: %d page numbers, want 4", i, len(e.Gens))
				}
				same := bits.OnesCount64(e.Same)
				sameTotal += same
				switch {
				case tc.pages < 0 && (e.Same != 0 || e.Epoch != 0):
					t.Errorf("step %d: no cache, but unchanged pages %#x (epoch %d)", i, e.Same, e.Epoch)
				case i >= 1 && i <= n && e.Same&(1<<(i%4)) != 0:
					t.Errorf("step %d: page %d changed (its last byte), but reported unchanged (%#x)", i, i%4, e.Same)
				case e.Same&^tc.may != 0:
					t.Errorf("step %d: unchanged pages %#x, but only %#x have an entry in the cache", i, e.Same, tc.may)
				case i == n+1 && e.Same != 0:
					t.Errorf("the range mapped anew with other bytes: unchanged pages %#x", e.Same)
				case tc.same && i >= 1 && i <= n && same != 3:
					t.Errorf("step %d: unchanged pages %#x, want the 3 pages but %d", i, e.Same, i%4)
				}
				if i > 0 && e.Same != 0 {
					for k := range 4 {
						if e.Same&(1<<k) != 0 && e.Gens[k] != ex[i-1].Gens[k] {
							t.Errorf("step %d: page %d unchanged, but numbered %d after %d", i, k, e.Gens[k], ex[i-1].Gens[k])
						}
					}
				}
			}
			t.Logf("%d of %d pages unchanged", sameTotal, 4*len(ex))
			if err := s.Remove(c.pid); err != nil {
				t.Fatal(err)
			}
			var k [16]byte
			var v []byte
			for it := s.cache.Iterate(); it.Next(&k, &v); {
				if binary.LittleEndian.Uint32(k[:]) == uint32(c.pid) {
					t.Errorf("the cache holds page %#x of the removed process", binary.LittleEndian.Uint64(k[8:]))
				}
			}
			if s.mirror[e0] != nil {
				t.Errorf("the reader still holds the removed process's pages")
			}
			if tc.may != 0 && sameTotal < bits.OnesCount64(tc.may)*n/2 {
				t.Errorf("%d pages unchanged, want at least %d", sameTotal, bits.OnesCount64(tc.may)*n/2)
			}
		})
	}
}

// TestIgnore: a call made with Config.Ignore in r9 (the tracker's
// injected calls) gives no event, no copy and no signal; the same call
// without it gives its event. The test process makes the calls itself
// (Syscall6 puts the sixth argument in r9), with a fallback signal it
// would see: SIGUSR1, caught.
func TestIgnore(t *testing.T) {
	const cookie = 0x7074_6a69_7400_0001
	s := openSource(t, Config{Ignore: cookie, Signal: unix.SIGUSR1, BudgetPages: 1})
	usr1 := make(chan os.Signal, 4)
	signal.Notify(usr1, unix.SIGUSR1)
	defer signal.Stop(usr1)
	self := os.Getpid()
	if err := s.Add(self); err != nil {
		t.Fatal(err)
	}
	defer s.Remove(self)
	// two pages: over the budget of one, so a reported call falls back
	// and signals
	mem, err := unix.Mmap(-1, 0, 2*pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	copy(mem, version(1))
	copy(mem[pageSize:], version(2))
	addr := uintptr(unsafePointer(mem))
	mprotect := func(prot, r9 uintptr) {
		if _, _, e := unix.Syscall6(unix.SYS_MPROTECT, addr, 2*pageSize, prot, 0, 0, r9); e != 0 {
			t.Fatalf("mprotect: %v", e)
		}
	}
	rx, rw := uintptr(unix.PROT_READ|unix.PROT_EXEC), uintptr(unix.PROT_READ|unix.PROT_WRITE)
	mprotect(rx, cookie)
	mprotect(rw, cookie)
	mprotect(rx, cookie+1) // not the cookie: reported, falls back, signals
	mprotect(rw, 0)
	var mine []Event
	for _, e := range collect(t, s, self) {
		if e.Args[0] == uint64(addr) {
			mine = append(mine, e)
		}
	}
	if len(mine) != 2 {
		t.Fatalf("%d events for the range, want 2 (the calls without the cookie): %+v", len(mine), mine)
	}
	if e := mine[0]; e.Args[5] != cookie+1 || e.Flags&FlagFallback == 0 || e.Reason != ReasonOverBudget {
		t.Errorf("first event: r9 %#x flags %#x reason %v, want the RX call without the cookie, over budget", e.Args[5], e.Flags, e.Reason)
	}
	select {
	case <-usr1:
	case <-time.After(10 * time.Second):
		t.Errorf("no fallback signal for the call without the cookie")
	}
	select {
	case <-usr1:
		t.Errorf("a second fallback signal: the call with the cookie signalled")
	case <-time.After(100 * time.Millisecond):
	}
}
