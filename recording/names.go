package recording

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/ptjit/ptjit/db"
)

// Names are the names a JIT published for its code (perf maps: db.Names),
// each given to the code versions it was written for.
//
// A name line was read at a stop T and written after the previous read
// (tracker/names.go); no code version changed in between, so the code it
// names is the version of its address valid just before T (or, when no
// code was executable there yet, the first version made there after T: a
// JIT that publishes the name before it makes the code executable). The
// name then holds for every earlier and later version of that region, in
// time order, whose bytes in [addr, addr+size) are the same: a JIT that
// changes other code of a large buffer (a HotSpot code heap: every
// compiled method makes a version of the whole heap) keeps the names of
// the methods it left alone, and a method replaced at the same address
// gives its name up at the version that replaced it. A JIT that dumps its
// map at exit (java -XX:+DumpPerfMapAtExit) names the code live at exit,
// back to the version that put it there; code freed earlier has no name.
type Names struct {
	byVersion map[versionKey][]NameSpan
	count     int // names given to at least one version
	unplaced  int // names no version held
}

type versionKey struct {
	region int64
	vno    int
}

// NameSpan is one name over [Addr, Addr+Size) of a code version.
type NameSpan struct {
	Addr, Size uint64
	Name       string
	id         int64 // the names row: a later one wins an overlap
}

// Placed returns how many names were given to a code version, and how
// many were not (no version of their address around the time they were
// read).
func (n *Names) Placed() (placed, unplaced int) {
	if n == nil {
		return 0, 0
	}
	return n.count, n.unplaced
}

// Lookup returns the name over addr in version vno of region, and addr's
// offset in it.
func (n *Names) Lookup(region int64, vno int, addr uint64) (name string, off uint64, ok bool) {
	if n == nil {
		return "", 0, false
	}
	var best *NameSpan
	for i, s := range n.byVersion[versionKey{region, vno}] {
		if addr >= s.Addr && addr-s.Addr < s.Size && (best == nil || s.id > best.id) {
			best = &n.byVersion[versionKey{region, vno}][i]
		}
	}
	if best == nil {
		return "", 0, false
	}
	return best.Name, addr - best.Addr, true
}

// In returns the names of version vno of region in address order.
func (n *Names) In(region int64, vno int) []NameSpan {
	if n == nil {
		return nil
	}
	out := append([]NameSpan(nil), n.byVersion[versionKey{region, vno}]...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// LoadNames reads the names process pid (all when 0) published and places
// them (Names). data returns a version's bytes; nil reads them from cdb.
func LoadNames(cdb *db.DB, pid int, data func(*db.VersionInfo) ([]byte, error)) (*Names, error) {
	n := &Names{byVersion: map[versionKey][]NameSpan{}}
	rows, err := cdb.Names(pid)
	if err != nil || len(rows) == 0 {
		return n, err
	}
	if data == nil {
		data = cdb.VersionData
	}
	cache := map[int64][]byte{}
	bytesOf := func(v *db.VersionInfo) ([]byte, error) {
		if b, ok := cache[v.ID]; ok {
			return b, nil
		}
		b, err := data(v)
		if err == nil {
			cache[v.ID] = b
		}
		return b, err
	}
	byPID := map[int][]db.VersionInfo{}
	for _, r := range rows {
		vs, ok := byPID[r.PID]
		if !ok {
			if vs, err = cdb.Versions(db.VersionFilter{PID: r.PID}); err != nil {
				return nil, err
			}
			byPID[r.PID] = vs
		}
		placed, err := n.place(r, vs, bytesOf)
		if err != nil {
			return nil, err
		}
		if placed {
			n.count++
		} else {
			n.unplaced++
		}
	}
	return n, nil
}

// place gives name r to the versions it was written for.
func (n *Names) place(r db.NameInfo, vs []db.VersionInfo, bytesOf func(*db.VersionInfo) ([]byte, error)) (bool, error) {
	end := r.Addr + r.Size
	// the versions holding the whole named range, in time order
	var holding []*db.VersionInfo
	seed := -1
	for i := range vs {
		v := &vs[i]
		if r.Addr < v.Addr || end > v.Addr+v.Size {
			continue
		}
		holding = append(holding, v)
		if r.At.TSC > 0 && v.ValidAt(r.At.TSC-1) {
			seed = len(holding) - 1
		}
	}
	if seed < 0 {
		// nothing was executable there when it was written: the code
		// made there next
		for i, v := range holding {
			if v.Valid.TSC >= r.At.TSC {
				seed = i
				break
			}
		}
	}
	if seed < 0 {
		return false, nil
	}
	s := holding[seed]
	sb, err := bytesOf(s)
	if err != nil {
		return false, err
	}
	want := sb[r.Addr-s.Addr : end-s.Addr]
	same := func(v *db.VersionInfo) (bool, error) {
		if v.Region != s.Region {
			return false, nil
		}
		b, err := bytesOf(v)
		if err != nil {
			return false, err
		}
		return bytes.Equal(b[r.Addr-v.Addr:end-v.Addr], want), nil
	}
	span := NameSpan{Addr: r.Addr, Size: r.Size, Name: r.Name, id: r.ID}
	add := func(v *db.VersionInfo) {
		k := versionKey{v.Region, v.Vno}
		n.byVersion[k] = append(n.byVersion[k], span)
	}
	add(s)
	for i := seed - 1; i >= 0; i-- {
		ok, err := same(holding[i])
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		add(holding[i])
	}
	for i := seed + 1; i < len(holding); i++ {
		ok, err := same(holding[i])
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		add(holding[i])
	}
	return true, nil
}

// String gives "NAME+0xOFF" (or NAME at offset 0).
func nameOff(name string, off uint64) string {
	if off == 0 {
		return name
	}
	return fmt.Sprintf("%s+%#x", name, off)
}
