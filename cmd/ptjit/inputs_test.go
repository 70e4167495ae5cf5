package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/perf"
)

// TestDumpPerfDataInputs: ptjit dump FILE and ptjit decode --pt FILE
// recognise a perf.data by its content, in file and in pipe mode (perf
// inject -o -, read from a file and from a pipe on stdin), and give the
// same output for both; the queues agree with perf script -D's AUXTRACE
// records. A perf.data without PT is a one-line error naming the file and
// its events, with a non-zero exit.
func TestDumpPerfDataInputs(t *testing.T) {
	e2eSetup(t)
	perfBin := testenv.Tool(t, "perf", "linux-perf")
	tmp := t.TempDir()
	rec := filepath.Join(tmp, "rec")
	prog := e2eProg("static-keys")
	if r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "-o", rec, "--", prog); r.code != 0 {
		t.Fatalf("ptjit run: status %d\n%s", r.code, r.stderr)
	}
	file := filepath.Join(rec, "perf.data")
	pipe, err := exec.Command(perfBin, "inject", "-i", file, "-o", "-").Output()
	if err != nil {
		t.Fatalf("perf inject -o -: %v", err)
	}
	pipeFile := filepath.Join(tmp, "pipe.data")
	if err := os.WriteFile(pipeFile, pipe, 0o644); err != nil {
		t.Fatal(err)
	}

	// dump: -i DIR, FILE, the pipe-mode FILE and the pipe on stdin agree.
	want := e2ePtjit(t, nil, "dump", "-i", rec)
	if want.code != 0 || !strings.Contains(want.stdout, "# "+file+": queue 0") {
		t.Fatalf("dump -i: status %d\n%s", want.code, want.stderr)
	}
	for _, c := range []struct {
		name, arg, stdin string
	}{{file, file, ""}, {pipeFile, pipeFile, ""}, {"stdin", "-", string(pipe)}} {
		for _, format := range []string{"text", "ptdump"} {
			w := e2ePtjit(t, nil, "dump", "--format="+format, "-i", rec)
			r := e2eRun(t, []string{e2e.ptjit, "dump", "--format=" + format, c.arg}, nil, c.stdin, "")
			if r.code != 0 || r.stderr != "" {
				t.Fatalf("dump %s: status %d\n%s", c.arg, r.code, r.stderr)
			}
			if got := strings.ReplaceAll(r.stdout, "# "+c.name+":", "# "+file+":"); got != w.stdout {
				t.Errorf("dump --format=%s %s differs from dump -i %s", format, c.arg, rec)
			}
		}
	}

	// perf's own reading of the pipe: the AUXTRACE records per queue.
	sd := exec.Command(perfBin, "script", "-D", "-i", "-")
	sd.Stdin = strings.NewReader(string(pipe))
	out, err := sd.Output()
	if err != nil {
		t.Fatalf("perf script -D: %v", err)
	}
	perfQ := map[string][2]uint64{} // "idx tid" -> bytes, buffers
	re := regexp.MustCompile(`PERF_RECORD_AUXTRACE size: (0x[0-9a-f]+) .*idx: (\d+)\s+tid: (-?\d+)\s+cpu: (-?\d+)`)
	for _, m := range re.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.ParseUint(m[1], 0, 64)
		k := m[2] + " " + m[3] + " " + m[4]
		perfQ[k] = [2]uint64{perfQ[k][0] + n, perfQ[k][1] + 1}
	}
	ourQ := map[string][2]uint64{}
	reQ := regexp.MustCompile(`(?m)^# .*: queue (\d+) \(cpu (-?\d+), tid (-?\d+)\): (\d+) bytes in (\d+) AUXTRACE buffers$`)
	for _, m := range reQ.FindAllStringSubmatch(want.stdout, -1) {
		n, _ := strconv.ParseUint(m[4], 10, 64)
		b, _ := strconv.ParseUint(m[5], 10, 64)
		ourQ[m[1]+" "+m[3]+" "+m[2]] = [2]uint64{n, b}
	}
	if len(perfQ) == 0 || fmt.Sprint(perfQ) != fmt.Sprint(ourQ) {
		t.Errorf("queues (idx tid cpu: bytes, buffers): perf script -D %v, ptjit dump %v", perfQ, ourQ)
	}

	// decode --pt: the file and the pipe decode alike through the
	// program's text.
	p, err := perf.OpenPerfData(file)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := perf.LoadPerfTrace(p)
	p.Close()
	if err != nil {
		t.Fatal(err)
	}
	raw := ""
	for _, s := range tr.Sideband {
		if s.Type == perf.RecMmap2 && s.Mmap.Filename == prog && s.Mmap.Prot&4 != 0 {
			raw = fmt.Sprintf("%s:%#x-%#x:%#x", prog, s.Mmap.Pgoff, s.Mmap.Pgoff+s.Mmap.Len, s.Mmap.Addr)
			break
		}
	}
	if raw == "" {
		t.Fatalf("no executable MMAP2 of %s in %s", prog, file)
	}
	for _, format := range []string{"--insn", "--format=ptxed", "--stat"} {
		w := e2ePtjit(t, nil, "decode", "--pt", file, "--raw", raw, format)
		if w.code != 0 || w.stdout == "" {
			t.Fatalf("decode --pt %s %s: status %d\n%s\n%.300s", file, format, w.code, w.stderr, w.stdout)
		}
		for _, c := range []struct {
			name, arg, stdin string
		}{{pipeFile, pipeFile, ""}, {"stdin", "-", string(pipe)}} {
			r := e2eRun(t, []string{e2e.ptjit, "decode", "--pt", c.arg, "--raw", raw, format}, nil, c.stdin, "")
			if got := strings.ReplaceAll(r.stdout, "== "+c.name+" ", "== "+file+" "); r.code != 0 || got != w.stdout {
				t.Errorf("decode --pt %s %s: status %d, output differs from the file-mode file's\n%s", c.arg, format, r.code, r.stderr)
			}
		}
	}

	// No PT: perf record of a software event, file and pipe mode.
	for _, mode := range []string{"file", "pipe"} {
		out := filepath.Join(tmp, "cpu-clock-"+mode+".data")
		o := out
		if mode == "pipe" {
			o = "-"
		}
		cmd := exec.Command(perfBin, "record", "-q", "-e", "cpu-clock", "-c", "1000000", "-o", o, "--", "/bin/true")
		if mode == "pipe" {
			b, err := cmd.Output()
			if err != nil {
				t.Fatalf("perf record -o -: %v", err)
			}
			os.WriteFile(out, b, 0o644)
		} else if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("perf record: %v\n%s", err, b)
		}
		for _, args := range [][]string{{"dump", out}, {"decode", "--pt", out, "--raw", raw}, {"decode", "--pt", out, "--raw", raw, "--format=ptxed"}} {
			r := e2ePtjit(t, nil, args...)
			want := "ptjit: " + map[bool]string{true: "decode: ", false: ""}[args[0] == "decode"] +
				"no Intel PT trace in " + out + " (events: cpu-clock)\n"
			if r.code == 0 || r.stderr != want || r.stdout != "" {
				t.Errorf("ptjit %s: status %d, stdout %.100q, stderr %q, want %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, want)
			}
		}
	}
}
