package layers

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/ptjit/ptjit"

// TestLayers lists the module's packages with go list and checks every
// non-test import of one module package by another against Allowed.
func TestLayers(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		seen[rel] = true
		allowed, ok := Allowed[rel]
		if !ok {
			t.Errorf("package %s is not in layers.Allowed: declare its place in the pipeline", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			dep := strings.TrimPrefix(imp, module+"/")
			if !slices.Contains(allowed, dep) {
				t.Errorf("%s imports %s, which layers.Allowed does not allow (imports point down the pipeline)", rel, dep)
			}
		}
	}
	for rel := range Allowed {
		if !seen[rel] {
			t.Errorf("layers.Allowed names %s, which is not a package of the module", rel)
		}
	}
}

// TestAllowedIsAcyclic checks that the table itself describes layers: no
// package may, through the packages it is allowed to import, reach itself.
func TestAllowedIsAcyclic(t *testing.T) {
	state := map[string]int{} // 1: on the path, 2: done
	var visit func(p string, path []string)
	visit = func(p string, path []string) {
		switch state[p] {
		case 1:
			t.Fatalf("layers.Allowed has a cycle: %s", strings.Join(append(path, p), " → "))
		case 2:
			return
		}
		state[p] = 1
		for _, d := range Allowed[p] {
			visit(d, append(path, p))
		}
		state[p] = 2
	}
	for p := range Allowed {
		visit(p, nil)
	}
}

// TestSizes keeps the proportions the restructure set: no package holds
// 35% or more of the module's non-test lines, and the CLI (flags and
// output only) stays under 1,200 non-test lines. A package that grows
// past either bound is a sign that logic landed in the wrong room.
func TestSizes(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Dir}} {{join .GoFiles \" \"}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := map[string]int{}
	total := 0
	for _, row := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(row)
		rel := strings.TrimPrefix(strings.TrimPrefix(f[0], module), "/")
		for _, name := range f[2:] {
			b, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			n := bytes.Count(b, []byte("\n"))
			lines[rel] += n
			total += n
		}
	}
	for rel, n := range lines {
		if 100*n >= 35*total {
			t.Errorf("package %s holds %d of %d non-test lines (%.1f%%, at most 35%%): split it by layer", rel, n, total, 100*float64(n)/float64(total))
		}
	}
	if n := lines["cmd/ptjit"]; n == 0 || n >= 1200 {
		t.Errorf("cmd/ptjit has %d non-test lines (want 1..1199): the CLI holds flags and output; move logic to recording, ptfmt or db", n)
	}
}
