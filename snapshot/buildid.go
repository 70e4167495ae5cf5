package snapshot

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"sync"
)

type fileKey struct{ dev, inode uint64 }

var buildIDs sync.Map // fileKey -> []byte (nil: none)

// BuildID returns the GNU build ID of the ELF file at path (identified by
// dev and inode for caching), or nil when the file is not ELF or has none.
func BuildID(path string, dev, inode uint64) []byte {
	k := fileKey{dev, inode}
	if v, ok := buildIDs.Load(k); ok {
		return v.([]byte)
	}
	id := readBuildID(path)
	buildIDs.Store(k, id)
	return id
}

func readBuildID(path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<20 {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			continue
		}
		if id := findGNUBuildID(b, f.ByteOrder, p.Align); id != nil {
			return id
		}
	}
	return nil
}

// findGNUBuildID walks ELF notes (namesz, descsz, type, name, desc; each
// padded to align) looking for NT_GNU_BUILD_ID with name "GNU".
func findGNUBuildID(b []byte, bo binary.ByteOrder, align uint64) []byte {
	pad := func(n uint64) uint64 {
		if align < 4 {
			align = 4
		}
		return (n + align - 1) &^ (align - 1)
	}
	for len(b) >= 12 {
		namesz := uint64(bo.Uint32(b[0:]))
		descsz := uint64(bo.Uint32(b[4:]))
		typ := bo.Uint32(b[8:])
		b = b[12:]
		if pad(namesz) > uint64(len(b)) {
			return nil
		}
		name := b[:namesz]
		b = b[pad(namesz):]
		if descsz > uint64(len(b)) {
			return nil
		}
		desc := b[:descsz]
		if typ == 3 && bytes.Equal(bytes.TrimRight(name, "\x00"), []byte("GNU")) {
			return append([]byte(nil), desc...)
		}
		if pad(descsz) > uint64(len(b)) {
			return nil
		}
		b = b[pad(descsz):]
	}
	return nil
}
