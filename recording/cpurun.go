package recording

import (
	"fmt"
	"sort"

	"github.com/ptjit/ptjit/perf"
)

// runEntry says what runs on a CPU from TSC on: a traced thread (TID > 0),
// the idle task or an untraced one (TID 0), or nobody knows (Unknown: the
// sideband lost records, or had none yet).
type runEntry struct {
	TSC      uint64
	PID, TID int
	Unknown  string // why the thread is unknown; "" when it is known
	Offset   int64  // file offset of the record that set it (-1: none)
}

// cpuRuns is the state machine that turns the sideband of a per-CPU
// recording into, for each CPU, the thread running there over time. It is
// fed the sideband in time order (perf.PerfTrace.Sideband) and reads, as
// perf's intel-pt.c does with have_sched_switch (context switch records
// recorded CPU-wide):
//
//   - SWITCH_CPU_WIDE switch-out: from its time the CPU runs next_prev
//     (the thread switched to; pid 0 is the idle task);
//   - SWITCH_CPU_WIDE switch-in and SWITCH switch-in: from its time the
//     CPU runs the record's sample_id thread;
//   - SWITCH switch-out (perf records only the traced tasks' switches when
//     it may not record CPU-wide, have_sched_switch 2): from its time no
//     traced thread runs there until the next switch-in;
//   - ITRACE_START: the CPU runs its thread from its time (tracing
//     started there);
//   - LOST: records were lost on that CPU (or, without a CPU in its
//     sample_id, on every CPU): nobody can say which thread runs until the
//     next switch record.
//
// Until a CPU's first such record, what runs there is unknown.
type cpuRuns struct {
	byCPU    map[int][]runEntry
	conv     perf.PerfTimeConv
	switches int // switch records seen
}

func newCPURuns(conv perf.PerfTimeConv) *cpuRuns {
	return &cpuRuns{byCPU: map[int][]runEntry{}, conv: conv}
}

// set appends an entry for cpu (cpu < 0: every CPU known so far, and
// later ones from their first record).
func (c *cpuRuns) set(cpu int, e runEntry) {
	if cpu < 0 {
		for k := range c.byCPU {
			c.byCPU[k] = append(c.byCPU[k], e)
		}
		c.byCPU[-1] = append(c.byCPU[-1], e)
		return
	}
	if _, ok := c.byCPU[cpu]; !ok {
		// A CPU first seen now inherits what concerns every CPU.
		c.byCPU[cpu] = append([]runEntry(nil), c.byCPU[-1]...)
	}
	c.byCPU[cpu] = append(c.byCPU[cpu], e)
}

// add feeds one sideband record.
func (c *cpuRuns) add(rec *perf.PerfRecord) {
	tsc := c.conv.PerfToTSC(rec.ID.Time)
	cpu := int(rec.ID.CPU)
	if rec.ID.Valid&perf.SampleCPU == 0 {
		cpu = -1
	}
	switch rec.Type {
	case perf.RecSwitchCPUWide:
		c.switches++
		if cpu < 0 {
			return
		}
		if rec.SwitchOut() {
			c.set(cpu, runEntry{TSC: tsc, PID: int(rec.SwitchPid), TID: int(rec.SwitchTid), Offset: rec.Offset})
		} else {
			c.set(cpu, runEntry{TSC: tsc, PID: int(rec.ID.Pid), TID: int(rec.ID.Tid), Offset: rec.Offset})
		}
	case perf.RecSwitch:
		c.switches++
		switch {
		case cpu < 0:
		case rec.SwitchOut():
			c.set(cpu, runEntry{TSC: tsc, Offset: rec.Offset})
		default:
			c.set(cpu, runEntry{TSC: tsc, PID: int(rec.ID.Pid), TID: int(rec.ID.Tid), Offset: rec.Offset})
		}
	case perf.RecItraceStart:
		if cpu < 0 {
			return
		}
		c.set(cpu, runEntry{TSC: tsc, PID: int(rec.ItracePid), TID: int(rec.ItraceTid), Offset: rec.Offset})
	case perf.RecLost:
		c.set(cpu, runEntry{TSC: tsc, Offset: rec.Offset,
			Unknown: fmt.Sprintf("perf.data record at %#x: %d records lost", rec.Offset, rec.Lost)})
	}
}

// at returns what runs on cpu at time tsc: the last entry at or before it.
func (c *cpuRuns) at(cpu int, tsc uint64) runEntry {
	es := c.byCPU[cpu]
	if _, ok := c.byCPU[cpu]; !ok {
		es = c.byCPU[-1]
	}
	i := sort.Search(len(es), func(i int) bool { return es[i].TSC > tsc })
	if i == 0 {
		return runEntry{Unknown: "no sideband record says which thread runs on the CPU yet", Offset: -1}
	}
	return es[i-1]
}
