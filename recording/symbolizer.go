package recording

import (
	"fmt"
	"path/filepath"
	"sync"

	"github.com/ptjit/ptjit/decode"
)

// Symbolizer names addresses in file-backed sections from the ELF symbol
// tables, reading one table per file on first use. It is safe for
// concurrent use (chunks of a trace are rendered on several goroutines).
type Symbolizer struct {
	mu   sync.Mutex
	tabs map[string]*ELFSymbols // nil: the file has no readable table
}

// NewSymbolizer returns an empty Symbolizer.
func NewSymbolizer() *Symbolizer { return &Symbolizer{tabs: map[string]*ELFSymbols{}} }

// Where describes the instruction's address: "symbol+0xoff" in a file with
// a symbol over it, else "file+0xoff" (the offset in the file), or
// "[region R vN +0xoff]" in a code version, "?" outside the image.
func (s *Symbolizer) Where(in *decode.FlowInsn) string {
	sec := in.Section
	if sec == nil {
		return "?"
	}
	if !sec.IsFile() {
		return fmt.Sprintf("[%s +%#x]", sec.Tag, in.IP-sec.Vaddr)
	}
	s.mu.Lock()
	tab, ok := s.tabs[sec.Tag]
	if !ok {
		tab, _ = ReadELFSymbols(sec.Tag)
		s.tabs[sec.Tag] = tab
	}
	s.mu.Unlock()
	if tab != nil {
		if name, off, ok := tab.LookupMapped(in.IP, sec.Vaddr, sec.FileOff); ok {
			return fmt.Sprintf("%s+%#x", name, off)
		}
	}
	return fmt.Sprintf("%s+%#x", filepath.Base(sec.Tag), in.IP-sec.Vaddr+sec.FileOff)
}
