package recording

import (
	"fmt"
	"path/filepath"
	"sort"
	"sync"

	"github.com/ptjit/ptjit/decode"
)

// Symbolizer names addresses in file-backed sections from the ELF symbol
// tables, reading one table per file on first use. It is safe for
// concurrent use (chunks of a trace are rendered on several goroutines).
type Symbolizer struct {
	mu    sync.Mutex
	tabs  map[string]*ELFSymbols // nil: the file has no readable table
	names map[string]*spanTable  // by code version tag (versionTag)
}

// spanTable is a version's names sorted by address.
type spanTable struct {
	spans   []NameSpan
	maxSize uint64
}

// lookup returns the name over ip (the latest read of overlapping ones).
func (t *spanTable) lookup(ip uint64) *NameSpan {
	var best *NameSpan
	i := sort.Search(len(t.spans), func(i int) bool { return t.spans[i].Addr > ip })
	for j := i - 1; j >= 0 && ip-t.spans[j].Addr < t.maxSize; j-- {
		if sp := &t.spans[j]; ip-sp.Addr < sp.Size && (best == nil || sp.id > best.id) {
			best = sp
		}
	}
	return best
}

// NewSymbolizer returns an empty Symbolizer.
func NewSymbolizer() *Symbolizer { return &Symbolizer{tabs: map[string]*ELFSymbols{}} }

// versionTag is the decode.Section tag of a code version.
func versionTag(region int64, vno int) string { return fmt.Sprintf("region %d v%d", region, vno) }

// AddNames adds the JIT-published names of n (LoadNames) to the
// versions they belong to.
func (s *Symbolizer) AddNames(n *Names) {
	if n == nil || len(n.byVersion) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = map[string]*spanTable{}
	}
	for k, spans := range n.byVersion {
		tag := versionTag(k.region, k.vno)
		t := s.names[tag]
		if t == nil {
			t = &spanTable{}
			s.names[tag] = t
		}
		t.spans = append(t.spans, spans...)
		sort.SliceStable(t.spans, func(i, j int) bool { return t.spans[i].Addr < t.spans[j].Addr })
		for _, sp := range spans {
			t.maxSize = max(t.maxSize, sp.Size)
		}
	}
}

// Where describes the instruction's address: "symbol+0xoff" in a file with
// a symbol over it, else "file+0xoff" (the offset in the file), or in a
// code version "NAME+0xoff [region R vN]" under a name the JIT published
// for it (Names), else "[region R vN +0xoff]"; "?" outside the image.
func (s *Symbolizer) Where(in *decode.FlowInsn) string {
	sec := in.Section
	if sec == nil {
		return "?"
	}
	name, tab := s.lookup(sec, in.IP)
	if !sec.IsFile() {
		if name != nil {
			return nameOff(name.Name, in.IP-name.Addr) + " [" + sec.Tag + "]"
		}
		return fmt.Sprintf("[%s +%#x]", sec.Tag, in.IP-sec.Vaddr)
	}
	if tab != nil {
		if name, off, ok := tab.LookupMapped(in.IP, sec.Vaddr, sec.FileOff); ok {
			return fmt.Sprintf("%s+%#x", name, off)
		}
	}
	return fmt.Sprintf("%s+%#x", filepath.Base(sec.Tag), in.IP-sec.Vaddr+sec.FileOff)
}

// Func names the function an instruction belongs to, without offset, for
// stacks and per-function counts (ptfmt.Profile): the symbol over it in a
// file, else the file's base name with the offset in the file when entry
// says the address is where a function starts (a call's target), or the
// file's base name alone; in a code version the name the JIT published
// for it (Names), else "[region R vN]"; "?" outside the image.
func (s *Symbolizer) Func(in *decode.FlowInsn, entry bool) string {
	sec := in.Section
	if sec == nil {
		return "?"
	}
	name, tab := s.lookup(sec, in.IP)
	if !sec.IsFile() {
		if name != nil {
			return name.Name
		}
		return "[" + sec.Tag + "]"
	}
	if tab != nil {
		if name, _, ok := tab.LookupMapped(in.IP, sec.Vaddr, sec.FileOff); ok {
			return name
		}
	}
	if entry {
		return fmt.Sprintf("%s+%#x", filepath.Base(sec.Tag), in.IP-sec.Vaddr+sec.FileOff)
	}
	return filepath.Base(sec.Tag)
}

// lookup returns, for a code version, the name the JIT published over ip
// (nil: none); for a file, its symbol table (read on first use; nil when
// it has none).
func (s *Symbolizer) lookup(sec *decode.Section, ip uint64) (*NameSpan, *ELFSymbols) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sec.IsFile() {
		if t := s.names[sec.Tag]; t != nil {
			return t.lookup(ip), nil
		}
		return nil, nil
	}
	tab, ok := s.tabs[sec.Tag]
	if !ok {
		tab, _ = ReadELFSymbolsDebug(sec.Tag, DebugRoot)
		s.tabs[sec.Tag] = tab
	}
	return nil, tab
}
