package softpt

// The per-cpu layout (LayoutPerCPU): what a CPU's trace holds when perf
// records a workload with intel_pt//u.
//
// Every thread keeps its own packet generator (Thread); its bytes go to the
// queue of the virtual CPU it runs on. A CPU runs one thread at a time.
// When another traced thread arrives on a CPU (placement: Options.CPUs), the CPU switches, as the kernel does:
//
//   - the leaving thread, if it was in user mode, is preempted: FUP with the
//     IP it resumes at and TIP.PGD (a CPU tracing only user mode stops at the
//     interrupt's kernel entry);
//   - a SWITCH_CPU_WIDE record with PERF_RECORD_MISC_SWITCH_OUT (sample_id:
//     the leaving thread; next_prev: the arriving one), then, the first time
//     the CPU runs a traced thread, ITRACE_START, then the switch-in record
//     (sample_id: the arriving thread; next_prev: the leaving one), all at
//     the time of the arrival;
//   - the arriving thread's bytes start with a PSB+ (PSB, TSC, TMA,
//     PSBEND: tracing is off, so no FUP) carrying the same time; the
//     decoder knows nothing of the thread's last IP or return stack. A
//     preempted thread resumes with TSC, MODE.Exec and TIP.PGE at its next
//     instruction.
//
// perf's decoder (have_sched_switch 3) sets a CPU's current thread from
// each switch-out's next_prev at the record's time and attributes every
// instruction whose timestamp is at or after that time to it: the
// preemption's FUP/TIP.PGD carry no timing packet, so that the leaving
// thread's last instructions keep timestamps before the switch, and the
// PSB+'s TSC equals the switch time.
//
// Precondition (the tracker's rdtsc at each stop gives it): times
// strictly increase from one call to the next that concerns another thread,
// so a switch's time is after every timing packet of the leaving thread.
//
// A thread that moves to another CPU is switched out of the old one (to
// the idle task, pid 0) and in on the new one. An exiting thread is
// switched out after its EXIT record.

// place makes tid the thread running on its CPU before it generates
// packets at ip (the instruction it executes next). Per-cpu only.
func (s *Session) place(tid int, st *sessionThread, ip, tsc uint64) {
	if !s.perCPU {
		return
	}
	c := s.cpuFor(tid, st)
	cp := s.cpus[c]
	if st.cpu == c && cp.tid == tid {
		return
	}
	if st.cpu >= 0 && st.cpu != c {
		s.switchOut(st.cpu, tid, st, 0, 0, tsc) // migration
	}
	prevPid, prevTid := cp.pid, cp.tid
	s.w.SetCPU(c)
	if cur := s.threads[cp.tid]; cp.tid != 0 && cur != nil && cur.cpu == c {
		s.switchOut(c, cp.tid, cur, st.pid, tid, tsc)
	} else {
		s.w.Switch(true, false, cp.pid, cp.tid, st.pid, tid, tsc)
	}
	if !cp.started {
		cp.started = true
		s.w.ItraceStart(st.pid, tid, tsc)
	}
	s.w.Switch(false, false, st.pid, tid, prevPid, prevTid, tsc)
	cp.pid, cp.tid = st.pid, tid
	st.cpu = c
	st.th.Resync(ip, tsc)
}

// switchOut takes thread tid off CPU c, for next (0, 0: the idle task).
func (s *Session) switchOut(c, tid int, st *sessionThread, nextPid, nextTid int, tsc uint64) {
	preempt := st.th.Enabled()
	if preempt {
		st.th.Preempt(st.nextIP)
		st.preempted = true
	}
	s.takeInto(c, st.th)
	s.w.SetCPU(c)
	s.w.Switch(true, preempt, st.pid, tid, nextPid, nextTid, tsc)
	st.cpu = -1
	cp := s.cpus[c]
	cp.pid, cp.tid = nextPid, nextTid
}

// resume returns tid's generator for an instruction at ip that retired,
// placed on its CPU and enabled again if a switch preempted it; nil when
// the thread is not traced or tracing is off.
func (s *Session) resume(tid int, ip, tsc uint64) *Thread {
	st := s.threads[tid]
	if st == nil {
		return nil
	}
	if st.th.Enabled() || st.preempted {
		s.place(tid, st, ip, tsc)
	}
	if st.preempted {
		st.preempted = false
		st.th.Enable(ip, tsc)
	}
	if !st.th.Enabled() {
		return nil
	}
	return st.th
}

// cpuFor returns the CPU tid runs on now.
func (s *Session) cpuFor(tid int, st *sessionThread) int {
	n := len(s.cpus)
	if s.cpuRd != nil {
		if c := s.cpuRd.cpu(tid); c >= 0 && c < n {
			return c
		}
	}
	return (st.ord + int(s.steps/s.quantum)) % n
}

// takeInto moves th's pending bytes to CPU c's queue.
func (s *Session) takeInto(c int, th *Thread) {
	cp := s.cpus[c]
	cp.buf = append(cp.buf, th.Take()...)
}

// flushCPU writes CPU c's pending bytes as one AUXTRACE record; its tid is
// the workload's pid, as perf writes it for every CPU queue.
func (s *Session) flushCPU(c int) {
	cp := s.cpus[c]
	s.auxTrace(s.workload, c, cp.buf)
	cp.buf = cp.buf[:0]
}

// onCPUOf sets the CPU of the next sideband record to tid's, when known.
func (s *Session) onCPUOf(tid int) {
	if st := s.threads[tid]; s.perCPU && st != nil && st.cpu >= 0 {
		s.w.SetCPU(st.cpu)
	}
}
