package tracker

import (
	"golang.org/x/sys/unix"
)

// Signals that arrive while ptjit acts in a thread.
//
// An injected syscall, a W^X single-step or a restarted call resumes a
// thread for ptjit's own purpose; a signal the thread receives meanwhile
// (a kill of the process, a timer, SIGCHLD, a fault of the program's own)
// is reported to ptjit as a signal-delivery-stop, and ptjit resumes the
// thread without it, so that its handler does not run inside ptjit's
// operation. The signal is held (hold), with its siginfo, until ptjit
// resumes the thread for the program, whatever stop that is from: then it
// is sent to the thread again with tgkill (resendHeld). It arrives as the
// thread runs on, before the thread's next instruction, like a signal
// that came while the thread was in the kernel. tgkill gives it ptjit's
// pid and SI_TKILL, so ptjit puts the original siginfo back when it
// arrives (restoreSiginfo): the handler sees the sender's pid, the
// sigqueue value, SIGCHLD's status, a fault's address — what it would
// see alone.
//
// Before this, a held signal went out only when the thread was next
// resumed from a signal stop, and with the siginfo of that stop: one
// held at a seccomp or syscall-exit stop waited for the thread's next
// fault or signal, for ever where none came (a SIGTERM that never ended
// the program).

// heldSignal is a signal held or sent again, with its siginfo (info is
// nil where it could not be read: it then arrives with tgkill's).
type heldSignal struct {
	sig  int
	info *siginfo
}

// siTkill is si_code for a signal sent with tkill or tgkill.
const siTkill = -6

// hold keeps sig, which th received while ptjit acted in it, for
// resendHeld.
//
// Precondition: on the locked tracer thread; th is in the
// signal-delivery-stop of sig.
func (t *Tracer) hold(th *thread, sig int) {
	if t.eventSignal(th, sig) {
		return // the BPF program's fallback stop of a call ptjit injected
	}
	h := heldSignal{sig: sig}
	if si, err := getSiginfo(th.tid); err == nil {
		h.info = &si
	}
	th.sig.held = append(th.sig.held, h)
}

// resendHeld sends th's held signals to it again, in the order they came;
// restoreSiginfo gives each its siginfo back when it arrives.
//
// Precondition: on the locked tracer thread; th is stopped and about to
// be resumed for the program.
func (t *Tracer) resendHeld(th *thread) {
	for _, h := range th.sig.held {
		if err := unix.Tgkill(th.proc.pid, th.tid, unix.Signal(h.sig)); err != nil {
			continue // gone: its exit report follows
		}
		if h.info != nil {
			th.sig.reraised = append(th.sig.reraised, h)
		}
	}
	th.sig.held = nil
}

// restoreSiginfo puts back the siginfo of a signal resendHeld sent, when
// it arrives at th (si is the stop's siginfo where classify read it).
//
// Precondition: on the locked tracer thread; th is in the
// signal-delivery-stop of sig.
func (t *Tracer) restoreSiginfo(th *thread, sig int, si *siginfo) {
	if len(th.sig.reraised) == 0 {
		return
	}
	if si == nil {
		got, err := getSiginfo(th.tid)
		if err != nil {
			return
		}
		si = &got
	}
	if si.Code != siTkill || int32(si.Addr) != int32(t.selfPID) {
		return // not ptjit's tgkill
	}
	for i, h := range th.sig.reraised {
		if h.sig == sig {
			th.sig.reraised = append(th.sig.reraised[:i], th.sig.reraised[i+1:]...)
			if err := setSiginfo(th.tid, h.info); err != nil {
				t.warnf("tid %d: restoring the siginfo of signal %d: %v", th.tid, sig, err)
			}
			return
		}
	}
}
