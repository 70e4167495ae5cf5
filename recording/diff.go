package recording

import (
	"cmp"
	"fmt"
	"io"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/ptfmt"
)

// DiffPairs returns the pairs of versions of r that ptjit diff compares:
// versions v1 and v2 when both are given (not 0), otherwise every
// consecutive pair of r's versions containing addr.
func DiffPairs(r *db.Region, addr uint64, v1, v2 int) ([][2]*db.VersionInfo, error) {
	if v1 != 0 || v2 != 0 {
		a, err := r.Version(v1)
		if err != nil {
			return nil, err
		}
		b, err := r.Version(v2)
		if err != nil {
			return nil, err
		}
		return [][2]*db.VersionInfo{{a, b}}, nil
	}
	vs := r.Versions
	if len(vs) < 2 {
		return nil, fmt.Errorf("region %d has only one version containing %#x: nothing to compare", r.ID, addr)
	}
	var pairs [][2]*db.VersionInfo
	for i := 1; i < len(vs); i++ {
		pairs = append(pairs, [2]*db.VersionInfo{&vs[i-1], &vs[i]})
	}
	return pairs, nil
}

// WriteDiff prints the instruction-level changes between each pair's
// versions from addr to the end of their common range, with the names
// their JIT gave addr in each.
func WriteDiff(out io.Writer, d *db.DB, tb TimeBase, addr uint64, pairs [][2]*db.VersionInfo) error {
	names, err := LoadNames(d, pairs[0][0].PID, nil)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		a, b := p[0], p[1]
		da, err := d.VersionData(a)
		if err != nil {
			return err
		}
		db2, err := d.VersionData(b)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "region %d: version %d → %d (%s by tid %d at ip %#x, %s)\n", a.Region, a.Vno, b.Vno, b.Cause, b.TID, b.IP, tb.At(b.Valid.TSC))
		if sa, sb := names.At(a, addr), names.At(b, addr); sa != "" || sb != "" {
			fmt.Fprintf(out, "  %#x: %s → %s\n", addr, cmp.Or(sa, "(no name)"), cmp.Or(sb, "(no name)"))
		}
		ptfmt.DiffCode(out, addr, a.Addr, da, b.Addr, db2)
	}
	return nil
}
