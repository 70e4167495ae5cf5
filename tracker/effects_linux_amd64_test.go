package tracker

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestEffectOrder pins the order of the features' parts of a syscall
// (syscalls_linux_amd64.go) by name: an entry moved, added or removed
// there fails here until its place is declared here too. Each entry's name
// must be its function's, and each must say why it has its place.
func TestEffectOrder(t *testing.T) {
	want := map[string][]string{
		"exitNeeds":     {"namesSeeOpen", "coreNeedsExit", "aliasNeedsExit", "procmemNeedsExit", "wxNeedsExit"},
		"entryRewrites": {"wxEntryProt", "aliasEntryProt", "filterEntryProt"},
		"exitEffects": {"seenEffect", "rewriteEffect", "wxClearEffect", "pagesEffect", "unmapFirstEffect",
			"coreEffect", "wxFreshEffect", "procmemEffect", "aliasEffect", "wxMovedEffect", "wxTCBEffect", "filterEffect"},
		// a call from the BPF ring buffer (events_linux_amd64.go): the
		// exitEffects that only change ptjit's state, in their order
		"eventEffects": {"wxClearEffect", "pagesEffect", "coreEffect", "wxTCBEffect"},
	}
	type entry struct {
		name, why string
		fn        any
	}
	got := map[string][]entry{}
	for _, e := range exitNeeds {
		got["exitNeeds"] = append(got["exitNeeds"], entry{e.name, e.why, e.fn})
	}
	for _, e := range entryRewrites {
		got["entryRewrites"] = append(got["entryRewrites"], entry{e.name, e.why, e.fn})
	}
	for _, e := range exitEffects {
		got["exitEffects"] = append(got["exitEffects"], entry{e.name, e.why, e.fn})
	}
	for _, e := range eventEffects {
		got["eventEffects"] = append(got["eventEffects"], entry{e.name, e.why, e.fn})
	}
	for list, names := range want {
		var have []string
		for _, e := range got[list] {
			have = append(have, e.name)
			fn := runtime.FuncForPC(reflect.ValueOf(e.fn).Pointer()).Name()
			if !strings.HasSuffix(fn, ".(*Tracer)."+e.name) {
				t.Errorf("%s: entry %q runs %s", list, e.name, fn)
			}
			if strings.TrimSpace(e.why) == "" {
				t.Errorf("%s: %s does not say why it has its place", list, e.name)
			}
		}
		if !reflect.DeepEqual(have, names) {
			t.Errorf("%s is\n\t%v\nbut its declared order is\n\t%v", list, have, names)
		}
	}
}

// TestEffectOrderStatedOnce: the features' comments name the list an entry
// is in, never its place in it ("(exitEffects, last)"), which the lists
// alone state.
func TestEffectOrderStatedOnce(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	placed := regexp.MustCompile(`\((exitNeeds|entryRewrites|exitEffects)[,;:] *(first|last|after|before|step)`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			if placed.MatchString(line) {
				t.Errorf("%s:%d states a place in a list by hand: %s", f, i+1, strings.TrimSpace(line))
			}
		}
	}
}
