package db

import (
	"testing"

	"github.com/ptjit/ptjit/clock"
)

func TestVersionInfoString(t *testing.T) {
	v := VersionInfo{Region: 3, Vno: 2, Addr: 0x7f0000001000, Size: 0x1000, PID: 10, TID: 11, Cause: "write", IP: 0x401234,
		Valid: clock.Stamp{TSC: 500}}
	want := "region 3 version 2 [0x7f0000001000-0x7f0000002000] pid 10 tid 11, write at ip 0x401234, valid from tsc 500"
	if got := v.String(); got != want {
		t.Errorf("open-ended version:\n got %q\nwant %q", got, want)
	}
	v.End, v.HasEnd = clock.Stamp{TSC: 900}, true
	if got := v.String(); got != want+" to 900" {
		t.Errorf("ended version:\n got %q\nwant %q", got, want+" to 900")
	}
}
