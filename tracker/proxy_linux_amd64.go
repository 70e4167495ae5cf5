package tracker

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// The protection proxy: a task that shares a process's memory (CLONE_VM,
// not a thread of it) and runs ptjit's mprotect calls for it on the
// tracer's CPU (tracker/doc.go, "The protection proxy").
//
// Life: created at the exec stop of a process ptjit launched (an
// injected clone(CLONE_VM|CLONE_PARENT), so that ptjit, not the program,
// is its parent and reaps it), stopped under ptrace for
// the rest of its life, stepped over a syscall instruction for each call,
// killed when its address space ends (the process's exit, an exec). It
// never runs an instruction but the syscall; signals sent to it (a
// process group's SIGINT) are dropped. Where it cannot be made or dies,
// the calls are injected into the stopped thread as before.

// proxyState is a space's proxy (space.proxy).
type proxyState struct {
	pid   int  // 0: none
	tried bool // made, or refused: never again for this space
	cpu   int  // the CPU it is pinned to; -1: not pinned
	regs  unix.PtraceRegs
}

// proxyOptions: killed with ptjit; the program's own RET_TRACE filters
// still stop (the call is passed, as in inject); no clone, exec or exit
// events (it makes none).
const proxyOptions = unix.PTRACE_O_EXITKILL | unix.PTRACE_O_TRACESECCOMP

// proxyStepLimit bounds the steps one call takes: each retry is a signal
// the proxy was sent (dropped) or a seccomp stop of the program's filter.
const proxyStepLimit = 64

// proxyExec resumes th from its exec stop. Where th's process gets a
// proxy (proxyWanted), th goes on to its execve's syscall-exit stop
// first (an injection needs a syscall-exit or a signal-delivery stop; in
// the exec stop itself the call does not run), and the proxy is made
// there: th is the process's only thread, nothing of the program has run,
// and no seccomp filter of the program's can refuse the clone.
//
// Precondition: on the locked tracer thread; th is in its exec stop, its
// space synced (the vdso known).
func (t *Tracer) proxyExec(th *thread) {
	px := &th.proc.space.proxy
	if px.tried || !t.proxyWanted(th) {
		t.resume(th.tid, 0)
		return
	}
	px.tried = true
	if err := unix.PtraceSyscall(th.tid, 0); err != nil {
		return // gone: its exit report follows
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(th.tid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		break
	}
	if kind, _ := classifyStatus(ws); kind != stopSyscallExit {
		t.queue(th.tid, ws) // a kill: the main loop handles it
		return
	}
	t.proxyStart(th)
	t.resume(th.tid, 0)
}

// viaProxy says whether th's next protection change runs in its
// space's proxy: always under --proxy=on, and once th's process has a
// seccomp filter of its own, which an injected call would pass through
// (it may kill, trap or fail it), while the proxy has the filters of the
// exec (ownfilter_linux_amd64.go); else as auto's timing says
// (proxypick.go).
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) viaProxy(th *thread) bool {
	return th.proc.space.proxy.pid != 0 && (t.opts.Proxy == ProxyOn || th.proc.ownFilter || t.pick.useProxy())
}

// proxyWanted reports whether th's process gets a proxy: W^X is on (its
// protection changes are what the proxy runs), ptjit is the process's
// parent (a proxy made with CLONE_PARENT is a child of the process's
// parent, which must reap it: not a child of the program, not an attached
// process, not the program under perf record, whose trace would also hold
// the proxy), no soft PT (which steps every thread anyway), and no BPF
// events (their page cache works only while the memory has one user:
// bpfev/doc.go; a proxy is a second), the proxies so far were not given
// up as the dearer path (proxypick.go), and the process has no seccomp
// filter of its own from before the exec (the proxy would have it too:
// ownfilter_linux_amd64.go).
func (t *Tracer) proxyWanted(th *thread) bool {
	return t.opts.Proxy != ProxyOff && !t.pick.gaveUp && t.wxOn() && t.soft == nil && t.events == nil &&
		!th.proc.ownFilter && statPPID(readStat(th.proc.pid)) == t.selfPID
}

// proxyStart makes th's space's proxy; where it cannot, the space has
// none and its calls are injected.
//
// Precondition: on the locked tracer thread; th is in a syscall-exit stop
// (proxyExec).
func (t *Tracer) proxyStart(th *thread) {
	sp := th.proc.space
	px := &sp.proxy
	flags := uint64(unix.CLONE_VM | unix.CLONE_PARENT) // exit signal 0: no SIGCHLD to anyone
	pid64, err := t.inject(th, unix.SYS_CLONE, flags, 0, 0, 0, 0)
	if err != nil || pid64 <= 0 {
		t.warnOp(fmt.Errorf("pid %d: no protection proxy (mprotect calls are injected): %v", th.proc.pid, err))
		return
	}
	pid := int(pid64)
	if err := t.proxyAdopt(pid); err != nil {
		unix.Kill(pid, unix.SIGKILL)
		t.proxyReap(pid)
		t.warnOp(fmt.Errorf("pid %d: no protection proxy (mprotect calls are injected): %v", th.proc.pid, err))
		return
	}
	px.pid, px.cpu = pid, -1
	t.proxies[pid] = true // from now on reaped by the main loop or proxyReapAll
	if px.regs, err = getRegs(pid); err != nil {
		t.proxyClose(sp)
		return
	}
	t.result.Stats.Proxies++
}

// proxyAdopt takes the new proxy's first stop (ptrace attached it to the
// tracer at its birth, PTRACE_O_TRACECLONE): from the queue if a wait for
// another thread saw it, else from the kernel; and sets its options.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) proxyAdopt(pid int) error {
	got := false
	if _, ok := t.pending[pid]; ok {
		delete(t.pending, pid)
		got = true
	}
	if t.later.per[pid] > 0 {
		t.dropQueued(pid, func(unix.WaitStatus) bool { return true })
		got = true
	}
	for !got {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if !ws.Stopped() {
			return errors.New("it died at its birth")
		}
		got = true
	}
	return unix.PtraceSetOptions(pid, proxyOptions)
}

// proxyCall runs syscall nr(args) in th's space's proxy and returns its
// result; ok false when there is no proxy (or it died meanwhile): the
// caller injects the call instead.
//
// Precondition: on the locked tracer thread; th is stopped.
func (t *Tracer) proxyCall(th *thread, nr int, args ...uint64) (ret int64, ok bool) {
	sp := th.proc.space
	px := &sp.proxy
	pid := px.pid
	if pid == 0 {
		return 0, false
	}
	addr, err := t.syscallInsn(th)
	if err != nil {
		return 0, false
	}
	t.proxyPin(px)
	r := callRegs(px.regs, addr, nr, args)
	if err := unix.PtraceSetRegs(pid, &r); err != nil {
		t.proxyClose(sp)
		return 0, false
	}
	for range proxyStepLimit {
		if err := unix.PtraceSingleStep(pid); err != nil {
			break
		}
		var ws unix.WaitStatus
		_, err := rawWait4(pid, &ws, unix.WALL)
		for errors.Is(err, unix.EINTR) {
			_, err = rawWait4(pid, &ws, unix.WALL)
		}
		if err != nil || !ws.Stopped() {
			break // killed from outside
		}
		if kind, sig := classifyStatus(ws); kind != stopSignal || sig != int(unix.SIGTRAP) {
			continue // a seccomp stop, a signal sent to it (dropped)
		}
		var res unix.PtraceRegs
		if err := unix.PtraceGetRegs(pid, &res); err != nil {
			break
		}
		if res.Rip != addr+2 {
			continue // a SIGTRAP someone sent, before the call ran
		}
		t.result.Stats.ProxyCalls++
		return int64(res.Rax), true
	}
	// killed from outside, or stepping it failed: its calls are
	// injected from now on
	t.proxyClose(sp)
	return 0, false
}

// proxyPin keeps the proxy on the tracer thread's CPU: the proxy's step
// and the tracer's wait for it are then one CPU's two context switches,
// with no wake-up of another CPU (tracker/doc.go). A CPU the proxy may
// not use (a cpuset) leaves it unpinned.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) proxyPin(px *proxyState) {
	cpu, ok := getCPU()
	if !ok || cpu == px.cpu {
		return
	}
	var set unix.CPUSet
	set.Set(cpu)
	if unix.SchedSetaffinity(px.pid, &set) == nil {
		px.cpu = cpu
	}
}

// proxyClose kills sp's proxy. Its end is reaped by the main loop's wait
// (proxyStop), or at the trace's end (proxyReapAll), not here: the last
// user of a large address space takes milliseconds to free it (a 512 MiB
// one, 50 ms), which the program's exit pays without a proxy, and which
// must not hold every other tracee's stops.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) proxyClose(sp *space) {
	px := &sp.proxy
	if px.pid == 0 {
		return
	}
	unix.Kill(px.pid, unix.SIGKILL)
	px.pid = 0
}

// proxyReapAll waits for the end of every proxy not yet reaped.
//
// Precondition: on the locked tracer thread; no tracee is left.
func (t *Tracer) proxyReapAll() {
	for pid := range t.proxies {
		unix.Kill(pid, unix.SIGKILL)
		t.proxyReap(pid)
		delete(t.proxies, pid)
	}
}

// proxyReap waits for a killed proxy's end (it is ptjit's child: CLONE_PARENT).
func (t *Tracer) proxyReap(pid int) {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || ws.Exited() || ws.Signaled() {
			return
		}
	}
}

// proxyStop handles a wait status of a proxy that the main loop's wait
// got (its death by a SIGKILL from outside): the space forgets it. It
// reports whether tid is a proxy.
//
// Precondition: on the locked tracer thread.
func (t *Tracer) proxyStop(tid int, ws unix.WaitStatus) bool {
	if !t.proxies[tid] {
		return false
	}
	if ws.Exited() || ws.Signaled() {
		delete(t.proxies, tid)
		for _, p := range t.procs {
			if sp := p.space; sp != nil && sp.proxy.pid == tid {
				sp.proxy.pid = 0
			}
		}
	}
	// a stop outside a call (cannot happen: it is only resumed by a
	// step, whose stop proxyCall takes) stays a stop
	return true
}
