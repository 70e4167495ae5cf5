package recording

import (
	"fmt"
	"runtime/debug"

	"github.com/ptjit/ptjit/db"
)

// VersionString describes this build of ptjit in one line: the module
// version, the commit and its time from the Go build information (and
// "modified" when the tree had changes), the Go version and the code.db
// schema it writes and the oldest it reads.
func VersionString() string {
	s := "ptjit"
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return s + fmt.Sprintf(" (no build information), code.db schema %d (reads %d..%d)", db.SchemaVersion, db.MinSchemaVersion, db.SchemaVersion)
	}
	s += " " + bi.Main.Version
	var rev, at, dirty string
	for _, kv := range bi.Settings {
		switch kv.Key {
		case "vcs.revision":
			rev = kv.Value
		case "vcs.time":
			at = kv.Value
		case "vcs.modified":
			if kv.Value == "true" {
				dirty = ", modified"
			}
		}
	}
	if rev != "" {
		s += fmt.Sprintf(" (commit %.12s %s%s)", rev, at, dirty)
	}
	return s + fmt.Sprintf(", %s, code.db schema %d (reads %d..%d)", bi.GoVersion, db.SchemaVersion, db.MinSchemaVersion, db.SchemaVersion)
}
