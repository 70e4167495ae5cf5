package x86

import (
	"runtime"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"golang.org/x/arch/x86/x86asm"
	"golang.org/x/sys/unix"
)

// threadCPU returns the calling thread's CPU time in ns. The benchmarks
// report CPU ns per instruction besides wall time, because the 2-core
// machine is shared and wall time then measures the neighbours.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatalf("clock_gettime: %v", err)
	}
	return ts.Nano()
}

// sweepBench runs decode (which returns instructions decoded) b.N times
// and reports ns/insn (wall) and cpu-ns/insn.
func sweepBench(b *testing.B, bytes int, decode func() int) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	n := 0
	var cpu int64
	for b.Loop() {
		c0 := threadCPU(b)
		n += decode()
		cpu += threadCPU(b) - c0
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/insn")
	b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/insn")
}

// benchText returns libc's .text for the benchmarks, or skips.
func benchText(b *testing.B) ([]byte, uint64) {
	b.Helper()
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	return testenv.TextSection(b, path)
}

// BenchmarkDecodeInsn sweeps libc's .text linearly with DecodeInsn and, for
// comparison, with x86asm.Decode. allocs/op is per sweep.
func BenchmarkDecodeInsn(b *testing.B) {
	text, base := benchText(b)
	b.Run("ptjit", func(b *testing.B) {
		var in Insn
		sweepBench(b, len(text), func() int {
			n := 0
			for off := 0; off < len(text); {
				if err := DecodeInsn(text[off:], base+uint64(off), Mode64, &in); err != nil {
					off++
					continue
				}
				off += int(in.Len)
				n++
			}
			return n
		})
	})
	b.Run("x86asm", func(b *testing.B) {
		sweepBench(b, len(text), func() int {
			n := 0
			for off := 0; off < len(text); {
				inst, err := x86asm.Decode(text[off:], 64)
				if err != nil {
					off++
					continue
				}
				off += inst.Len
				n++
			}
			return n
		})
	})
}

// BenchmarkInsnLen measures the length-only entry point.
func BenchmarkInsnLen(b *testing.B) {
	text, _ := benchText(b)
	sweepBench(b, len(text), func() int {
		n := 0
		for off := 0; off < len(text); {
			l, err := InsnLen(text[off:], Mode64)
			if err != nil {
				l = 1
			}
			off += l
			n++
		}
		return n
	})
}
