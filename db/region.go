package db

import "fmt"

// Region is the code history at one address: the versions of one region in
// time order, as show and diff select them.
type Region struct {
	ID       int64
	Versions []VersionInfo // time order; never empty
}

// RegionAt returns the region of process pid (0: any process) that contains
// addr: region id when it is not 0, else the most recent region over addr.
// Several regions can cover one address over time when an address is reused
// after munmap. Only the versions that contain addr are returned.
func (d *DB) RegionAt(pid int, addr uint64, region int64) (*Region, error) {
	return d.regionAt(pid, addr, region, nil)
}

// RegionLiveAt is RegionAt for the region whose version over addr was
// valid at TSC t (when region is 0): the one live then, not the latest.
func (d *DB) RegionLiveAt(pid int, addr uint64, region int64, t uint64) (*Region, error) {
	return d.regionAt(pid, addr, region, &t)
}

func (d *DB) regionAt(pid int, addr uint64, region int64, at *uint64) (*Region, error) {
	vs, err := d.Versions(VersionFilter{PID: pid, Addr: addr, HasAddr: true})
	if err != nil {
		return nil, err
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%s: no recorded code version contains %#x", d.Path(), addr)
	}
	if region == 0 && at != nil {
		for i := len(vs) - 1; i >= 0 && region == 0; i-- {
			if vs[i].ValidAt(*at) {
				region = vs[i].Region
			}
		}
		if region == 0 {
			return nil, fmt.Errorf("%s: no recorded code version contains %#x at TSC %d", d.Path(), addr, *at)
		}
	}
	if region == 0 {
		region = vs[len(vs)-1].Region
	}
	r := &Region{ID: region}
	for _, v := range vs {
		if v.Region == region {
			r.Versions = append(r.Versions, v)
		}
	}
	if len(r.Versions) == 0 {
		return nil, fmt.Errorf("%s: region %d does not contain %#x", d.Path(), region, addr)
	}
	return r, nil
}

// Latest returns the region's most recent version.
func (r *Region) Latest() *VersionInfo { return &r.Versions[len(r.Versions)-1] }

// At returns the version that was valid at TSC t (the latest one, should
// versions overlap).
func (r *Region) At(t uint64) (*VersionInfo, error) {
	for i := len(r.Versions) - 1; i >= 0; i-- {
		if r.Versions[i].ValidAt(t) {
			return &r.Versions[i], nil
		}
	}
	return nil, fmt.Errorf("no version of region %d was valid at TSC %d", r.ID, t)
}

// Version returns version number vno of the region.
func (r *Region) Version(vno int) (*VersionInfo, error) {
	for i := range r.Versions {
		if r.Versions[i].Vno == vno {
			return &r.Versions[i], nil
		}
	}
	return nil, fmt.Errorf("region %d has no version %d (it has 1..%d)", r.ID, vno, r.Latest().Vno)
}
