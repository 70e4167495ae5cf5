package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// diskFullRun runs ptjit with its recording on a tmpfs of size bytes, in a
// private mount namespace (nothing leaks if the test dies), then the
// queries the caller names on that recording while the tmpfs still
// exists. It returns what each wrote, by name: "run" and each query, as
// "NAME.out", "NAME.err" and "NAME.rc" files in out.
func diskFullRun(t *testing.T, size string, run []string, queries map[string][]string) (out string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, for a tmpfs mount in a private mount namespace (CI runs as root)")
	}
	out = t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
	cmd := func(name string, args []string, merge bool) string {
		var b strings.Builder
		b.WriteString(q(e2e.ptjit))
		for _, a := range args {
			b.WriteString(" " + q(strings.ReplaceAll(a, "MNT", mnt)))
		}
		o := filepath.Join(out, name)
		if merge {
			// One file for both streams, to see the order of the
			// program's output and ptjit's lines.
			b.WriteString(" >" + q(o+".out") + " 2>&1")
		} else {
			b.WriteString(" >" + q(o+".out") + " 2>" + q(o+".err"))
		}
		b.WriteString("; echo $? >" + q(o+".rc") + "\n")
		return b.String()
	}
	script := "set -e\nmount -t tmpfs -o size=" + size + " none " + q(mnt) + "\nset +e\n" + cmd("run", run, true)
	for name, args := range queries {
		script += cmd(name, args, false)
	}
	if r := e2eRun(t, []string{"unshare", "-m", "--propagation", "private", "sh", "-c", script}, nil, "", ""); r.code != 0 {
		t.Fatalf("unshare: status %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	return out
}

func readOut(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readRC(t *testing.T, dir, name string) int {
	t.Helper()
	rc, err := strconv.Atoi(strings.TrimSpace(readOut(t, dir, name+".rc")))
	if err != nil {
		t.Fatalf("%s.rc: %v", name, err)
	}
	return rc
}

// lineIndex returns the index of the first line of s that contains sub,
// -1 if none, and how many lines contain it.
func lineIndex(s, sub string) (first, count int) {
	first = -1
	for i, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			if first < 0 {
				first = i
			}
			count++
		}
	}
	return first, count
}

var savedRE = regexp.MustCompile(`code\.db holds (\d+) of (\d+) versions`)

// TestWriteErrorCodeDB: code.db's disk fills up while stopbench makes
// 20,000 code versions (the disk holds about 1,500: the error comes early
// in the run however far the writer lags behind the program). The error
// is told at once (before the program's last line) in one ptjit: line,
// the program runs to its end, ptjit exits 1, the summary says how many
// versions code.db really holds, and history lists exactly those, after
// one warning that the recording is incomplete (at a write error, where
// the disk took the state row).
func TestWriteErrorCodeDB(t *testing.T) {
	e2eSetup(t)
	out := diskFullRun(t, "1m",
		[]string{"run", "-o", "MNT/rec", "--", e2eProg("stopbench"), "run", "20000", "4"},
		map[string][]string{"history": {"history", "-i", "MNT/rec", "--json"}})
	log := readOut(t, out, "run.out")
	if rc := readRC(t, out, "run"); rc != 1 {
		t.Errorf("ptjit run exited %d, want 1 after a write error\n%s", rc, log)
	}
	errLine, n := lineIndex(log, "code.db: database or disk is full; recording stopped there, the program keeps running")
	if n != 1 {
		t.Fatalf("%d lines telling the write error, want 1:\n%s", n, log)
	}
	last, _ := lineIndex(log, "workload: 40000 mprotect calls")
	if last < 0 {
		t.Fatalf("the program did not run to its end:\n%s", log)
	}
	if errLine > last {
		t.Errorf("the write error was told only after the program ended:\n%s", log)
	}
	m := savedRE.FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the summary does not say what code.db holds:\n%s", log)
	}
	saved, _ := strconv.Atoi(m[1])
	total, _ := strconv.Atoi(m[2])
	if total != 20001 || saved >= total {
		t.Errorf("summary: code.db holds %d of %d versions, want fewer than 20001 of 20001", saved, total)
	}
	if rc := readRC(t, out, "history"); rc != 0 {
		t.Fatalf("history on the recording: status %d\n%s", rc, readOut(t, out, "history.err"))
	}
	if got := strings.Count(readOut(t, out, "history.out"), "\n"); got != saved {
		t.Errorf("history lists %d versions, the summary said code.db holds %d", got, saved)
	}
	herr := readOut(t, out, "history.err")
	// The state names the error when the full disk still takes that one
	// row (db/doc.go: it often does once the failed transaction is rolled
	// back); when not, the recording reads as cut short. Either way one
	// warning, that it is incomplete. (The second showed once in a CI
	// run with the package's other tests beside it.)
	_, n1 := lineIndex(herr, "is incomplete: the recording stopped at a write error (database or disk is full)")
	_, n2 := lineIndex(herr, "is incomplete: its run did not complete it")
	if n1+n2 != 1 || strings.Count(herr, "\n") != 1 {
		t.Errorf("history's stderr, want one warning that the recording is incomplete:\n%s", herr)
	}
}

// TestWriteErrorPerfData: with --pt=soft, perf.data's disk fills up. The
// error is told in one ptjit: line, the program's own output and status
// are as alone, ptjit exits 1, and decode warns once that perf.data is cut
// short and decodes, up to the cut, exactly the instructions the program
// executed (the ground truth, written outside the full disk).
func TestWriteErrorPerfData(t *testing.T) {
	e2eSetup(t)
	truth := filepath.Join(t.TempDir(), "truth")
	// 384 KiB: code.db takes about 260 KiB from the start (its schema
	// in the WAL, the -shm), so perf.data's ~250 KiB cannot fit
	out := diskFullRun(t, "384k",
		[]string{"run", "--pt=soft", "--ground-truth", truth, "-o", "MNT/rec", "--", e2eProg("exitcode"), "3"},
		map[string][]string{"decode": {"decode", "-i", "MNT/rec", "--format=ptxed", "--no-inst"}})
	log := readOut(t, out, "run.out")
	if rc := readRC(t, out, "run"); rc != 1 {
		t.Errorf("ptjit run exited %d, want 1 after a write error\n%s", rc, log)
	}
	if _, n := lineIndex(log, "perf.data: no space left on device; recording stopped there, the program keeps running"); n != 1 {
		t.Fatalf("want one line telling perf.data's write error:\n%s", log)
	}
	alone := e2eRun(t, []string{e2eProg("exitcode"), "3"}, nil, "", "")
	if _, n := lineIndex(log, strings.TrimSpace(alone.stdout)); n != 1 || alone.code != 3 {
		t.Errorf("the program's output under ptjit:\n%s\nalone (status %d):\n%s", log, alone.code, alone.stdout)
	}
	if rc := readRC(t, out, "decode"); rc != 0 {
		t.Fatalf("decode: status %d\n%s", rc, readOut(t, out, "decode.err"))
	}
	if _, n := lineIndex(readOut(t, out, "decode.err"), "perf.data is cut short"); n != 1 {
		t.Errorf("decode's stderr, want one warning that perf.data is cut short:\n%s", readOut(t, out, "decode.err"))
	}
	var got []uint64
	for _, l := range strings.Split(readOut(t, out, "decode.out"), "\n") {
		if insnLineRE.MatchString(l) {
			ip, _ := strconv.ParseUint(l, 16, 64)
			got = append(got, ip)
		}
	}
	gt := groundTruth(t, truth)
	if len(gt) != 1 {
		t.Fatalf("ground truth of %d threads, want 1", len(gt))
	}
	for _, want := range gt {
		if len(got) == 0 || len(got) >= len(want) {
			t.Fatalf("decoded %d of %d executed instructions: want a part, up to the cut", len(got), len(want))
		}
		if i := firstDiff(want[:len(got)], got); i >= 0 {
			t.Errorf("decoded instruction #%d is %#x, executed %#x", i, got[i], want[i])
		}
	}
}
