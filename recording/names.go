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
// JIT that publishes the name before it makes the code executable; when
// none was made after T either, the last version there before T: a line
// that reached the file only after its code's last version ended, as
// mono --jitmap's lines do, held in a stdio buffer that exit flushes after
// the code was freed, so read at the process's end; and
// when the next version there has cause wx-batch, wx-fresh or wx-tcb, that one:
// --wx=batch, and fresh RWX memory under --wx=auto, let a page be written
// without a stop, so the bytes stored before T first show in it, and the
// name goes to the first version that holds them — exact under
// --wx=precise, where every store is a stop). The
// name then holds for every earlier and later version of that region, in
// time order, whose bytes in [addr, addr+size) are the same: a JIT that
// changes other code of a large buffer (a HotSpot code heap: every
// compiled method makes a version of the whole heap) keeps the names of
// the methods it left alone, and a method replaced at the same address
// gives its name up at the version that replaced it. A JIT that dumps its
// map at exit (java -XX:+DumpPerfMapAtExit) names the code live at exit,
// back to the version that put it there; code freed earlier has no name.
//
// A jitdump code load (node --perf-prof) carries the bytes of the code it
// names: its name goes to the versions whose bytes in [addr, addr+size)
// are exactly those (exact by content, whatever the timing): of those,
// the one valid before the load was read and the versions next to it in
// time that still hold the same bytes. A load whose bytes no version holds
// is not placed (V8 reports its builtins, which live in the node binary,
// not in JIT code; code patched before ptjit saw it).
type Names struct {
	byVersion map[versionKey][]NameSpan
	rows      []PlacedName
	count     int // names given to at least one version
	unplaced  int // names no version held
}

type versionKey struct {
	region int64
	vno    int
}

// PlacedName is a published name and the code versions it was given to
// ("R.V", in time order; none when no version held it).
type PlacedName struct {
	db.NameInfo
	Versions []string
	keys     []versionKey
}

// Rows returns every published name in the order they were read, with
// the versions each was given to.
func (n *Names) Rows() []PlacedName {
	if n == nil {
		return nil
	}
	for i := range n.rows {
		r := &n.rows[i]
		if r.Versions != nil || len(r.keys) == 0 {
			continue
		}
		sort.Slice(r.keys, func(a, b int) bool {
			if r.keys[a].region != r.keys[b].region {
				return r.keys[a].region < r.keys[b].region
			}
			return r.keys[a].vno < r.keys[b].vno
		})
		for _, k := range r.keys {
			r.Versions = append(r.Versions, fmt.Sprintf("%d.%d", k.region, k.vno))
		}
	}
	return n.rows
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
		n.rows = append(n.rows, PlacedName{NameInfo: r})
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

// place gives name r to the versions it was written for, page by page:
// a region whose pages changed at different times is recorded as
// versions of single pages (split), and a name may span several.
func (n *Names) place(r db.NameInfo, vs []db.VersionInfo, bytesOf func(*db.VersionInfo) ([]byte, error)) (bool, error) {
	if uint64(len(r.Code)) != r.Size {
		r.Code = nil // not a load's code: placed by time alone
	}
	placed := false
	end := r.Addr + r.Size
	for lo := r.Addr; lo < end; {
		hi := min(end, (lo|(db.PageSize-1))+1)
		ok, err := n.placePiece(r, lo, hi, vs, bytesOf)
		if err != nil {
			return false, err
		}
		placed = placed || ok
		lo = hi
	}
	return placed, nil
}

// placePiece gives [lo, hi) of name r (within one page) to the versions
// it was written for.
func (n *Names) placePiece(r db.NameInfo, lo, hi uint64, vs []db.VersionInfo, bytesOf func(*db.VersionInfo) ([]byte, error)) (bool, error) {
	// the versions holding the piece, in time order
	var holding []*db.VersionInfo
	seed := -1
	for i := range vs {
		v := &vs[i]
		if lo < v.Addr || hi > v.Addr+v.Size {
			continue
		}
		holding = append(holding, v)
		if r.At.TSC > 0 && v.ValidAt(r.At.TSC-1) {
			seed = len(holding) - 1
		}
	}
	if r.Code != nil {
		var err error
		if seed, err = seedByCode(r, lo, hi, holding, bytesOf); err != nil {
			return false, err
		}
	} else if seed >= 0 && seed+1 < len(holding) && unwatchedCause(holding[seed+1].Cause) && holding[seed+1].Region == holding[seed].Region {
		// --wx=batch lets a page be written without a stop until code
		// runs there, and so does fresh RWX memory under auto: the
		// bytes stored before the read first show in the next wx-batch,
		// wx-fresh or wx-tcb version, not in the one valid before it
		seed++
	}
	if seed < 0 && r.Code == nil {
		// nothing was executable there when it was read: the code
		// made there next
		for i, v := range holding {
			if v.Valid.TSC >= r.At.TSC {
				seed = i
				break
			}
		}
		if seed < 0 && len(holding) > 0 {
			// and none was made there after: the line reached the
			// file after the code's last version ended (a line held
			// in a stdio buffer that exit flushed, after the JIT freed
			// its code: mono --jitmap), so it names the last version
			// there before the read
			seed = len(holding) - 1
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
	want := sb[lo-s.Addr : hi-s.Addr]
	same := func(v *db.VersionInfo) (bool, error) {
		if v.Region != s.Region {
			return false, nil
		}
		b, err := bytesOf(v)
		if err != nil {
			return false, err
		}
		return bytes.Equal(b[lo-v.Addr:hi-v.Addr], want), nil
	}
	span := NameSpan{Addr: r.Addr, Size: r.Size, Name: r.Name, id: r.ID}
	row := &n.rows[len(n.rows)-1]
	add := func(v *db.VersionInfo) {
		k := versionKey{v.Region, v.Vno}
		if l := n.byVersion[k]; len(l) > 0 && l[len(l)-1].id == span.id {
			return // another page of the same name
		}
		n.byVersion[k] = append(n.byVersion[k], span)
		row.keys = append(row.keys, k)
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

// seedByCode returns the index in holding (the versions holding [lo, hi),
// in time order) of the version a jitdump load r names, by content: of
// the versions whose bytes in [lo, hi) are the bytes the load reported,
// the last one valid before r was read, else the first one after; -1 when
// no version holds those bytes (the JIT changed the code before ptjit saw
// it, or the address is not JIT code ptjit recorded, such as V8's
// builtins embedded in the node binary).
func seedByCode(r db.NameInfo, lo, hi uint64, holding []*db.VersionInfo, bytesOf func(*db.VersionInfo) ([]byte, error)) (int, error) {
	want := r.Code[lo-r.Addr : hi-r.Addr]
	seed := -1
	for i, v := range holding {
		b, err := bytesOf(v)
		if err != nil {
			return -1, err
		}
		if !bytes.Equal(b[lo-v.Addr:hi-v.Addr], want) {
			continue
		}
		if seed < 0 || v.Valid.TSC < r.At.TSC {
			seed = i
		}
		if v.Valid.TSC >= r.At.TSC {
			break
		}
	}
	return seed, nil
}

// String gives "NAME+0xOFF" (or NAME at offset 0).
func nameOff(name string, off uint64) string {
	if off == 0 {
		return name
	}
	return fmt.Sprintf("%s+%#x", name, off)
}

// NamesOf loads the names of v's process and returns the lookup for
// version v (Names.Lookup): the name over an address and its offset.
func NamesOf(cdb *db.DB, v *db.VersionInfo) (func(addr uint64) (string, uint64, bool), error) {
	n, err := LoadNames(cdb, v.PID, nil)
	if err != nil {
		return nil, err
	}
	return func(addr uint64) (string, uint64, bool) { return n.Lookup(v.Region, v.Vno, addr) }, nil
}

// At describes addr in version v by its name: "NAME+0xOFF", or "" when
// no published name covers it.
func (n *Names) At(v *db.VersionInfo, addr uint64) string {
	if name, off, ok := n.Lookup(v.Region, v.Vno, addr); ok {
		return nameOff(name, off)
	}
	return ""
}

// unwatchedCause: a version whose page was written without a stop until
// it was recorded (tracker: W^X batch pages and fresh memory).
func unwatchedCause(cause string) bool {
	return cause == "wx-batch" || cause == "wx-fresh" || cause == "wx-tcb"
}
