package tracker_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
	"github.com/ptjit/ptjit/internal/testmain"
	"github.com/ptjit/ptjit/ptrun"
	"github.com/ptjit/ptjit/tracker"
)

var cprogs struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	testmain.Run(m, func() {
		if cprogs.dir != "" {
			os.RemoveAll(cprogs.dir)
		}
	})
}

// cprog builds testdata/NAME.c once per test binary and returns its path.
func cprog(t testing.TB, name string) string {
	t.Helper()
	cprogs.once.Do(func() { cprogs.dir, cprogs.err = os.MkdirTemp("", "ptjit-tracker-test-") })
	if cprogs.err != nil {
		t.Fatal(cprogs.err)
	}
	return testenv.CompileCDir(t, "testdata", cprogs.dir, name, "-O2", "-Wall")
}

// traced is the outcome of one traced run.
type traced struct {
	res    tracker.Result
	stdout string
	stops  []tracker.StopInfo
	db     *db.DB
}

// trace runs argv under the tracker (argv[0] a path), recording into a
// fresh code.db, and returns once every tracee is gone.
func trace(t *testing.T, pin tracker.PinMode, argv ...string) traced {
	t.Helper()
	return traceOpts(t, func(o *tracker.Options) { o.Pin = pin }, argv...)
}

// traceWX is trace with W^X write tracking in mode.
func traceWX(t *testing.T, mode tracker.WXMode, argv ...string) traced {
	t.Helper()
	return traceOpts(t, func(o *tracker.Options) { o.WX = mode }, argv...)
}

// traceOpts is trace with options set by set.
func traceOpts(t testing.TB, set func(*tracker.Options), argv ...string) traced {
	t.Helper()
	path := filepath.Join(t.TempDir(), "code.db")
	rec, err := db.Create(path, db.Meta{Command: argv, TSCHz: 1, Start: clock.Now()})
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.CreateTemp(t.TempDir(), "stdout")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	var tr traced
	var warnings []string
	opts := tracker.Options{
		Recorder:  rec,
		Warnf:     func(f string, a ...any) { warnings = append(warnings, fmt.Sprintf(f, a...)) },
		OnSeccomp: func(s tracker.StopInfo) { tr.stops = append(tr.stops, s) },
	}
	set(&opts)
	tc, err := tracker.Start(opts, ptrun.Launcher(argv[0], argv, []uintptr{0, out.Fd(), 2}))
	if err != nil {
		rec.Close()
		t.Fatal(err)
	}
	tr.res, err = tc.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		if !strings.Contains(w, "process_vm_writev") {
			t.Errorf("warning: %s", w)
		}
	}
	b, _ := os.ReadFile(out.Name())
	tr.stdout = string(b)
	tr.db, err = db.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.db.Close() })
	return tr
}

// run runs argv without ptjit and returns stdout and the shell status.
func run(t *testing.T, argv ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Run()
	ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if ws.Signaled() {
		return out.String(), 128 + int(ws.Signal())
	}
	return out.String(), ws.ExitStatus()
}

// TestOneStopProtect: a single-threaded program toggling a page RW↔RX
// (wxbench N mprotect) costs one stop per version, not two, and every
// version snapshotted after the thread resumed holds the bytes the program
// wrote before making the page executable: word i&511 of the i-th RX
// version is i.
func TestOneStopProtect(t *testing.T) {
	const n = 200
	tr := trace(t, tracker.PinOff, cprog(t, "wxbench"), strconv.Itoa(n), "mprotect")
	if !strings.HasPrefix(tr.stdout, "mprotect: ") {
		t.Fatalf("wxbench printed %q", tr.stdout)
	}
	vs, err := tr.db.Versions(db.VersionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var rx []db.VersionInfo
	for _, v := range vs {
		if v.Cause == "mprotect" && v.Size == 4096 {
			rx = append(rx, v)
		}
	}
	if len(rx) != n {
		t.Fatalf("%d RX versions, want %d", len(rx), n)
	}
	for i, v := range rx {
		data, err := tr.db.VersionData(&v)
		if err != nil {
			t.Fatal(err)
		}
		off := 8 * (i & 511)
		if got := binary.LittleEndian.Uint64(data[off:]); got != uint64(i) {
			t.Fatalf("version %d (the RX after store %d): word %d is %d", v.ID, i, i&511, got)
		}
	}
	// 2n mprotect calls, n adding PROT_EXEC: one stop each of those (the
	// others do not stop: TestExecAddingStopsOnly), plus the start-up's
	// few dozen; two stops per call would be 2n.
	if s := tr.res.Stats.Stops; s >= 2*n {
		t.Errorf("%d stops for %d mprotect calls adding PROT_EXEC: the one-stop path was not taken", s, n)
	}
}
