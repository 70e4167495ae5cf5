package recording

import (
	"debug/elf"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ptjit/ptjit/internal/elfnote"
)

// ELF symbols and build-ids for naming addresses in decoded flow.

// ELFSymbols is the sorted table of an ELF file's function symbols
// (.symtab and .dynsym) with the file's PT_LOAD segments, so both link-time
// addresses and addresses in a mapping of the file resolve.
type ELFSymbols struct {
	Debug string // the separate debug file the symbols came from, if any
	Path  string
	syms  []elfSym  // sorted by addr; one entry per address
	loads []elfLoad // PT_LOAD segments in file order
}

type elfSym struct {
	addr, size uint64
	name       string
	bind       elf.SymBind
}

type elfLoad struct {
	vaddr, off, filesz, memsz uint64
}

// ReadELFSymbols reads path's function symbols. A file without any (fully
// stripped) gives an empty table, not an error; a file that is not ELF or
// is damaged gives an error naming it.
func ReadELFSymbols(path string) (*ELFSymbols, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	t := &ELFSymbols{Path: path}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			t.loads = append(t.loads, elfLoad{vaddr: p.Vaddr, off: p.Off, filesz: p.Filesz, memsz: p.Memsz})
		}
	}
	var all []elfSym
	for _, read := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
		syms, err := read()
		if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
			return nil, fmt.Errorf("%s: reading symbols: %w", path, err)
		}
		for _, s := range syms {
			typ := elf.ST_TYPE(s.Info)
			if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC {
				continue
			}
			if s.Section == elf.SHN_UNDEF || s.Value == 0 || s.Name == "" {
				continue
			}
			// .dynsym names carry "@VERSION" in debug/elf; keep the bare name.
			name := s.Name
			if i := strings.IndexByte(name, '@'); i > 0 {
				name = name[:i]
			}
			all = append(all, elfSym{addr: s.Value, size: s.Size, name: name, bind: elf.ST_BIND(s.Info)})
		}
	}
	// One symbol per address: prefer global over weak over local, a
	// sized symbol, fewer leading underscores, then the name.
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.addr != b.addr {
			return a.addr < b.addr
		}
		if ra, rb := bindRank(a.bind), bindRank(b.bind); ra != rb {
			return ra < rb
		}
		if (a.size == 0) != (b.size == 0) {
			return a.size != 0
		}
		if ua, ub := underscores(a.name), underscores(b.name); ua != ub {
			return ua < ub
		}
		return a.name < b.name
	})
	for i, s := range all {
		if i > 0 && all[i-1].addr == s.addr {
			continue
		}
		t.syms = append(t.syms, s)
	}
	return t, nil
}

func bindRank(b elf.SymBind) int {
	switch b {
	case elf.STB_GLOBAL:
		return 0
	case elf.STB_WEAK:
		return 1
	}
	return 2
}

func underscores(s string) int {
	n := 0
	for n < len(s) && s[n] == '_' {
		n++
	}
	return n
}

// Len returns the number of distinct function addresses in the table.
func (t *ELFSymbols) Len() int { return len(t.syms) }

// Lookup names the function containing the link-time address addr: the
// symbol at or below addr, if addr is inside its size (a symbol of size 0,
// as from hand-written assembly, extends to the next symbol). off is addr's
// offset into the function.
func (t *ELFSymbols) Lookup(addr uint64) (name string, off uint64, ok bool) {
	i := sort.Search(len(t.syms), func(i int) bool { return t.syms[i].addr > addr }) - 1
	if i < 0 {
		return "", 0, false
	}
	s := &t.syms[i]
	off = addr - s.addr
	if s.size != 0 && off >= s.size {
		return "", 0, false
	}
	return s.name, off, true
}

// FileOffsetToVaddr converts a file offset inside a PT_LOAD segment to the
// link-time virtual address it is loaded at.
func (t *ELFSymbols) FileOffsetToVaddr(off uint64) (uint64, bool) {
	for _, l := range t.loads {
		if off >= l.off && off-l.off < l.filesz {
			return off - l.off + l.vaddr, true
		}
	}
	return 0, false
}

// MappedToVaddr converts addr, inside a mapping of this file that starts at
// start with file offset pgoff (as in /proc/PID/maps or a perf MMAP2
// record), to the link-time address symbols use.
func (t *ELFSymbols) MappedToVaddr(addr, start, pgoff uint64) (uint64, bool) {
	if addr < start {
		return 0, false
	}
	return t.FileOffsetToVaddr(addr - start + pgoff)
}

// LookupMapped is Lookup for an address in a mapping (start, pgoff) of the
// file.
func (t *ELFSymbols) LookupMapped(addr, start, pgoff uint64) (name string, off uint64, ok bool) {
	v, ok := t.MappedToVaddr(addr, start, pgoff)
	if !ok {
		return "", 0, false
	}
	return t.Lookup(v)
}

// DebugRoot is where separate debug files are looked up by build-id
// (ROOT/.build-id/xx/yyyy.debug, as gdb and perf do): Debian's -dbgsym
// packages install them there.
var DebugRoot = "/usr/lib/debug"

// ReadELFSymbolsDebug is ReadELFSymbols, and for a file without function
// symbols (stripped) the symbols of its separate debug file under root
// (DebugRoot) found by its GNU build-id, when there is one; addresses are
// still mapped through the file's own program headers.
func ReadELFSymbolsDebug(path, root string) (*ELFSymbols, error) {
	t, err := ReadELFSymbols(path)
	if err != nil || t.Len() > 0 {
		return t, err
	}
	id, err := elfnote.BuildID(path)
	if err != nil || len(id) < 2 {
		return t, nil
	}
	h := hex.EncodeToString(id)
	dbg, err := ReadELFSymbols(filepath.Join(root, ".build-id", h[:2], h[2:]+".debug"))
	if err != nil {
		return t, nil // no debug file: the stripped table
	}
	t.syms, t.Debug = dbg.syms, dbg.Path
	return t, nil
}
