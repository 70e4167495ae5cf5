package tracker_test

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/tracker"
)

// benchProgram runs wxbench under the tracker with b.N iterations and
// reports the program's own time per operation and ptjit's time per stop.
func benchProgram(b *testing.B, set func(*tracker.Options), args ...string) {
	prog := cprog(b, "wxbench")
	tr := traceOpts(b, set, append([]string{prog, strconv.Itoa(b.N)}, args...)...)
	f := strings.Fields(tr.stdout) // "stores: N, X us/store"
	if len(f) < 3 {
		b.Fatalf("wxbench printed %q", tr.stdout)
	}
	us, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		b.Fatalf("wxbench printed %q", tr.stdout)
	}
	b.ReportMetric(us, "µs/op-in-program")
	if s := tr.res.Stats; s.Stops > 0 {
		b.ReportMetric(float64(s.StopNS)/float64(s.Stops)/1e3, "µs/stop-in-ptjit")
	}
}

// BenchmarkWXPrecise: one recorded store (fault stop + emulation + new
// version), measured inside the program, and the same stores as bare fault
// stops (wxbench's own minimal tracer skips each faulting store) in the same
// run. Target: ≤ 2× the bare fault stop.
func BenchmarkWXPrecise(b *testing.B) {
	benchProgram(b, func(o *tracker.Options) { o.WX = tracker.WXPrecise })
	out, err := exec.Command(cprog(b, "wxbench"), strconv.Itoa(b.N), "bare").Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) < 3 {
		b.Fatalf("wxbench bare: %v: %q", err, out)
	}
	us, err := strconv.ParseFloat(f[2], 64)
	if err != nil {
		b.Fatalf("wxbench bare printed %q", out)
	}
	b.ReportMetric(us, "µs/bare-fault-stop")
}

// BenchmarkWXBatch: stores to a page in batch mode (no stop after the first).
func BenchmarkWXBatch(b *testing.B) {
	benchProgram(b, func(o *tracker.Options) { o.WX = tracker.WXBatch })
}

// BenchmarkMprotectStop: one mprotect under the tracker (seccomp stop, exit
// stop, a version every RX), with --pin off and on.
func BenchmarkMprotectStop(b *testing.B) {
	for _, pin := range []tracker.PinMode{tracker.PinOff, tracker.PinOn} {
		b.Run(fmt.Sprint(pin), func(b *testing.B) {
			benchProgram(b, func(o *tracker.Options) { o.Pin = pin }, "mprotect")
		})
	}
}
