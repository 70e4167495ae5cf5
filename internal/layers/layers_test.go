package layers

import (
	"encoding/json"
	"io"
	"os/exec"
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
