package layers

import (
	"encoding/json"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mustNotImport is how a package comment starts its statement of what the
// package must not import (doc.go explains the two forms).
const mustNotImport = "Must not import: "

// anyPackage opens the form that forbids every module package but a list.
const anyPackage = "any ptjit package"

// importRule is a parsed "Must not import:" statement: either every
// module package but the ones in but (all true), or the packages in
// names.
type importRule struct {
	all   bool
	but   []string
	names []string
}

var pkgName = regexp.MustCompile(`^[a-z0-9_-]+(/[a-z0-9_-]+)*$`)

// parseImportRule finds the one "Must not import:" statement of a package
// comment and parses it. The statement starts a line and ends at the
// first period followed by white space or the end of the comment; its
// line breaks count as spaces.
func parseImportRule(doc string) (importRule, error) {
	var starts []int
	for i := 0; ; {
		j := strings.Index(doc[i:], mustNotImport)
		if j < 0 {
			break
		}
		if i+j == 0 || doc[i+j-1] == '\n' {
			starts = append(starts, i+j)
		}
		i += j + len(mustNotImport)
	}
	switch len(starts) {
	case 0:
		return importRule{}, fmt.Errorf("no line starts with %q", mustNotImport)
	case 1:
	default:
		return importRule{}, fmt.Errorf("%d statements %q, want one", len(starts), mustNotImport)
	}
	rest := doc[starts[0]+len(mustNotImport):]
	end := regexp.MustCompile(`\.(\s|$)`).FindStringIndex(rest)
	if end == nil {
		return importRule{}, fmt.Errorf("the statement %q does not end with a period", mustNotImport)
	}
	text := strings.Join(strings.Fields(rest[:end[0]]), " ")
	var r importRule
	list := &r.names
	switch {
	case text == anyPackage:
		return importRule{all: true}, nil
	case strings.HasPrefix(text, anyPackage+" but "):
		r.all = true
		list = &r.but
		text = strings.TrimPrefix(text, anyPackage+" but ")
	}
	for _, n := range strings.Split(text, ",") {
		n = strings.TrimSpace(n)
		if !pkgName.MatchString(n) {
			return importRule{}, fmt.Errorf("%q in %q%s: want %q, %q followed by package paths, or package paths, separated by commas", n, mustNotImport, text, anyPackage, anyPackage+" but")
		}
		*list = append(*list, n)
	}
	return r, nil
}

// reachable returns the packages p may import through Allowed, directly
// or through others.
func reachable(p string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(q string) {
		for _, d := range Allowed[q] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(p)
	return seen
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// check reports how rule contradicts Allowed for package p.
func (r importRule) check(p string) []string {
	var errs []string
	for _, n := range append(slices.Clone(r.names), r.but...) {
		if _, ok := Allowed[n]; !ok {
			errs = append(errs, fmt.Sprintf("names %s, which is not a package of the module", n))
		} else if n == p {
			errs = append(errs, "names the package itself")
		}
	}
	if r.all {
		want := slices.Sorted(slices.Values(Allowed[p]))
		got := slices.Sorted(slices.Values(r.but))
		if !slices.Equal(got, want) {
			errs = append(errs, fmt.Sprintf("allows %s of ptjit, layers.Allowed %s", orNone(got), orNone(want)))
		}
		return errs
	}
	reach := reachable(p)
	for _, n := range r.names {
		if reach[n] {
			errs = append(errs, fmt.Sprintf("forbids %s, which layers.Allowed lets it import (directly or through another package)", n))
		}
	}
	return errs
}

// TestDocImports reads the package comment in every package's doc.go and
// checks its "Must not import:" statement against Allowed: it fails when
// a package has no doc.go, no statement or more than one, or a statement
// that contradicts the table.
func TestDocImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	n := 0
	for {
		var p struct{ ImportPath, Dir string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		path := filepath.Join(p.Dir, "doc.go")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s has no doc.go: the package comment, with what the package must not import, goes there", rel)
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		if f.Doc == nil {
			t.Errorf("%s/doc.go has no package comment", rel)
			continue
		}
		r, err := parseImportRule(f.Doc.Text())
		if err != nil {
			t.Errorf("%s/doc.go: %v", rel, err)
			continue
		}
		for _, e := range r.check(rel) {
			t.Errorf("%s/doc.go: %q %s", rel, mustNotImport, e)
		}
		n++
	}
	t.Logf("%d packages state what they must not import", n)
}

// TestParseImportRule pins the statement's two forms and what the check
// rejects, on a table of package comments.
func TestParseImportRule(t *testing.T) {
	for _, c := range []struct {
		pkg, doc string
		want     string // the rule, or the error's start
		bad      bool   // check reports a contradiction
	}{
		{"ptpkt", "Package ptpkt.\n\nMust not import: any ptjit package.\n", "all but []", false},
		{"x86/att", "Package att.\n\nMust not import: any ptjit\npackage but x86. It prints.\n", "all but [x86]", false},
		{"x86/att", "Must not import: any ptjit package.\n", "all but []", true},                // it imports x86
		{"x86", "Must not import: any ptjit package but x86/att.\n", "all but [x86/att]", true}, // x86 imports nothing
		{"recording", "Package recording.\n\nMust not import: tracker, ptrun,\nsoftpt. A copied recording...\n", "[tracker ptrun softpt]", false},
		{"recording", "Must not import: tracker, db.\n", "[tracker db]", true}, // recording imports db
		{"recording", "Must not import: clock.\n", "[clock]", true},            // through db
		{"recording", "Must not import: trackr.\n", "[trackr]", true},          // no such package
		{"recording", "Must not import: recording.\n", "[recording]", true},    // itself
		{"db", "Package db.\n", "no line starts with", false},                  // missing
		{"db", "It must not import: tracker.\n", "no line starts with", false}, // not at a line's start
		{"db", "Must not import: tracker.\nMust not import: ptrun.\n", "2 statements", false},
		{"db", "Must not import: tracker and ptrun.\n", `"tracker and ptrun"`, false},
		{"db", "Must not import: tracker\n", "the statement", false},
	} {
		r, err := parseImportRule(c.doc)
		var got string
		switch {
		case err != nil:
			got = err.Error()
		case r.all:
			got = fmt.Sprintf("all but %v", r.but)
			if r.but == nil {
				got = "all but []"
			}
		default:
			got = fmt.Sprint(r.names)
		}
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: %q parsed as %s, want %s", c.pkg, c.doc, got, c.want)
			continue
		}
		if err != nil {
			continue
		}
		if errs := r.check(c.pkg); (len(errs) > 0) != c.bad {
			t.Errorf("%s: %q: check says %q, want a contradiction: %v", c.pkg, c.doc, errs, c.bad)
		}
	}
}
