package tracker

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
)

// statsLeaf is one field of Stats that holds a value (a field of a nested
// struct such as Copy included), by its path of field indexes.
type statsLeaf struct {
	name  string
	index []int
}

func statsLeaves(t reflect.Type, prefix string, index []int) []statsLeaf {
	var out []statsLeaf
	for i := range t.NumField() {
		f := t.Field(i)
		ix := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, statsLeaves(f.Type, prefix+f.Name+".", ix)...)
			continue
		}
		out = append(out, statsLeaf{prefix + f.Name, ix})
	}
	return out
}

// setLeaf gives one field the value n (n != 0) and returns the text its
// meta row must hold.
func setLeaf(t *testing.T, s *Stats, l statsLeaf, n int) string {
	v := reflect.ValueOf(s).Elem().FieldByIndex(l.index)
	switch v.Kind() {
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(n))
		return strconv.Itoa(n)
	case reflect.Bool:
		v.SetBool(true)
		return "true"
	case reflect.String:
		v.SetString(fmt.Sprintf("value %d", n))
		return fmt.Sprintf("value %d", n)
	}
	t.Fatalf("Stats.%s: a field of kind %s; teach Stats.Meta and this test how it is written", l.name, v.Kind())
	return ""
}

// TestStatsMeta checks that every field of Stats has its own meta row:
// setting one field alone changes exactly one row, to the field's value,
// and the keys are distinct. A field added to Stats without a row in
// Stats.Meta fails here.
func TestStatsMeta(t *testing.T) {
	zero := (&Stats{}).Meta()
	keys := map[string]bool{}
	key := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for _, r := range zero {
		if keys[r.Key] {
			t.Errorf("meta key %q appears twice in Stats.Meta", r.Key)
		}
		keys[r.Key] = true
		if !key.MatchString(r.Key) {
			t.Errorf("meta key %q: want lower case, digits and _", r.Key)
		}
	}
	leaves := statsLeaves(reflect.TypeFor[Stats](), "", nil)
	owner := map[string]string{} // key → field
	for i, l := range leaves {
		var s Stats
		want := setLeaf(t, &s, l, 1000+i)
		rows := s.Meta()
		if len(rows) != len(zero) {
			t.Fatalf("Stats.Meta returned %d rows, then %d: the rows must not depend on the values", len(zero), len(rows))
		}
		var changed []MetaRow
		for j, r := range rows {
			if r.Key != zero[j].Key {
				t.Fatalf("Stats.Meta row %d is %q, then %q: the order must be fixed", j, zero[j].Key, r.Key)
			}
			if r.Value != zero[j].Value {
				changed = append(changed, r)
			}
		}
		switch {
		case len(changed) == 0:
			t.Errorf("Stats.%s has no meta row: give it a key in Stats.Meta", l.name)
		case len(changed) > 1:
			t.Errorf("Stats.%s changes %d meta rows (%v), want one", l.name, len(changed), changed)
		case changed[0].Value != want:
			t.Errorf("Stats.%s = %s is written as %s=%q, want %q", l.name, want, changed[0].Key, changed[0].Value, want)
		default:
			if f, ok := owner[changed[0].Key]; ok {
				t.Errorf("Stats.%s and Stats.%s share the meta key %q", f, l.name, changed[0].Key)
			}
			owner[changed[0].Key] = l.name
		}
	}
	for k := range keys {
		if _, ok := owner[k]; !ok {
			t.Errorf("meta key %q belongs to no field of Stats", k)
		}
	}
}

// TestStatsWriteMeta stores a Stats whose every field differs in a real
// code.db and reads the meta table back: every field's row is there, with
// its value, beside the rows db.Create wrote.
func TestStatsWriteMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "code.db")
	rec, err := db.Create(path, db.Meta{Command: []string{"/bin/true"}, Cwd: "/", TSCHz: 1e9, Start: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	var s Stats
	want := map[string]string{}
	for i, l := range statsLeaves(reflect.TypeFor[Stats](), "", nil) {
		setLeaf(t, &s, l, 1000+i)
	}
	s.Wall = 3 * time.Second
	for _, r := range s.Meta() {
		want[r.Key] = r.Value
	}
	if want["wall_ns"] != "3000000000" {
		t.Errorf("wall_ns %q, want 3000000000 (nanoseconds)", want["wall_ns"])
	}
	(&Stats{}).WriteMeta(rec) // replaced by the next call
	s.WriteMeta(rec)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := db.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got, err := d.Meta()
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("meta %s = %q, want %q", k, got[k], v)
		}
	}
	if got["command"] == "" || got["ptjit_state"] != "complete" {
		t.Errorf("meta command %q, ptjit_state %q: WriteMeta must leave db's own rows", got["command"], got["ptjit_state"])
	}
}
