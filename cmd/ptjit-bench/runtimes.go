package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func init() {
	rows = append(rows,
		row{name: "java", target: "≤2× native in the default mode", measure: measureJava},
		row{name: "node", target: "≤1.5× native in the default mode", measure: measureNode})
}

// The W^X modes measured on the real JITs, the default first.
var wxModes = []struct{ flag, target string }{
	{"auto", ""}, {"batch", "-"}, {"precise", "-"},
}

// measureRuntime runs argv alone and under ptjit run in every --wx mode,
// interleaved, and reports each mode's ratio to the run alone; only the
// default mode is held to limit.
func measureRuntime(b *bench, name string, limit float64, argv ...string) ([]measurement, error) {
	cmds := []func() (run, error){func() (run, error) { return b.exec(argv...) }}
	for _, m := range wxModes {
		wx := "--wx=" + m.flag
		cmds = append(cmds, func() (run, error) {
			return b.ptjitExec(append([]string{"run", "-q", wx, "-o", b.outDir, "--"}, argv...)...)
		})
	}
	rs, err := b.series(cmds...)
	if err != nil {
		return nil, err
	}
	native := median(rs[0], wallSeconds)
	var out []measurement
	for i, m := range wxModes {
		target, within := "-", func(float64) bool { return true }
		if m.target == "" {
			target = fmt.Sprintf("≤%.1f×", limit)
			within = func(r float64) bool { return r <= limit }
		}
		line := ratioLine(fmt.Sprintf("%s: ptjit run --wx=%s / alone", name, m.flag), median(rs[i+1], wallSeconds), native, "s", "alone", target, within)
		if target == "-" {
			line.met = "-"
		}
		out = append(out, line)
	}
	return out, nil
}

// measureJava: testdata/Hot.java (HotSpot compiles f in tiers, patches
// call sites in its RWX code cache, and takes an implicit-null-check
// SIGSEGV), compiled with javac first.
func measureJava(b *bench) ([]measurement, error) {
	java, dir, err := compileHot(b)
	if err != nil {
		return nil, err
	}
	return measureRuntime(b, "java Hot", 2, java, "-cp", dir, "Hot")
}

// compileHot compiles testdata/Hot.java with javac into a directory of
// the bench's own and returns the java command and that class path.
func compileHot(b *bench) (java, dir string, err error) {
	java, err1 := exec.LookPath("java")
	javac, err2 := exec.LookPath("javac")
	if err1 != nil || err2 != nil {
		return "", "", fmt.Errorf("java/javac not found (apt-get install -y default-jdk-headless)")
	}
	dir = filepath.Join(filepath.Dir(b.outDir), "java")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	if _, err := b.exec(javac, "-d", dir, filepath.Join(b.testdata, "Hot.java")); err != nil {
		return "", "", err
	}
	return java, dir, nil
}

// measureNode: testdata/hot.js (V8 11 keeps code in RWX pages and patches
// it in place).
func measureNode(b *bench) ([]measurement, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("node not found (apt-get install -y nodejs)")
	}
	return measureRuntime(b, "node hot.js", 1.5, node, filepath.Join(b.testdata, "hot.js"))
}
