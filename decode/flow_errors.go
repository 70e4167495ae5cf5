package decode

import "fmt"

// Code classifies a failure of the query or instruction-flow layer. The
// values and their texts follow libipt's pt_error_code so that ptxed-format
// output matches libipt's word for word.
type Code int

const (
	CodeInternal Code = iota + 1
	CodeInvalid
	CodeNosync
	CodeBadOpc
	CodeBadPacket
	CodeBadContext
	CodeEOS
	CodeBadQuery
	CodeNomem
	CodeBadConfig
	CodeNoIP
	CodeIPSuppressed
	CodeNomap
	CodeBadInsn
	CodeNoTime
	CodeNoCBR
	CodeBadImage
	CodeBadLock
	CodeNotSupported
	CodeRetstackEmpty
	CodeBadRetcomp
	CodeBadStatusUpdate
	CodeNoEnable
	CodeEventIgnored
	CodeOverflow
	CodeBadFile
	CodeBadCPU
	CodeNoProgress
)

var codeText = [...]string{
	0:                   "OK",
	CodeInternal:        "internal error",
	CodeInvalid:         "invalid argument",
	CodeNosync:          "decoder out of sync",
	CodeBadOpc:          "unknown opcode",
	CodeBadPacket:       "unknown packet",
	CodeBadContext:      "unexpected packet context",
	CodeEOS:             "reached end of trace stream",
	CodeBadQuery:        "trace stream does not match query",
	CodeNomem:           "out of memory",
	CodeBadConfig:       "bad configuration",
	CodeNoIP:            "no ip",
	CodeIPSuppressed:    "ip has been suppressed",
	CodeNomap:           "no memory mapped at this address",
	CodeBadInsn:         "unknown instruction",
	CodeNoTime:          "no timing information",
	CodeNoCBR:           "no core:bus ratio",
	CodeBadImage:        "bad image",
	CodeBadLock:         "locking error",
	CodeNotSupported:    "not supported",
	CodeRetstackEmpty:   "compressed return without call",
	CodeBadRetcomp:      "bad compressed return",
	CodeBadStatusUpdate: "bad status update",
	CodeNoEnable:        "expected tracing enabled event",
	CodeEventIgnored:    "event ignored",
	CodeOverflow:        "overflow",
	CodeBadFile:         "bad file",
	CodeBadCPU:          "unknown cpu",
	CodeNoProgress:      "no trace consumed in too many instructions (endless direct loop?)",
}

// String returns libipt's text for the code.
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeText) {
		return codeText[c]
	}
	return fmt.Sprintf("error %d", int(c))
}

// FlowError is a decode failure of the query or instruction-flow layer. It
// carries the trace offset of the packet being processed and, where known,
// the instruction address and (set by RunFlow) the decoder's time then.
type FlowError struct {
	Code   Code
	Offset uint64 // offset into the PT stream
	IP     uint64 // instruction address; zero when unknown
	TSC    uint64 // the time of the last timing packet before it, when HasTSC
	HasTSC bool
}

func (e *FlowError) Error() string {
	return fmt.Sprintf("pt offset %#x, ip %#x: %s", e.Offset, e.IP, e.Code)
}

// Is lets errors.Is match a FlowError against one of the Err* sentinels.
func (e *FlowError) Is(target error) bool {
	t, ok := target.(*FlowError)
	return ok && t.Code == e.Code && t.Offset == 0 && t.IP == 0
}

// Sentinels for errors.Is.
var (
	// ErrNomap: an instruction address is not covered by any image section.
	ErrNomap = &FlowError{Code: CodeNomap}
	// ErrFlowEOS: the trace ended.
	ErrFlowEOS = &FlowError{Code: CodeEOS}
	// ErrBadQuery: the trace does not match the code being decoded.
	ErrBadQuery = &FlowError{Code: CodeBadQuery}
)
