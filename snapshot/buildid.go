package snapshot

import (
	"sync"

	"github.com/ptjit/ptjit/internal/elfnote"
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
	id, _ := elfnote.BuildID(path)
	return id
}
