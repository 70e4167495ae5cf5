package bpfev

import (
	"errors"
	"os"
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
//	          read by a goroutine as they come
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
			// SIGURG: a fallback (the ring full) interrupts the Go
			// runtime harmlessly; it counts as fallbacks/op
			s, err := Open(Config{Signal: unix.SIGURG})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if traced {
				if err := s.Add(os.Getpid()); err != nil {
					b.Fatal(err)
				}
			}
			// the reader: until told to stop, then what is left
			stop := make(chan struct{})
			done := make(chan [2]int)
			go func() {
				var e Event
				var n [2]int
				count := func() {
					if e.Flags&FlagExec != 0 {
						n[0]++
						if e.Flags&FlagFallback != 0 {
							n[1]++
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
						b.Error(err)
						break
					}
					select {
					case <-stop:
						for {
							ok, err := s.TryNext(&e)
							if err != nil {
								b.Error(err)
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
			toggle(b)
			s.Remove(os.Getpid())
			close(stop)
			n := <-done
			if traced {
				lost, _ := s.Lost()
				b.ReportMetric(float64(n[0])/float64(b.N), "copies/op")
				b.ReportMetric(float64(n[1])/float64(b.N), "fallbacks/op")
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
