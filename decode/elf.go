package decode

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
)

// ELF symbols and build-ids for naming addresses in decoded flow.

// ELFSymbols is the sorted table of an ELF file's function symbols
// (.symtab and .dynsym) with the file's PT_LOAD segments, so both link-time
// addresses and addresses in a mapping of the file resolve.
type ELFSymbols struct {
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

// ErrNoBuildID is matched by ReadBuildID's error when the file has no GNU
// build-id note.
var ErrNoBuildID = errors.New("no GNU build-id note")

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

// ReadBuildID returns the GNU build-id (NT_GNU_BUILD_ID note) of the ELF
// file path. It looks in SHT_NOTE sections, then in PT_NOTE segments (for
// files without section headers).
func ReadBuildID(path string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	var readers []io.ReaderAt
	var sizes []uint64
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOTE {
			readers = append(readers, s)
			sizes = append(sizes, s.Size)
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			readers = append(readers, p)
			sizes = append(sizes, p.Filesz)
		}
	}
	for i, r := range readers {
		const maxNotes = 1 << 20
		if sizes[i] > maxNotes {
			return nil, fmt.Errorf("%s: note area of %d bytes is implausibly large", path, sizes[i])
		}
		buf := make([]byte, sizes[i])
		if _, err := r.ReadAt(buf, 0); err != nil {
			return nil, fmt.Errorf("%s: reading notes: %w", path, err)
		}
		id, err := findBuildID(buf, f.ByteOrder)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if id != nil {
			return id, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", path, ErrNoBuildID)
}

// findBuildID scans an ELF note area (Elf_Nhdr entries, 4-byte aligned) for
// a "GNU" note of type NT_GNU_BUILD_ID. It returns nil, nil if there is
// none.
func findBuildID(b []byte, bo binary.ByteOrder) ([]byte, error) {
	const ntGNUBuildID = 3
	for off := 0; off+12 <= len(b); {
		namesz := uint64(bo.Uint32(b[off:]))
		descsz := uint64(bo.Uint32(b[off+4:]))
		typ := bo.Uint32(b[off+8:])
		p := uint64(off) + 12
		nameEnd := p + namesz
		descOff := (nameEnd + 3) &^ 3
		descEnd := descOff + descsz
		if descEnd > uint64(len(b)) {
			return nil, fmt.Errorf("note at offset %#x: name %d + desc %d bytes exceed the note area (%d bytes)", off, namesz, descsz, len(b))
		}
		if typ == ntGNUBuildID && bytes.Equal(b[p:nameEnd], []byte("GNU\x00")) {
			return append([]byte(nil), b[descOff:descEnd]...), nil
		}
		off = int((descEnd + 3) &^ 3)
	}
	return nil, nil
}
