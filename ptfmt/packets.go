package ptfmt

import (
	"bufio"
	"fmt"
	"io"

	"github.com/ptjit/ptjit/ptpkt"
)

// DumpText writes the packets of buf in ptjit's own format: one packet per
// line with its offset, its fields, for IP packets the full IP
// reconstructed with the last IP, and for timing packets the estimated TSC
// (once a TSC packet was seen; CYC needs calibration, see Timer). Decode
// errors are printed with their offset and decoding resumes at the next
// PSB. It returns only write errors.
func DumpText(w io.Writer, buf []byte, cfg *ptpkt.Config) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	dec := ptpkt.NewPacketDecoder(buf, cfg)
	var last ptpkt.LastIP
	timer := ptpkt.NewTimer(cfg)
	var p ptpkt.Packet
	err := dec.SyncForward()
	if err != nil && ptpkt.IsEOS(err) {
		fmt.Fprintf(bw, "no PSB in %d bytes: nothing to decode\n", len(buf))
	}
	for err == nil {
		off := dec.Offset()
		if err = dec.Next(&p); err != nil {
			if ptpkt.IsEOS(err) {
				break
			}
			fmt.Fprintf(bw, "0x%08x  error: %v; resyncing at the next PSB\n", off, errText(err))
			last.Reset()
			timer.Reset()
			err = dec.SyncForward()
			continue
		}
		fmt.Fprintf(bw, "0x%08x  %s", off, p.String())
		switch p.Type {
		case ptpkt.PktTIP, ptpkt.PktTIPPGE, ptpkt.PktTIPPGD, ptpkt.PktFUP:
			if uerr := last.Update(p.IPC, p.IP); uerr == nil {
				if ip, qerr := last.IP(); qerr == nil {
					fmt.Fprintf(bw, "  -> %#x", ip)
				}
			}
		case ptpkt.PktTSC, ptpkt.PktTMA, ptpkt.PktMTC, ptpkt.PktCYC:
			timer.Packet(&p)
			if tsc, terr := timer.TSC(); terr == nil {
				fmt.Fprintf(bw, "  [tsc %#x]", tsc)
			}
		case ptpkt.PktPSB, ptpkt.PktPSBEnd, ptpkt.PktOVF, ptpkt.PktCBR:
			timer.Packet(&p)
		}
		bw.WriteByte('\n')
	}
	if err != nil && !ptpkt.IsEOS(err) {
		fmt.Fprintf(bw, "error: %v\n", err)
	}
	return bw.Flush()
}
