package ptpkt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// CPUVendor is the vendor of the CPU a trace was recorded on.
type CPUVendor uint8

// CPU vendors. Only Intel CPUs have errata tables.
const (
	VendorUnknown CPUVendor = iota
	VendorIntel
)

// CPU identifies the processor a trace was recorded on (libipt's pt_cpu).
// The zero value means "unknown: decode by the spec".
type CPU struct {
	Vendor   CPUVendor
	Family   uint16
	Model    uint8
	Stepping uint8
}

// ErrUnknownCPU is returned by CPU.Errata for a CPU without an errata table.
var ErrUnknownCPU = errors.New("unknown cpu")

// ParseCPU parses "f/m[/s]" (decimal or 0x-prefixed numbers, as ptdump's
// --cpu). The result has VendorIntel; an unknown family/model is not an
// error here (Errata reports it).
func ParseCPU(s string) (CPU, error) {
	parts := strings.Split(s, "/")
	if len(parts) < 2 || len(parts) > 3 {
		return CPU{}, fmt.Errorf("cpu %q: must be family/model[/stepping]", s)
	}
	var v [3]uint64
	limits := [3]int{16, 8, 8}
	for i, p := range parts {
		x, err := strconv.ParseUint(p, 0, limits[i])
		if err != nil {
			return CPU{}, fmt.Errorf("cpu %q: bad number %q", s, p)
		}
		v[i] = x
	}
	return CPU{Vendor: VendorIntel, Family: uint16(v[0]), Model: uint8(v[1]), Stepping: uint8(v[2])}, nil
}

// Errata lists the Intel PT errata a decoder works around (libipt's
// pt_errata). See the CPU specification updates for the texts.
type Errata struct {
	BDM70  bool // PSB+ may contain FUP/MODE.Exec before TIP.PGE
	BDM64  bool // wrong packet after a TSX abort
	SKD007 bool // OVF may replace the remaining bytes of a CYC
	SKD022 bool // VM entry clearing TraceEn may generate a FUP
	SKD010 bool // FUP may be dropped after OVF
	SKL014 bool // TIP.PGD may lack its IP payload
	APL12  bool // OVF may be followed by an unexpected FUP
	APL11  bool // OVF may be followed by TIP.PGD
	SKL168 bool // CYC (and MTC) may be dropped before PSB
	SKZ84  bool // VMX TSC scaling corrupts TMA (plus a bogus byte)
}

// Errata returns the errata of the CPU (libipt's pt_cpu_errata). It
// returns ErrUnknownCPU (and no errata) for a CPU not in the table,
// including the zero CPU.
func (c CPU) Errata() (Errata, error) {
	var e Errata
	if c.Vendor != VendorIntel {
		return e, ErrUnknownCPU
	}
	switch c.Family {
	case 0x6:
		switch c.Model {
		case 0x3d, 0x47, 0x4f, 0x56:
			e.BDM70, e.BDM64 = true, true
			return e, nil
		case 0x4e, 0x5e, 0x8e, 0x9e, 0xa5, 0xa6:
			e.BDM70, e.SKD007, e.SKD022, e.SKD010, e.SKL014, e.SKL168 = true, true, true, true, true, true
			return e, nil
		case 0x55, 0x6a, 0x6c, 0x8f, 0xad, 0xae, 0xcf:
			e.BDM70, e.SKL014, e.SKD022, e.SKZ84 = true, true, true, true
			return e, nil
		case 0x66, 0x7d, 0x7e, 0x8c, 0x8d, 0xa7, 0xa8:
			e.BDM70, e.SKL014, e.SKD022 = true, true, true
			return e, nil
		case 0x97, 0x9a, 0xbf, 0xb7, 0xb5, 0xaa, 0xac, 0xba, 0xcc, 0xbd, 0xc5, 0xc6, 0xd5:
			e.BDM70, e.SKL014, e.SKD022, e.APL11 = true, true, true, true
			return e, nil
		case 0x5c, 0x5f:
			e.APL12, e.APL11 = true, true
			return e, nil
		case 0x7a, 0x86, 0x96, 0x9c, 0xb6, 0xaf, 0xdd:
			e.APL11 = true
			return e, nil
		}
	case 0x12:
		// Family 18 models 1 and 3: newer than the libipt table this
		// was read from; the conformance corpus (libipt 8978561f)
		// decodes them with these errata.
		if c.Model == 0x01 || c.Model == 0x03 {
			e.BDM70, e.SKL014, e.SKD022, e.APL11 = true, true, true, true
			return e, nil
		}
	case 0x13:
		if c.Model == 0x01 {
			e.BDM70, e.SKL014, e.SKD022, e.SKZ84 = true, true, true, true
			return e, nil
		}
	}
	return e, ErrUnknownCPU
}

// Config describes how a trace was recorded (libipt's pt_config, minus
// the buffer).
type Config struct {
	// CPU the trace was recorded on, and the errata to work around
	// (normally CPU.Errata()).
	CPU    CPU
	Errata Errata

	// CPUID leaf 0x15 EAX/EBX: the TSC to core crystal clock ratio
	// (denominator, numerator). Needed for MTC timing.
	CPUID15EAX, CPUID15EBX uint32

	// MTCFreq is IA32_RTIT_CTL.MTCFreq (bits 17:14): MTC packets come
	// every 2^MTCFreq CTC ticks.
	MTCFreq uint8

	// NomFreq is MSR_PLATFORM_INFO[15:8], the nominal core:bus ratio.
	// When non-zero, CBR packets calibrate CYC.
	NomFreq uint8

	// KeepTcalOnOVF keeps the CYC calibration across an overflow.
	KeepTcalOnOVF bool
}
