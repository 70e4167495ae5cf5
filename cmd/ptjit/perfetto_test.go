package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/db"
	"github.com/ptjit/ptjit/internal/testenv"
)

// traceEvent is one event of a Chrome Trace Event Format file, as
// encoding/json reads it (fields of every phase ptjit writes).
type traceEvent struct {
	Ph   string          `json:"ph"`
	PID  *int            `json:"pid"`
	TID  *int            `json:"tid"`
	TS   *float64        `json:"ts"`
	Name string          `json:"name"`
	S    string          `json:"s"`
	Cat  string          `json:"cat"`
	Args json.RawMessage `json:"args"`
}

// traceFile is the whole file.
type traceFile struct {
	TraceEvents     []traceEvent   `json:"traceEvents"`
	DisplayTimeUnit string         `json:"displayTimeUnit"`
	OtherData       map[string]any `json:"otherData"`
}

// slice is a B/E pair of one thread, rebuilt from the file.
type slice struct {
	name       string
	start, end float64
	depth      int
	args       map[string]any // the E event's
}

// parsedTrace is a file checked against the format: the slices of each
// thread (pid, tid) in the order they begin, the instants of each track,
// and the names of threads and processes.
type parsedTrace struct {
	file     traceFile
	slices   map[[2]int][]slice
	instants map[[2]int][]traceEvent
	threads  map[[2]int]string
	procs    map[int]string
}

// parseTrace reads a file strictly with encoding/json and checks what a
// viewer relies on: an object with a traceEvents array; every event a
// known phase with pid and tid, ts on every timed event; metadata events
// name a process or thread; instants are thread-scoped; on each thread the
// times of B and E events never decrease in file order, every E ends an
// open B and no B stays open (so children lie inside their parents).
func parseTrace(t *testing.T, data []byte) *parsedTrace {
	t.Helper()
	p := &parsedTrace{slices: map[[2]int][]slice{}, instants: map[[2]int][]traceEvent{}, threads: map[[2]int]string{}, procs: map[int]string{}}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p.file); err != nil {
		t.Fatalf("the export is not a trace-event JSON object: %v\n%.2000s", err, data)
	}
	if p.file.TraceEvents == nil || p.file.DisplayTimeUnit != "ns" {
		t.Fatalf("no traceEvents array or displayTimeUnit %q", p.file.DisplayTimeUnit)
	}
	open := map[[2]int][]int{} // indexes of open slices
	last := map[[2]int]float64{}
	for i, e := range p.file.TraceEvents {
		if e.PID == nil || e.TID == nil || *e.PID <= 0 || *e.TID <= 0 {
			t.Fatalf("event %d %+v: no positive pid and tid", i, e)
		}
		k := [2]int{*e.PID, *e.TID}
		if e.Ph != "M" && (e.TS == nil || math.IsNaN(*e.TS)) {
			t.Fatalf("event %d %+v: no ts", i, e)
		}
		var args map[string]any
		if len(e.Args) > 0 {
			if err := json.Unmarshal(e.Args, &args); err != nil {
				t.Fatalf("event %d: args %s: %v", i, e.Args, err)
			}
		}
		switch e.Ph {
		case "M":
			name, _ := args["name"].(string)
			switch e.Name {
			case "process_name":
				p.procs[k[0]] = name
			case "thread_name":
				p.threads[k] = name
			case "process_sort_index", "thread_sort_index":
			default:
				t.Fatalf("event %d: metadata %q", i, e.Name)
			}
		case "i":
			if e.S != "t" || e.Name == "" {
				t.Fatalf("event %d %+v: instant without scope t or name", i, e)
			}
			p.instants[k] = append(p.instants[k], e)
		case "B", "E":
			if *e.TS < last[k] {
				t.Fatalf("event %d: thread %v: ts %.3f before the previous %.3f", i, k, *e.TS, last[k])
			}
			last[k] = *e.TS
			if e.Ph == "B" {
				if e.Name == "" {
					t.Fatalf("event %d: slice without a name", i)
				}
				open[k] = append(open[k], len(p.slices[k]))
				p.slices[k] = append(p.slices[k], slice{name: e.Name, start: *e.TS, depth: len(open[k]) - 1})
				continue
			}
			o := open[k]
			if len(o) == 0 {
				t.Fatalf("event %d: thread %v: E without an open slice", i, k)
			}
			s := &p.slices[k][o[len(o)-1]]
			s.end, s.args = *e.TS, args
			open[k] = o[:len(o)-1]
		default:
			t.Fatalf("event %d: phase %q", i, e.Ph)
		}
	}
	for k, o := range open {
		if len(o) > 0 {
			t.Fatalf("thread %v: %d slices never end", k, len(o))
		}
	}
	return p
}

// exportPerfetto runs ptjit export perfetto on dir and parses the file.
func exportPerfetto(t *testing.T, dir string, args ...string) (*parsedTrace, e2eResult) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "trace.json")
	r := e2ePtjit(t, nil, append([]string{"export", "perfetto", "-i", dir, "-o", out}, args...)...)
	e2eCheckMessages(t, r.stderr)
	if r.code != 0 {
		t.Fatalf("export perfetto %v: exit %d\n%s", args, r.code, r.stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return parseTrace(t, data), r
}

// timeBase reads a recording's time base from its code.db: the export's
// ts is (tsc - start_tsc) / tsc_hz in microseconds.
func timeBase(t *testing.T, dir string) func(tsc uint64) float64 {
	t.Helper()
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	m, err := d.Meta()
	if err != nil {
		t.Fatal(err)
	}
	start, err1 := strconv.ParseUint(m["start_tsc"], 10, 64)
	hz, err2 := strconv.ParseUint(m["tsc_hz"], 10, 64)
	if err1 != nil || err2 != nil || hz == 0 {
		t.Fatalf("meta start_tsc %q tsc_hz %q", m["start_tsc"], m["tsc_hz"])
	}
	return func(tsc uint64) float64 { return (float64(tsc) - float64(start)) / float64(hz) * 1e6 }
}

// nearUS: the export writes microseconds with 3 decimals.
func nearUS(a, b float64) bool { return math.Abs(a-b) <= 0.0015 }

// historyVersion is the part of a history --json line used here.
type historyVersion struct {
	PID, TID        int
	Region          int64
	Version         int
	Addr, IP, Cause string
	Size, TSC       uint64
	EndTSC          uint64 `json:"end_tsc"`
	Names           []string
}

func historyVersions(t *testing.T, dir string) []historyVersion {
	t.Helper()
	r := e2ePtjit(t, nil, "history", "-i", dir, "--json")
	if r.code != 0 {
		t.Fatalf("history --json: exit %d\n%s", r.code, r.stderr)
	}
	var out []historyVersion
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var v historyVersion
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("history --json line %q: %v", l, err)
		}
		out = append(out, v)
	}
	return out
}

// checkVersionInstants: the "code versions" track of each process holds
// one instant per version of history --json, in order, named "region R
// vV", at its time, with its address, size, cause, writer tid and ip and
// names.
func checkVersionInstants(t *testing.T, p *parsedTrace, hs []historyVersion, us func(uint64) float64) {
	t.Helper()
	byPID := map[int][]traceEvent{}
	for k, evs := range p.instants {
		if p.threads[k] == "code versions" {
			byPID[k[0]] = append(byPID[k[0]], evs...)
		}
	}
	n := 0
	for _, evs := range byPID {
		n += len(evs)
	}
	if n != len(hs) {
		t.Errorf("%d code-version instants, history --json lists %d versions", n, len(hs))
	}
	seen := map[int]int{}
	for _, h := range hs {
		evs := byPID[h.PID]
		i := seen[h.PID]
		seen[h.PID]++
		if i >= len(evs) {
			t.Errorf("no instant for region %d v%d of pid %d", h.Region, h.Version, h.PID)
			continue
		}
		e := evs[i]
		var a struct {
			Region          int64
			Version         int
			Addr, IP, Cause string
			Size            uint64
			TID             int
			Names           []string
		}
		json.Unmarshal(e.Args, &a)
		want := fmt.Sprintf("region %d v%d", h.Region, h.Version)
		if e.Name != want || a.Region != h.Region || a.Version != h.Version || a.Addr != h.Addr || a.Size != h.Size ||
			a.Cause != h.Cause || a.IP != h.IP || a.TID != h.TID || strings.Join(a.Names, ",") != strings.Join(h.Names, ",") {
			t.Errorf("instant %s %s, history: %+v", e.Name, e.Args, h)
		}
		if !nearUS(*e.TS, us(h.TSC)) {
			t.Errorf("instant %s at %.3f µs, history's tsc %d is %.3f µs", e.Name, *e.TS, h.TSC, us(h.TSC))
		}
	}
}

// funcKey is a function's name without an offset: decode --calls names
// where a call lands (a PLT entry: "_init+0xd0"; unnamed JIT code:
// "[region R vN +0x40]"), the timeline the function it is in ("_init",
// "[region R vN]").
func funcKey(name string) string {
	if v, _, ok := strings.Cut(name, " +0x"); ok && strings.HasPrefix(name, "[region ") {
		return v + "]" // unnamed JIT code: "[region R vN +0xOFF]", "[region R vN]"
	}
	k, _, _ := strings.Cut(name, "+0x")
	return k
}

// callsByName counts decode --calls' entries ("-> NAME") per function
// (funcKey), without the code version's tag (" [region R vN]").
func callsByName(t *testing.T, dir string) map[string]int {
	t.Helper()
	r := e2ePtjit(t, nil, "decode", "-i", dir, "--calls")
	if r.code != 0 {
		t.Fatalf("decode --calls: exit %d\n%s", r.code, r.stderr)
	}
	tag := regexp.MustCompile(` \[region \d+ v\d+\]$`)
	out := map[string]int{}
	for _, l := range strings.Split(r.stdout, "\n") {
		_, name, ok := strings.Cut(l, "-> ")
		if !ok {
			continue
		}
		out[funcKey(tag.ReplaceAllString(name, ""))]++
	}
	return out
}

// TestExportPerfetto records testdata/perfmap-jit (its stdout logs each
// JIT call: name, address, result) with --pt=soft, unfiltered and with
// --soft-filter=jit, exports the timeline and checks it against the
// program, decode --calls and history --json:
//   - the file parses with encoding/json as a trace-event object, slices
//     nest (B/E matched per thread, times never decreasing);
//   - the slices per function name are decode --calls' entries into it,
//     exactly;
//   - the JIT functions' slices, in time order, are the program's call
//     log; jit_add7 and jit_sub5 ran at the same address and each slice
//     begins while a version that the JIT named so was valid (jit_add7
//     in the region's v1, jit_sub5 in its v2);
//   - unfiltered, the JIT slices lie inside main's;
//   - the code-version instants are history --json's versions.
func TestExportPerfetto(t *testing.T) {
	e2eSetup(t)
	for _, filter := range []string{"jit", "off"} {
		t.Run("filter="+filter, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter="+filter, "-o", dir, "--", e2eProg("perfmap-jit"))
			if r.code != 0 {
				t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
			}
			var log []string
			addr := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				f := strings.Fields(l)
				if len(f) != 4 || f[0] != "call" {
					t.Fatalf("program output line %q", l)
				}
				log = append(log, f[1])
				addr[f[1]] = f[2]
			}
			if addr["jit_add7"] == "" || addr["jit_add7"] != addr["jit_sub5"] {
				t.Fatalf("perfmap-jit: jit_add7 at %s, jit_sub5 at %s: want the same address", addr["jit_add7"], addr["jit_sub5"])
			}
			p, _ := exportPerfetto(t, dir)
			us := timeBase(t, dir)
			if len(p.slices) != 1 {
				t.Fatalf("slices on %d threads, want 1 (perfmap-jit has one thread)", len(p.slices))
			}
			var sl []slice
			for k, s := range p.slices {
				sl = s
				if p.threads[k] == "" || p.procs[k[0]] != "perfmap-jit" {
					t.Errorf("thread %v named %q in process %q", k, p.threads[k], p.procs[k[0]])
				}
			}
			got := map[string]int{}
			for _, s := range sl {
				got[funcKey(s.name)]++
			}
			want := callsByName(t, dir)
			for name, n := range want {
				if got[name] != n {
					t.Errorf("%d slices %q, decode --calls enters it %d times", got[name], name, n)
				}
			}
			if len(got) != len(want) {
				t.Errorf("slices of %d functions, decode --calls enters %d", len(got), len(want))
			}

			var jit []slice
			for _, s := range sl {
				if strings.HasPrefix(s.name, "jit_") {
					jit = append(jit, s)
				}
			}
			sort.SliceStable(jit, func(i, j int) bool { return jit[i].start < jit[j].start })
			var names []string
			for _, s := range jit {
				names = append(names, s.name)
			}
			if strings.Join(names, " ") != strings.Join(log, " ") {
				t.Errorf("JIT slices in time order %v, the program called %v", names, log)
			}
			hs := historyVersions(t, dir)
			for _, s := range jit {
				ok := false
				for _, h := range hs {
					named := false
					for _, n := range h.Names {
						named = named || n == s.name
					}
					if named && us(h.TSC) <= s.start+0.0015 && (h.EndTSC == 0 || s.start < us(h.EndTSC)) {
						ok = true
						if s.name == "jit_add7" && h.Version != 1 || s.name == "jit_sub5" && h.Version != 2 {
							t.Errorf("%s at %.3f µs: in region %d v%d", s.name, s.start, h.Region, h.Version)
						}
					}
				}
				if !ok {
					t.Errorf("slice %s at %.3f µs: no version named so valid then", s.name, s.start)
				}
			}
			if filter == "off" {
				for _, s := range jit {
					inMain := false
					for _, m := range sl {
						inMain = inMain || m.name == "main" && m.depth < s.depth && m.start <= s.start && s.end <= m.end
					}
					if !inMain {
						t.Errorf("slice %s [%.3f, %.3f] depth %d: not inside main's", s.name, s.start, s.end, s.depth)
					}
				}
			}
			checkVersionInstants(t, p, hs, us)
		})
	}
}

// TestExportPerfettoWrites records testdata/static-keys under W^X
// enforcement with the write log (--wx=precise) and checks the "W^X
// writes" track against history --writes --json: one instant per logged
// write, in order, at its time, with its address, size, writer tid and
// ip, old and new bytes; and the versions' track against history --json.
func TestExportPerfettoWrites(t *testing.T) {
	e2eSetup(t)
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "--wx=precise", "-o", dir, "--", e2eProg("static-keys"))
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	p, _ := exportPerfetto(t, dir)
	us := timeBase(t, dir)
	h := e2ePtjit(t, nil, "history", "-i", dir, "--writes", "--json")
	if h.code != 0 {
		t.Fatalf("history --writes --json: exit %d\n%s", h.code, h.stderr)
	}
	type write struct {
		PID, TID           int
		TSC                uint64
		IP, Addr, Old, New string
	}
	var ws []write
	for _, l := range strings.Split(strings.TrimSpace(h.stdout), "\n") {
		var w write
		if err := json.Unmarshal([]byte(l), &w); err != nil {
			t.Fatalf("history --writes --json line %q: %v", l, err)
		}
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		t.Fatal("static-keys --wx=precise: no writes logged")
	}
	var got []traceEvent
	for k, evs := range p.instants {
		if p.threads[k] == "W^X writes" {
			if k[0] != ws[0].PID {
				t.Errorf("W^X track of pid %d, the writes are pid %d's", k[0], ws[0].PID)
			}
			got = append(got, evs...)
		}
	}
	if len(got) != len(ws) {
		t.Fatalf("%d W^X-write instants, history --writes lists %d", len(got), len(ws))
	}
	for i, w := range ws {
		e := got[i]
		var a struct {
			Addr, IP, Old, New string
			Size, TID          int
		}
		json.Unmarshal(e.Args, &a)
		if a.Addr != w.Addr || a.IP != w.IP || a.Old != w.Old || a.New != w.New || a.TID != w.TID || a.Size != len(w.New)/2 ||
			e.Name != fmt.Sprintf("write %s+%d", w.Addr, len(w.New)/2) || e.Cat != "wx" {
			t.Errorf("write %d: instant %s %s, history %+v", i, e.Name, e.Args, w)
		}
		if !nearUS(*e.TS, us(w.TSC)) {
			t.Errorf("write %d at %.3f µs, history's tsc %d is %.3f µs", i, *e.TS, w.TSC, us(w.TSC))
		}
	}
	checkVersionInstants(t, p, historyVersions(t, dir), us)
}

// TestExportPerfettoScale checks the options that keep a big trace
// loadable, on a recording of perfmap-jit (unfiltered: hundreds of calls
// in ld.so and libc):
//   - --time START,END: only the slices beginning in the window, and the
//     instants in it, the same slices as the whole export's there;
//   - --min-dur: no slice shorter, the ones left out counted in otherData
//     and the parents' args.short_calls, a warning says how many; the
//     slices kept and left out add up to the whole export's;
//   - --max-slices N: N slices, otherData and a warning say where.
func TestExportPerfettoScale(t *testing.T) {
	e2eSetup(t)
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "-o", dir, "--", e2eProg("perfmap-jit"))
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	all, _ := exportPerfetto(t, dir)
	var sl []slice
	for _, s := range all.slices {
		sl = s
	}
	if len(sl) < 100 {
		t.Fatalf("%d slices: want an unfiltered trace's hundreds", len(sl))
	}
	var durs []float64
	for _, s := range sl {
		durs = append(durs, s.end-s.start)
	}
	sort.Float64s(durs)

	t.Run("time", func(t *testing.T) {
		// a window around the JIT calls (the second half of the run)
		var lo, hi float64
		for _, s := range sl {
			if s.name == "jit_add7" {
				lo = s.start
			}
			if s.name == "jit_neg" {
				hi = s.end
			}
		}
		win := fmt.Sprintf("%.9f,%.9f", lo/1e6, (hi+1)/1e6)
		p, _ := exportPerfetto(t, dir, "--time", win)
		if p.file.OtherData["ptjit_time_window"] != win {
			t.Errorf("otherData %v: no ptjit_time_window %q", p.file.OtherData, win)
		}
		var in []slice
		for _, s := range p.slices {
			in = s
		}
		names := map[string]int{}
		for _, s := range in {
			if s.start < lo-0.0015 || s.start > hi+1 {
				t.Errorf("slice %s at %.3f: outside the window [%.3f, %.3f]", s.name, s.start, lo, hi+1)
			}
			names[s.name]++
		}
		for _, fn := range []string{"jit_add7", "jit_sub5", "jit_neg"} {
			if names[fn] != 1 {
				t.Errorf("window %s: %d slices %s, want 1", win, names[fn], fn)
			}
		}
		if len(in) >= len(sl) {
			t.Errorf("window %s: %d slices, the whole export %d", win, len(in), len(sl))
		}
		for k, evs := range p.instants {
			for _, e := range evs {
				if *e.TS < lo-0.0015 || *e.TS > hi+1 {
					t.Errorf("instant %s on %q at %.3f: outside the window", e.Name, p.threads[k], *e.TS)
				}
			}
		}
	})
	t.Run("min-dur", func(t *testing.T) {
		// the median duration: about half the slices are shorter
		med := durs[len(durs)/2]
		if med <= 0 {
			med = durs[len(durs)-1] / 2
		}
		arg := fmt.Sprintf("%dns", int64(med*1000))
		p, r := exportPerfetto(t, dir, "--min-dur", arg)
		var kept []slice
		for _, s := range p.slices {
			kept = s
		}
		var counted uint64
		for _, s := range kept {
			if s.end-s.start < med-0.0015 {
				t.Errorf("slice %s lasts %.3f µs, under --min-dur %s", s.name, s.end-s.start, arg)
			}
			if n, ok := s.args["short_calls"].(float64); ok {
				counted += uint64(n)
			}
		}
		short, _ := p.file.OtherData["ptjit_short_calls_left_out"].(float64)
		if int(short)+len(kept) != len(sl) || short == 0 {
			t.Errorf("--min-dur %s: %d slices kept, %v left out; the whole export has %d", arg, len(kept), short, len(sl))
		}
		if counted > uint64(short) {
			t.Errorf("args.short_calls sum to %d, more than the %v left out", counted, short)
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("%d calls shorter than --min-dur", int(short))) {
			t.Errorf("no warning saying %v calls were left out:\n%s", short, r.stderr)
		}
	})
	t.Run("max-slices", func(t *testing.T) {
		p, r := exportPerfetto(t, dir, "--max-slices", "10")
		var kept []slice
		for _, s := range p.slices {
			kept = s
		}
		if len(kept) != 10 || p.file.OtherData["ptjit_cut_by_max_slices"] == nil || !strings.Contains(r.stderr, "--max-slices 10 reached") {
			t.Errorf("--max-slices 10: %d slices, otherData %v\n%s", len(kept), p.file.OtherData, r.stderr)
		}
		for i, s := range kept {
			if s.name != sl[i].name || s.start != sl[i].start {
				t.Errorf("slice %d: %s at %.3f, the whole export's %s at %.3f", i, s.name, s.start, sl[i].name, sl[i].start)
			}
		}
	})
}

// TestExportPerfettoInputs: bad arguments and outputs are one-line errors
// with a non-zero exit that leave no file behind; an existing output file
// is refused and kept unless --force, and the recording's own files even
// with it; -o - writes the JSON to stdout; a recording without PT trace
// gives a valid file with its code versions.
func TestExportPerfettoInputs(t *testing.T) {
	e2eSetup(t)
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", dir, "--", e2eProg("perfmap-jit"))
	if r.code != 0 {
		t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
	}
	tmp := t.TempDir()
	out := filepath.Join(tmp, "t.json")
	for _, c := range []struct {
		args []string
		what string
	}{
		{[]string{"-i", dir}, "-o FILE is required"},
		{[]string{"-i", dir, "-o", filepath.Join(tmp, "no", "such", "dir.json")}, "no such file or directory"},
		{[]string{"-i", dir, "-o", tmp}, "is a directory"},
		{[]string{"-i", dir, "-o", out, "--time", "abc"}, `--time "abc"`},
		{[]string{"-i", dir, "-o", out, "--time", "2,1"}, "END is not after START"},
		{[]string{"-i", dir, "-o", out, "--min-dur", "ten"}, "min-dur"},
		{[]string{"-i", filepath.Join(tmp, "nothing"), "-o", out}, "nothing"},
	} {
		r := e2ePtjit(t, nil, append([]string{"export", "perfetto"}, c.args...)...)
		if r.code == 0 {
			t.Errorf("export perfetto %v: exit 0", c.args)
		}
		e2eOneLineError(t, r.stderr, c.what)
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("export perfetto %v: left %s behind", c.args, out)
		}
	}

	os.WriteFile(out, []byte("not ptjit's\n"), 0o644)
	r = e2ePtjit(t, nil, "export", "perfetto", "-i", dir, "-o", out)
	e2eOneLineError(t, r.stderr, "--force")
	if b, _ := os.ReadFile(out); r.code == 0 || string(b) != "not ptjit's\n" {
		t.Errorf("existing -o FILE: exit %d, file now %.100q", r.code, b)
	}
	r = e2ePtjit(t, nil, "export", "perfetto", "-i", dir, "-o", out, "--force")
	if b, _ := os.ReadFile(out); r.code != 0 || !json.Valid(b) {
		t.Errorf("--force: exit %d, file valid JSON: %v\n%s", r.code, json.Valid(b), r.stderr)
	}
	for _, f := range []string{"perf.data", "code.db"} {
		path := filepath.Join(dir, f)
		before, _ := os.ReadFile(path)
		r = e2ePtjit(t, nil, "export", "perfetto", "-i", dir, "-o", path, "--force")
		e2eOneLineError(t, r.stderr, "is the recording's "+f)
		if after, _ := os.ReadFile(path); r.code == 0 || string(after) != string(before) {
			t.Errorf("-o %s --force: exit %d, the recording's file changed", path, r.code)
		}
	}
	r = e2ePtjit(t, nil, "export", "perfetto", "-i", dir, "-o", "-")
	if p := parseTrace(t, []byte(r.stdout)); r.code != 0 || len(p.slices) != 1 {
		t.Errorf("-o -: exit %d, %d threads with slices\n%s", r.code, len(p.slices), r.stderr)
	}

	// no PT trace at all: a program that runs no JIT code, filtered
	empty := filepath.Join(tmp, "empty")
	if r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", empty, "--", e2eProg("exitcode"), "0"); r.code != 0 {
		t.Fatalf("run exitcode: exit %d\n%s", r.code, r.stderr)
	}
	p, r := exportPerfetto(t, empty)
	if len(p.slices) != 0 || !strings.Contains(r.stderr, "no PT trace") {
		t.Errorf("a recording without trace: %d threads with slices, stderr %q", len(p.slices), r.stderr)
	}
	checkVersionInstants(t, p, historyVersions(t, empty), timeBase(t, empty))
}

// TestExportPerfettoNode: node's baseline code under --pt=soft
// --soft-filter=jit (as TestNodePerfMapNames): the timeline's slices into
// fooAdd's and barMul's code carry the names V8 published, 200 each, as
// names.js calls them.
func TestExportPerfettoNode(t *testing.T) {
	e2eSetup(t)
	testenv.Tool(t, "node", "nodejs")
	root, _ := filepath.Abs("../..")
	dir := filepath.Join(t.TempDir(), "rec")
	r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "-o", dir, "--", "node", "--perf-basic-prof", "--always-sparkplug",
		"--no-logfile-per-isolate", "--logfile="+filepath.Join(t.TempDir(), "v8.log"), filepath.Join(root, "testdata", "names.js"))
	removeNodeMaps(t, dir)
	if r.code != 0 || r.stdout != "node result 81000\n" {
		t.Fatalf("run: exit %d, stdout %q\n%s", r.code, r.stdout, r.stderr)
	}
	p, _ := exportPerfetto(t, dir)
	for _, fn := range []string{"fooAdd", "barMul"} {
		re := regexp.MustCompile(`^JS:\^` + fn + ` \S+names\.js:\d+:\d+$`)
		n := 0
		for _, sl := range p.slices {
			for _, s := range sl {
				if re.MatchString(s.name) {
					n++
				}
			}
		}
		if n != 200 {
			t.Errorf("%d slices into %s's baseline code; names.js calls it 200 times", n, fn)
		}
	}
}

// TestExportPerfettoThreads records testdata/jit-threads (JIT code run by
// three threads besides main) with --soft-filter=jit, per thread and per
// CPU (each thread's stream demultiplexed from the CPU queues), and checks
// the timeline per thread against decode --calls: a track per traced
// thread, named, with as many slices as --calls enters functions in that
// thread's section ("== tid T ..."), each named as --calls names it.
func TestExportPerfettoThreads(t *testing.T) {
	e2eSetup(t)
	for _, layout := range []string{"per-thread", "per-cpu"} {
		t.Run(layout, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "rec")
			r := e2ePtjit(t, nil, "run", "-q", "--pt=soft", "--soft-filter=jit", "--soft-layout="+layout, "-o", dir, "--", e2eProg("jit-threads"))
			if r.code != 0 {
				t.Fatalf("run: exit %d\n%s", r.code, r.stderr)
			}
			calls := e2ePtjit(t, nil, "decode", "-i", dir, "--calls")
			if calls.code != 0 {
				t.Fatalf("decode --calls: exit %d\n%s", calls.code, calls.stderr)
			}
			want := map[int]map[string]int{}
			tid := 0
			head := regexp.MustCompile(`^== .*?\btid (\d+)\b`)
			tag := regexp.MustCompile(` \[region \d+ v\d+\]$`)
			for _, l := range strings.Split(calls.stdout, "\n") {
				if m := head.FindStringSubmatch(l); m != nil {
					tid, _ = strconv.Atoi(m[1])
					want[tid] = map[string]int{}
				} else if _, name, ok := strings.Cut(l, "-> "); ok && want[tid] != nil {
					want[tid][funcKey(tag.ReplaceAllString(name, ""))]++
				}
			}
			p, _ := exportPerfetto(t, dir)
			got := map[int]map[string]int{}
			for k, sl := range p.slices {
				if !strings.HasSuffix(p.threads[k], " "+strconv.Itoa(k[1])) {
					t.Errorf("thread %v named %q", k, p.threads[k])
				}
				got[k[1]] = map[string]int{}
				for _, s := range sl {
					got[k[1]][funcKey(s.name)]++
				}
			}
			if len(want) < 3 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("slices per thread and function:\n%v\ndecode --calls enters:\n%v", got, want)
			}
		})
	}
}
