package ptpkt

import (
	"fmt"
	"strconv"
	"strings"
)

var ipcNames = [8]string{"suppressed", "update16", "update32", "sext48", "update48", "reserved5", "full", "reserved7"}

// String returns the compression's name ("update16").
func (c IPCompression) String() string {
	if c < 8 {
		return ipcNames[c]
	}
	return "ipc(" + strconv.Itoa(int(c)) + ")"
}

// String describes the packet in one line: its name and its fields as
// name=value (hex numbers with 0x). It allocates; decoders never call it.
func (p *Packet) String() string {
	var b strings.Builder
	b.WriteString(p.Type.String())
	f := func(format string, args ...any) {
		b.WriteByte(' ')
		fmt.Fprintf(&b, format, args...)
	}
	flag := func(on bool, name string) {
		if on {
			b.WriteByte(' ')
			b.WriteString(name)
		}
	}
	switch p.Type {
	case PktTIP, PktTIPPGE, PktTIPPGD, PktFUP:
		if p.IPC == IPSuppressed {
			f("ip=suppressed")
		} else {
			f("%s=%#x", p.IPC, p.IP)
		}
	case PktTNT8, PktTNT64:
		s := make([]byte, 0, p.TNTBits)
		for i := int(p.TNTBits) - 1; i >= 0; i-- {
			if p.TNTPayload>>uint(i)&1 != 0 {
				s = append(s, 'T')
			} else {
				s = append(s, 'N')
			}
		}
		f("%s", s)
	case PktPIP:
		f("cr3=%#x", p.Payload)
		flag(p.NR, "nr")
	case PktModeExec:
		f("mode=%s", ExecModeName(p))
		flag(p.IF, "if")
	case PktModeTSX:
		flag(p.InTX, "intx")
		flag(p.Abort, "abort")
	case PktCBR:
		f("ratio=%d", p.CBR)
	case PktTSC:
		f("tsc=%#x", p.Payload)
	case PktMTC:
		f("ctc=%#x", p.MTC)
	case PktTMA:
		f("ctc=%#x fc=%#x", p.CTC, p.FC)
	case PktCYC:
		f("cycles=%d", p.Payload)
	case PktVMCS:
		f("base=%#x", p.Payload)
	case PktMNT:
		f("payload=%#x", p.Payload)
	case PktPTW:
		f("bytes=%d payload=%#x", 4<<p.PLC, p.Payload)
		flag(p.IPBit, "ip")
	case PktExStop, PktBEP:
		flag(p.IPBit, "ip")
	case PktMWait:
		f("hints=%#x ext=%#x", p.Hints, p.Ext)
	case PktPwrE:
		f("c%d.%d", (p.State+1)&0xf, (p.SubState+1)&0xf)
		flag(p.HW, "hw")
	case PktPwrX:
		f("last=c%d deepest=c%d", (p.LastCState+1)&0xf, (p.DeepestCState+1)&0xf)
		flag(p.WakeInterrupt, "interrupt")
		flag(p.WakeStore, "store")
		flag(p.WakeAutonomous, "autonomous")
	case PktCFE:
		f("type=%s(%d)", CFEName(p.EvType), p.EvType)
		if CFEHasVector(p.EvType) {
			f("vector=%#x", p.Vector)
		}
		flag(p.IPBit, "ip")
	case PktEVD:
		f("type=%s(%d) payload=%#x", EVDName(p.EvType), p.EvType, p.Payload)
	case PktTrig:
		f("trbv=%#x", p.TRBV)
		flag(p.IPBit, "ip")
		flag(p.Mult, "mult")
		if p.ICNTValid {
			f("icnt=%d", p.ICNT)
		}
	case PktBBP:
		f("type=%#x bip-size=%d", p.EvType, map[bool]int{false: 4, true: 8}[p.SZ])
	case PktBIP:
		f("id=%#x payload=%#x", p.ID, p.Payload)
	}
	return b.String()
}
