package decode

import (
	"errors"

	"github.com/ptjit/ptjit/ptpkt"
)

// AddrFilter is the IA32_RTIT_ADDRn configuration the trace was recorded
// with (libipt's pt_conf_addr_filter): ADDRn_CFG (1 = filter, 2 = stop) and
// the inclusive ranges [A, B].
type AddrFilter struct {
	Cfg  [4]uint8
	A, B [4]uint64
}

// check reports whether tracing is enabled at addr under the filter
// configuration (libipt's pt_filter_addr_check).
func (f *AddrFilter) check(addr uint64) bool {
	for n := 0; n < 4; n++ {
		if f.Cfg[n] == 2 && f.A[n] <= addr && addr <= f.B[n] {
			return false
		}
	}
	haveFilter := false
	for n := 0; n < 4; n++ {
		if f.Cfg[n] != 1 {
			continue
		}
		haveFilter = true
		if f.A[n] <= addr && addr <= f.B[n] {
			return true
		}
	}
	return !haveFilter
}

// any reports whether any address range is configured.
func (f *AddrFilter) any() bool { return f.Cfg != [4]uint8{} }

// FlowConfig configures the query and instruction-flow layers.
type FlowConfig struct {
	// Packet is the trace configuration: CPU, errata, timing parameters.
	Packet ptpkt.Config
	// Filter is the address filter configuration the trace was recorded
	// with; it matters for erratum SKL014.
	Filter AddrFilter
	// TickEvents asks for a tick event whenever time advances at a
	// branch (ptxed --event:tick).
	TickEvents bool
	// MaxSteps bounds the instructions decoded without consuming any
	// trace (an endless direct loop in a wrong image); 0 means 1<<24.
	MaxSteps uint64

	// noFastPaths turns the decoder's fast paths off: the query layer's
	// MTC runs and quiet TNT and TIP packets (fetchQEvent, fetchEvent,
	// takeTNT) and RunFlow's blocks (nextBlock), leaving the general
	// dispatch packet by packet and Next instruction by instruction.
	// Only tests set it, to require that both give the same flow.
	noFastPaths bool
}

// errorsIs is errors.Is (kept short for the decode switch).
func errorsIs(err, target error) bool { return errors.Is(err, target) }
