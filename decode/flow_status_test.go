package decode

import (
	"errors"
	"testing"
)

func TestStatusString(t *testing.T) {
	tests := []struct {
		s    Status
		want string
	}{
		{0, "none"},
		{StatusEventPending, "event pending"},
		{StatusIPSuppressed, "ip suppressed"},
		{StatusEOS, "eos"},
		{StatusEventPending | StatusEOS, "event pending|eos"},
		{StatusEventPending | StatusIPSuppressed | StatusEOS, "event pending|ip suppressed|eos"},
		{StatusIPSuppressed | 0x30, "ip suppressed|0x30"},
		{0x80, "0x80"},
	}
	for _, tt := range tests {
		if got := tt.s.String(); got != tt.want {
			t.Errorf("Status(%#x).String() = %q, want %q", uint8(tt.s), got, tt.want)
		}
	}
	if s := StatusEventPending | StatusEOS; !s.EventPending() || s.IPSuppressed() || !s.EOS() {
		t.Errorf("flag methods of %v", s)
	}
}

// TestFlowErrors checks that the exported flow methods return *FlowError
// values that errors.Is and errors.As understand.
func TestFlowErrors(t *testing.T) {
	// No PSB: synchronizing reaches the end of the trace.
	d := NewFlowDecoder([]byte{0, 0, 0, 0}, NewImage(), nil)
	st, err := d.SyncForward()
	if !errors.Is(err, ErrFlowEOS) || st != 0 {
		t.Fatalf("SyncForward = %v, %v; want 0, %v", st, err, ErrFlowEOS)
	}
	var fe *FlowError
	if !errors.As(err, &fe) || fe.Code != CodeEOS {
		t.Fatalf("SyncForward error %#v is not a *FlowError with CodeEOS", err)
	}
	if errors.Is(err, ErrBadQuery) {
		t.Errorf("errors.Is(%v, ErrBadQuery) = true", err)
	}

	// Tracing never enabled: Next fails with CodeNoEnable, Event with
	// CodeBadQuery (there is no event), Resync with CodeNosync.
	var in FlowInsn
	if _, err := d.Next(&in); !errors.As(err, &fe) || fe.Code != CodeNoEnable {
		t.Errorf("Next = %v, want a *FlowError with %v", err, CodeNoEnable)
	}
	var ev Event
	if _, err := d.Event(&ev); !errors.Is(err, ErrBadQuery) {
		t.Errorf("Event = %v, want %v", err, ErrBadQuery)
	}
	if _, err := d.Resync(); !errors.As(err, &fe) || fe.Code != CodeNosync {
		t.Errorf("Resync = %v, want a *FlowError with %v", err, CodeNosync)
	}
}
