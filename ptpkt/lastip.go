package ptpkt

import "errors"

// Errors of the last-IP state machine (libipt's pte_noip and
// pte_ip_suppressed texts).
var (
	ErrNoIP         = errors.New("no ip")
	ErrIPSuppressed = errors.New("ip has been suppressed")
)

// LastIP reconstructs full instruction pointers from the compressed IP
// payloads of TIP, TIP.PGE, TIP.PGD and FUP packets (SDM "IP Compression";
// libipt's pt_last_ip). The zero value has no IP.
type LastIP struct {
	ip         uint64
	haveIP     bool
	suppressed bool
}

// Reset forgets the IP (as at a PSB resync).
func (l *LastIP) Reset() { *l = LastIP{} }

// Update folds the IP payload of p (any packet with IPC/IP fields) into
// the last IP. A suppressed IP marks the last IP suppressed but keeps its
// value for later updates. It returns ErrBadPacket for a reserved IP
// compression.
func (l *LastIP) Update(ipc IPCompression, ip uint64) error {
	switch ipc {
	case IPSuppressed:
		l.suppressed = true
		return nil
	case IPUpdate16:
		l.ip = l.ip&^0xffff | ip&0xffff
	case IPUpdate32:
		l.ip = l.ip&^0xffffffff | ip&0xffffffff
	case IPUpdate48:
		l.ip = l.ip&^0xffffffffffff | ip&0xffffffffffff
	case IPSext48:
		l.ip = SignExtend48(ip)
	case IPFull:
		l.ip = ip
	default:
		return ErrBadPacket
	}
	l.haveIP, l.suppressed = true, false
	return nil
}

// IP returns the current last IP, ErrNoIP if no IP was seen since the last
// reset, or ErrIPSuppressed if the most recent IP packet suppressed it.
func (l *LastIP) IP() (uint64, error) {
	if !l.haveIP {
		return 0, ErrNoIP
	}
	if l.suppressed {
		return 0, ErrIPSuppressed
	}
	return l.ip, nil
}

// SignExtend48 sign-extends a 48-bit value to 64 bits.
func SignExtend48(v uint64) uint64 {
	return uint64(int64(v<<16) >> 16)
}
