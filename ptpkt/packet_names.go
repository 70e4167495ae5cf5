package ptpkt

// Names of packet fields as libipt's ptdump prints them.

// CFEName returns ptdump's name of a CFE type ("unknown" if undefined).
func CFEName(t uint8) string {
	if int(t) < len(cfeNames) && cfeNames[t] != "" {
		return cfeNames[t]
	}
	return "unknown"
}

// EVDName returns ptdump's name of an EVD type ("unknown" if undefined).
func EVDName(t uint8) string {
	switch t {
	case EVDCR2:
		return "cr2"
	case EVDVMXQ:
		return "vmxq"
	case EVDVMXR:
		return "vmxr"
	}
	return "unknown"
}

// CFEHasVector reports whether a CFE type's vector field is defined.
func CFEHasVector(t uint8) bool {
	switch t {
	case CFEIntr, CFESIPI, CFEVMExitIntr, CFEUIntr, CFESWIntr:
		return true
	}
	return false
}

// ExecModeName returns the execution mode of a MODE.Exec packet as ptdump
// prints it: "64-bit", "32-bit", "16-bit" or "unknown" (CS.L and CS.D).
func ExecModeName(p *Packet) string {
	switch {
	case p.CSL && p.CSD:
		return "unknown"
	case p.CSL:
		return "64-bit"
	case p.CSD:
		return "32-bit"
	}
	return "16-bit"
}

var cfeNames = [32]string{
	CFEIntr: "intr", CFEIRet: "iret", CFESMI: "smi", CFERSM: "rsm",
	CFESIPI: "sipi", CFEInit: "init", CFEVMEntry: "vmentry",
	CFEVMExit: "vmexit", CFEVMExitIntr: "vmexit_intr",
	CFEShutdown: "shutdown", CFEUIntr: "uintr", CFEUIRet: "uiret",
	CFESWIntr: "swintr", CFESyscall: "syscall",
}
