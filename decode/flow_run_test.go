package decode

import (
	"encoding/json"
	"testing"
)

// TestErrorKind checks the texts ptxed output and ptjit's JSON depend on.
func TestErrorKind(t *testing.T) {
	for _, tt := range []struct {
		k    ErrorKind
		want string
	}{
		{KindError, "error"},
		{KindResyncError, "resync error"},
		{7, "error kind 7"},
	} {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("ErrorKind(%d).String() = %q, want %q", uint8(tt.k), got, tt.want)
		}
	}
	b, err := json.Marshal(map[string]any{"kind": KindResyncError})
	if err != nil || string(b) != `{"kind":"resync error"}` {
		t.Errorf("json = %s, %v", b, err)
	}
}
