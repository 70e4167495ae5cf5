package bpfev

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkExecToggle measures what an exec-adding call costs the thread
// that makes it: one op is mprotect RW, a store, mprotect RX of one page
// (a JIT's version), in this process,
//
//	alone     no BPF program loaded
//	untraced  the programs attached, this process not in the map (what
//	          every other process on the machine pays)
//	traced    in the map: two events per op, one with a one-page copy,
//	          read after the loop (the kernel side alone)
//
// A reader in the process it measures would measure the Go scheduler: a
// goroutine polling the ring while this one makes system calls costs the
// loop about 30 µs per op on the 2-core VM this was written on, with or
// without events. BenchmarkToggleProgram measures a reader in another
// process, as a tracer is.
//
// go test -count N runs each sub-benchmark N times in a row: to
// alternate, run the test binary N times with -test.count 1 and compare
// medians (the report of the package's first commit says how).
func BenchmarkExecToggle(b *testing.B) {
	page, err := unix.Mmap(-1, 0, pageSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(page)
	toggle := func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			if err := unix.Mprotect(page, unix.PROT_READ|unix.PROT_WRITE); err != nil {
				b.Fatal(err)
			}
			page[i%pageSize] = byte(i)
			if err := unix.Mprotect(page, unix.PROT_READ|unix.PROT_EXEC); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("alone", toggle)
	withSource := func(traced bool) func(*testing.B) {
		return func(b *testing.B) {
			if err := Available(); err != nil {
				b.Skip(err)
			}
			// SIGURG: a fallback (the ring full: 256 MiB hold about
			// 60000 ops) interrupts the Go runtime harmlessly; it counts
			// as fallbacks/op
			s, err := Open(Config{Signal: unix.SIGURG, RingBytes: 256 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if traced {
				if err := s.Add(os.Getpid()); err != nil {
					b.Fatal(err)
				}
			}
			toggle(b)
			s.Remove(os.Getpid())
			n := drain(b, s)()
			if traced {
				lost, _ := s.Lost()
				b.ReportMetric(float64(n.copies)/float64(b.N), "copies/op")
				b.ReportMetric(float64(n.fallbacks)/float64(b.N), "fallbacks/op")
				b.ReportMetric(float64(lost)/float64(b.N), "lost/op")
			}
		}
	}
	b.Run("untraced", withSource(false))
	b.Run("traced", withSource(true))
}

// BenchmarkGetpid is the cost of the sys_exit program to a system call it
// does not watch, in a process it does not trace: what every process pays
// while a Source is open.
func BenchmarkGetpid(b *testing.B) {
	loop := func(b *testing.B) {
		for b.Loop() {
			unix.Getpid()
		}
	}
	b.Run("alone", loop)
	b.Run("attached", func(b *testing.B) {
		if err := Available(); err != nil {
			b.Skip(err)
		}
		s, err := Open(Config{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		loop(b)
	})
}

type drained struct{ events, copies, fallbacks int }

// drain reads the source's events in a goroutine, as a tracer would,
// until the returned function is called; that function reads what is
// left and returns the counts.
func drain(tb testing.TB, s *Source) func() drained {
	stop := make(chan struct{})
	done := make(chan drained)
	go func() {
		var e Event
		var n drained
		count := func() {
			n.events++
			if e.Flags&FlagExec != 0 {
				n.copies++
				if e.Flags&FlagFallback != 0 {
					n.fallbacks++
				}
			}
		}
		for {
			s.SetDeadline(time.Now().Add(10 * time.Millisecond))
			err := s.Next(&e)
			if err == nil {
				count()
				continue
			}
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				tb.Error(err)
				break
			}
			select {
			case <-stop:
				for {
					ok, err := s.TryNext(&e)
					if err != nil {
						tb.Error(err)
					}
					if !ok || err != nil {
						break
					}
					count()
				}
				done <- n
				return
			default:
			}
		}
		done <- n
	}()
	return func() drained {
		close(stop)
		return <-done
	}
}

// BenchmarkToggleProgram runs bpfev-jit toggle 20000 (20000 versions of a
// JIT page: 40000 mprotects, 20000 one-page copies when traced) alone,
// traced with its events read as they come by a goroutine (as a tracer
// would: the ring wakes the reader for each event it finds idle), and
// traced with the events read after the program's end (the kernel side
// alone: no wakeups), rotating, one run of each per iteration. It
// reports the medians, the cost per exec-adding event, and per traced
// run the fallbacks (a ring the reader fell behind on) and the call
// records lost. Run it with -benchtime 9x or more, and state the load
// (/proc/loadavg) beside the figures.
func BenchmarkToggleProgram(b *testing.B) {
	const versions = 20000
	if err := Available(); err != nil {
		b.Skip(err)
	}
	// SIGUSR1: bpfev-jit handles it, where SIGSTOP would stop it for
	// good with no tracer to suppress it; 128 MiB hold a whole run
	s, err := Open(Config{Signal: unix.SIGUSR1, RingBytes: 128 << 20})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	const alone, live, late = 0, 1, 2
	var ms [3][]float64
	var fallbacks [3]int
	for b.Loop() {
		for mode := range 3 {
			c := startChild(b, "toggle", strconv.Itoa(versions))
			var finish func() drained
			if mode != alone {
				if err := s.Add(c.pid); err != nil {
					b.Fatal(err)
				}
			}
			if mode == live {
				finish = drain(b, s)
			}
			t0 := time.Now()
			c.run(b)
			ms[mode] = append(ms[mode], time.Since(t0).Seconds()*1e3)
			if mode == late {
				finish = drain(b, s)
			}
			if mode != alone {
				s.Remove(c.pid)
				n := finish()
				if n.copies != versions {
					b.Errorf("%d copies, want %d", n.copies, versions)
				}
				fallbacks[mode] += n.fallbacks
			}
		}
	}
	ma, ml, mz := median(ms[alone]), median(ms[live]), median(ms[late])
	b.ReportMetric(ma, "alone-ms")
	b.ReportMetric(ml, "live-ms")
	b.ReportMetric(mz, "late-ms")
	b.ReportMetric((ml-ma)*1e3/versions, "live-µs/event")
	b.ReportMetric((mz-ma)*1e3/versions, "late-µs/event")
	lost, _ := s.Lost()
	runs := float64(len(ms[alone]))
	b.ReportMetric(float64(fallbacks[live])/runs, "live-fallbacks/run")
	b.ReportMetric(float64(lost)/runs, "lost/run")
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
