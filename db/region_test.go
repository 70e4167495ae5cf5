package db

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
)

// TestRegionAt: an address reused after munmap is covered by two regions;
// the latest is chosen unless one is named, and versions are picked by TSC
// or number.
func TestRegionAt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	r, err := Create(path, Meta{})
	if err != nil {
		t.Fatal(err)
	}
	at := func(tsc uint64) clock.Stamp { return clock.Stamp{TSC: tsc, MonoNS: int64(tsc)} }
	r.ProcessStart(10, 1, at(1))
	add := func(reg int64, addr uint64, b byte, from, to uint64) {
		id, _ := r.AddVersion(Version{Region: reg, PID: 10, TID: 10, Addr: addr, Size: PageSize, Data: page(b, 1), At: at(from), Cause: "mprotect"})
		if to != 0 {
			r.EndVersion(id, at(to))
		}
	}
	r1 := r.NewRegion(10, 0x7000, PageSize, at(10))
	add(r1, 0x7000, 1, 10, 20)
	add(r1, 0x7000, 2, 20, 30)
	r.EndRegion(r1, at(30))
	r2 := r.NewRegion(10, 0x7000, PageSize, at(40))
	add(r2, 0x7000, 3, 40, 0)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()

	tests := []struct {
		name        string
		pid         int
		addr        uint64
		region      int64
		wantRegion  int64
		wantVersion int // of the region
		err         string
	}{
		{name: "latest region", addr: 0x7010, wantRegion: r2, wantVersion: 1},
		{name: "named region", pid: 10, addr: 0x7010, region: r1, wantRegion: r1, wantVersion: 2},
		{name: "no version", addr: 0x9000, err: "no recorded code version contains 0x9000"},
		{name: "other pid", pid: 11, addr: 0x7010, err: "no recorded code version contains"},
		{name: "region elsewhere", addr: 0x7010, region: 99, err: "region 99 does not contain 0x7010"},
	}
	for _, tt := range tests {
		reg, err := d.RegionAt(tt.pid, tt.addr, tt.region)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if reg.ID != tt.wantRegion || reg.Latest().Vno != tt.wantVersion {
			t.Errorf("%s: region %d latest v%d, want %d v%d", tt.name, reg.ID, reg.Latest().Vno, tt.wantRegion, tt.wantVersion)
		}
	}

	reg, err := d.RegionAt(10, 0x7000, r1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tsc  uint64
		vno  int
		errs string
	}{
		{tsc: 10, vno: 1}, {tsc: 19, vno: 1}, {tsc: 20, vno: 2}, {tsc: 29, vno: 2},
		{tsc: 9, errs: "no version of region"}, {tsc: 30, errs: "was valid at TSC 30"},
	} {
		v, err := reg.At(tt.tsc)
		if tt.errs != "" {
			if err == nil || !strings.Contains(err.Error(), tt.errs) {
				t.Errorf("At(%d): %v, want error %q", tt.tsc, err, tt.errs)
			}
			continue
		}
		if err != nil || v.Vno != tt.vno {
			t.Errorf("At(%d) = %v, %v; want v%d", tt.tsc, v, err, tt.vno)
		}
	}
	if v, err := reg.Version(2); err != nil || v.Valid.TSC != 20 {
		t.Errorf("Version(2) = %+v, %v", v, err)
	}
	if _, err := reg.Version(3); err == nil || !strings.Contains(err.Error(), "has no version 3 (it has 1..2)") {
		t.Errorf("Version(3): %v", err)
	}
}
