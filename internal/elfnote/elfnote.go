package elfnote

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ErrNoBuildID is matched by BuildID's error when the file has no GNU
// build-id note.
var ErrNoBuildID = errors.New("no GNU build-id note")

// BuildID returns the GNU build-id (NT_GNU_BUILD_ID note) of the ELF
// file path. It looks in SHT_NOTE sections, then in PT_NOTE segments (for
// files without section headers).
func BuildID(path string) ([]byte, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	var readers []io.ReaderAt
	var sizes, aligns []uint64
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOTE {
			readers = append(readers, s)
			sizes = append(sizes, s.Size)
			aligns = append(aligns, s.Addralign)
		}
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			readers = append(readers, p)
			sizes = append(sizes, p.Filesz)
			aligns = append(aligns, p.Align)
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
		id, err := findBuildID(buf, f.ByteOrder, aligns[i])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if id != nil {
			return id, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", path, ErrNoBuildID)
}

// findBuildID scans an ELF note area (Elf_Nhdr entries: namesz, descsz,
// type, then name and desc, each starting at an offset aligned to align,
// the section's or segment's alignment: 4, or 8 for notes such as
// .note.gnu.property in an 8-aligned PT_NOTE) for a "GNU" note of type NT_GNU_BUILD_ID. It
// returns nil, nil if there is none.
func findBuildID(b []byte, bo binary.ByteOrder, align uint64) ([]byte, error) {
	const ntGNUBuildID = 3
	if align != 8 {
		align = 4
	}
	pad := func(n uint64) uint64 { return (n + align - 1) &^ (align - 1) }
	for off := uint64(0); off+12 <= uint64(len(b)); {
		namesz := uint64(bo.Uint32(b[off:]))
		descsz := uint64(bo.Uint32(b[off+4:]))
		typ := bo.Uint32(b[off+8:])
		p := off + 12
		nameEnd := p + namesz
		descOff := pad(nameEnd)
		descEnd := descOff + descsz
		if namesz > uint64(len(b)) || descsz > uint64(len(b)) || descEnd > uint64(len(b)) {
			return nil, fmt.Errorf("note at offset %#x: name %d + desc %d bytes exceed the note area (%d bytes)", off, namesz, descsz, len(b))
		}
		if typ == ntGNUBuildID && bytes.Equal(b[p:nameEnd], []byte("GNU\x00")) {
			return append([]byte(nil), b[descOff:descEnd]...), nil
		}
		off = pad(descEnd)
	}
	return nil, nil
}
