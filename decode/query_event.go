package decode

import "github.com/ptjit/ptjit/x86"

// EventType says what an Event reports. The set follows libipt's
// pt_event_type, plus the event-trace events (CFE/EVD packets).
type EventType uint8

// Event types.
const (
	EvInvalid       EventType = iota
	EvEnabled                 // tracing enabled (TIP.PGE, PSB+ with FUP)
	EvDisabled                // tracing disabled synchronously (TIP.PGD)
	EvAsyncDisabled           // tracing disabled asynchronously (FUP + TIP.PGD)
	EvAsyncBranch             // asynchronous branch, e.g. interrupt (FUP + TIP)
	EvPaging                  // CR3 change bound to an instruction (PIP)
	EvAsyncPaging             // CR3 change bound to an async branch (FUP + PIP + TIP)
	EvOverflow                // internal buffer overflow (OVF)
	EvExecMode                // execution mode change (MODE.Exec)
	EvTSX                     // transaction begin, commit or abort (MODE.TSX)
	EvStop                    // trace stop (TraceStop)
	EvVMCS                    // VMCS base change bound to an instruction
	EvAsyncVMCS               // VMCS base change bound to an async branch
	EvExStop                  // execution stopped (EXSTOP)
	EvMWait                   // MWAIT hints (MWAIT)
	EvPwrE                    // power state entry (PWRE)
	EvPwrX                    // power state exit (PWRX)
	EvPTWrite                 // ptwrite payload (PTW)
	EvTick                    // time passed (synthesized, --event:tick)
	EvCBR                     // core:bus ratio (CBR)
	EvMNT                     // maintenance (MNT)
	EvTIP                     // internal: an indirect branch target
	EvTNT                     // internal: conditional branch outcomes
	EvIflags                  // RFLAGS.IF change (MODE.Exec with event trace)
	EvInterrupt               // interrupt or exception (CFE INTR)
	EvIret                    // iret (CFE IRET)
	EvSMI                     // SMI (CFE SMI)
	EvRSM                     // rsm (CFE RSM)
	EvSIPI                    // SIPI (CFE SIPI)
	EvInit                    // INIT (CFE INIT)
	EvVMEntry                 // VM entry (CFE VMENTRY)
	EvVMExit                  // VM exit (CFE VMEXIT, VMEXIT_INTR)
	EvShutdown                // shutdown (CFE SHUTDOWN)
	EvUintr                   // user interrupt (CFE UINTR)
	EvUiret                   // uiret (CFE UIRET)
	EvSwIntr                  // software interrupt (CFE SWINTR)
	EvSyscall                 // syscall (CFE SYSCALL)
	EvTrig                    // trigger (TRIG)

	evFUPOnly    // internal: a FUP consumed without an event
	EvEndOfTrace // the trace ended while tracing was enabled (RunFlow only)
)

// Event is one event of the trace. Which fields are meaningful depends on
// Type; IP is the address the event binds to (the "ip" printed with
// --event:ip), unless IPSuppressed.
type Event struct {
	Type         EventType
	IPSuppressed bool // IP is not known
	StatusUpdate bool // from a PSB+ header: a state update, not an event
	HasTSC       bool
	TSC          uint64 // time of the event, if HasTSC
	LostMTC      uint32
	LostCYC      uint32
	Offset       uint64 // trace offset of the packet that completed the event

	IP   uint64 // enabled/disabled/overflow/exec-mode/tsx/... ip; async branch "to"
	From uint64 // async branch "from"; async disabled "at"

	Resumed     bool         // EvEnabled: tracing resumes where it was disabled
	Mode        x86.ExecMode // EvExecMode
	IF          bool         // EvIflags: RFLAGS.IF
	Speculative bool         // EvTSX
	Aborted     bool         // EvTSX
	CR3         uint64       // EvPaging, EvAsyncPaging
	NonRoot     bool         // EvPaging, EvAsyncPaging
	Base        uint64       // EvVMCS, EvAsyncVMCS
	Hints, Ext  uint32       // EvMWait
	State       uint8        // EvPwrE
	SubState    uint8        // EvPwrE
	HW          bool         // EvPwrE
	Last        uint8        // EvPwrX
	Deepest     uint8        // EvPwrX
	WakeIntr    bool         // EvPwrX
	WakeStore   bool         // EvPwrX
	WakeAuto    bool         // EvPwrX
	Payload     uint64       // EvPTWrite, EvMNT
	Size        uint8        // EvPTWrite payload size in bytes
	Ratio       uint8        // EvCBR
	TNTBits     uint64       // EvTNT
	TNTSize     uint8        // EvTNT

	Vector  uint8  // EvInterrupt, EvVMExit (intr), EvUintr, EvSwIntr, EvSIPI
	HasVec  bool   // EvVMExit: an interrupt vector is given
	CR2     uint64 // EvInterrupt: page-fault address, if HasCR2
	HasCR2  bool
	VMXR    uint64 // EvVMExit: exit reason, if HasVMXR
	HasVMXR bool
	VMXQ    uint64 // EvVMExit: exit qualification, if HasVMXQ
	HasVMXQ bool

	TRBV      uint8  // EvTrig: trigger bits
	Mult      bool   // EvTrig
	ICNT      uint16 // EvTrig: instruction count, if HasICNT
	HasICNT   bool
	bindsToIP bool // internal: the event waits for a FUP
}

// event binding points: where a queued event waits to be completed.
const (
	bindPSBEnd = iota
	bindTIP
	bindFUP
	bindExStop
	bindNow // events to deliver before the current packet is processed
	numBindings
)

// evqSize is the capacity of each event queue; libipt uses 8.
const evqSize = 8

// eventQueue holds events waiting for the packet they bind to, one FIFO per
// binding point (libipt's pt_event_queue).
type eventQueue struct {
	q          [numBindings][evqSize]Event
	head, tail [numBindings]uint8 // tail == head: empty
	standalone Event
}

func (q *eventQueue) reset() {
	q.head = [numBindings]uint8{}
	q.tail = [numBindings]uint8{}
}

func (q *eventQueue) empty(b int) bool { return q.head[b] == q.tail[b] }

// enqueue appends a zeroed event to queue b; nil when full.
func (q *eventQueue) enqueue(b int) *Event {
	next := (q.tail[b] + 1) % evqSize
	if next == q.head[b] {
		return nil
	}
	ev := &q.q[b][q.tail[b]]
	*ev = Event{}
	q.tail[b] = next
	return ev
}

// dequeue removes and returns the oldest event of queue b; nil when empty.
// The returned pointer stays valid until the slot is reused.
func (q *eventQueue) dequeue(b int) *Event {
	if q.head[b] == q.tail[b] {
		return nil
	}
	ev := &q.q[b][q.head[b]]
	q.head[b] = (q.head[b] + 1) % evqSize
	return ev
}

// find returns the first event of type t in queue b, or nil.
func (q *eventQueue) find(b int, t EventType) *Event {
	for i := q.head[b]; i != q.tail[b]; i = (i + 1) % evqSize {
		if q.q[b][i].Type == t {
			return &q.q[b][i]
		}
	}
	return nil
}

// newStandalone returns the zeroed standalone event slot.
func (q *eventQueue) newStandalone() *Event {
	q.standalone = Event{}
	return &q.standalone
}
