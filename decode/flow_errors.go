package decode

import "fmt"

// errCode classifies a failure of the query or instruction-flow layer. The
// values and their texts follow libipt's pt_error_code so that ptxed-format
// output matches libipt's word for word.
type errCode int

const (
	feInternal errCode = iota + 1
	feInvalid
	feNosync
	feBadOpc
	feBadPacket
	feBadContext
	feEOS
	feBadQuery
	feNomem
	feBadConfig
	feNoIP
	feIPSuppressed
	feNomap
	feBadInsn
	feNoTime
	feNoCBR
	feBadImage
	feBadLock
	feNotSupported
	feRetstackEmpty
	feBadRetcomp
	feBadStatusUpdate
	feNoEnable
	feEventIgnored
	feOverflow
	feBadFile
	feBadCPU
	feNoProgress
)

var errCodeText = [...]string{
	0:                 "OK",
	feInternal:        "internal error",
	feInvalid:         "invalid argument",
	feNosync:          "decoder out of sync",
	feBadOpc:          "unknown opcode",
	feBadPacket:       "unknown packet",
	feBadContext:      "unexpected packet context",
	feEOS:             "reached end of trace stream",
	feBadQuery:        "trace stream does not match query",
	feNomem:           "out of memory",
	feBadConfig:       "bad configuration",
	feNoIP:            "no ip",
	feIPSuppressed:    "ip has been suppressed",
	feNomap:           "no memory mapped at this address",
	feBadInsn:         "unknown instruction",
	feNoTime:          "no timing information",
	feNoCBR:           "no core:bus ratio",
	feBadImage:        "bad image",
	feBadLock:         "locking error",
	feNotSupported:    "not supported",
	feRetstackEmpty:   "compressed return without call",
	feBadRetcomp:      "bad compressed return",
	feBadStatusUpdate: "bad status update",
	feNoEnable:        "expected tracing enabled event",
	feEventIgnored:    "event ignored",
	feOverflow:        "overflow",
	feBadFile:         "bad file",
	feBadCPU:          "unknown cpu",
	feNoProgress:      "no trace consumed in too many instructions (endless direct loop?)",
}

// String returns libipt's text for the code.
func (c errCode) String() string {
	if c >= 0 && int(c) < len(errCodeText) {
		return errCodeText[c]
	}
	return fmt.Sprintf("error %d", int(c))
}

// FlowError is a decode failure of the query or instruction-flow layer. It
// carries the trace offset of the packet being processed and, where known,
// the instruction address.
type FlowError struct {
	Code   errCode
	Offset uint64 // offset into the PT stream
	IP     uint64 // instruction address; zero when unknown
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
	ErrNomap = &FlowError{Code: feNomap}
	// ErrFlowEOS: the trace ended.
	ErrFlowEOS = &FlowError{Code: feEOS}
	// ErrBadQuery: the trace does not match the code being decoded.
	ErrBadQuery = &FlowError{Code: feBadQuery}
)
