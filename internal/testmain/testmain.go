package testmain

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Run runs the tests, then cleanup (if not nil), and exits: with the tests'
// status, or 1 when they passed but this process still has children.
func Run(m *testing.M, cleanup func()) {
	code := m.Run()
	if cleanup != nil {
		cleanup()
	}
	if kids := Children(); code == 0 && kids != "" {
		fmt.Fprintf(os.Stderr, "tests left children behind: %s\n", kids)
		code = 1
	}
	os.Exit(code)
}

// Children lists the pids of this process's live children.
func Children() string {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	var all []string
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		all = append(all, strings.Fields(string(b))...)
	}
	return strings.Join(all, " ")
}
