package decode

import (
	"strconv"
	"strings"
)

// Status is what a FlowDecoder reports with each successful step
// (SyncForward, Next, Event, Resync): a set of flags, libipt's
// pt_status_flag. The zero value means "decode the next instruction".
type Status uint8

const (
	// StatusEventPending: an event is pending; call Event (repeatedly)
	// before Next (libipt's pts_event_pending).
	StatusEventPending Status = 1 << iota
	// StatusIPSuppressed: tracing is disabled, or the IP of the last
	// query or event was suppressed (pts_ip_suppressed).
	StatusIPSuppressed
	// StatusEOS: there is no more trace; what remains are the pending
	// events (pts_eos).
	StatusEOS
)

// The query and flow layers work with libipt's int convention internally:
// these flags, or a negative Code. The exported methods convert.
const (
	stEventPending = int(StatusEventPending)
	stIPSuppressed = int(StatusIPSuppressed)
	stEOS          = int(StatusEOS)
)

// EventPending reports whether StatusEventPending is set.
func (s Status) EventPending() bool { return s&StatusEventPending != 0 }

// IPSuppressed reports whether StatusIPSuppressed is set.
func (s Status) IPSuppressed() bool { return s&StatusIPSuppressed != 0 }

// EOS reports whether StatusEOS is set.
func (s Status) EOS() bool { return s&StatusEOS != 0 }

var statusNames = [...]string{"event pending", "ip suppressed", "eos"}

// String returns the names of the flags set, joined by "|" ("event
// pending|eos"), or "none".
func (s Status) String() string {
	if s == 0 {
		return "none"
	}
	var b strings.Builder
	for i, name := range statusNames {
		if s&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString(name)
	}
	if rest := s &^ (1<<len(statusNames) - 1); rest != 0 {
		if b.Len() > 0 {
			b.WriteByte('|')
		}
		b.WriteString("0x")
		b.WriteString(strconv.FormatUint(uint64(rest), 16))
	}
	return b.String()
}
