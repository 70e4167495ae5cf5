package perf

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ptjit/ptjit/clock"
	"github.com/ptjit/ptjit/db"
)

func TestJitDumpRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jit-77.dump")
	w, err := CreateJitDump(path, 77, 500)
	if err != nil {
		t.Fatal(err)
	}
	loads := []JitLoad{
		{Pid: 77, Tid: 78, VMA: 0x1000, CodeAddr: 0x1000, Index: 1, Name: "f", Code: []byte{0x90, 0xc3}, Timestamp: 600},
		{Pid: 77, Tid: 77, VMA: 0x2000, CodeAddr: 0x2000, Index: 2, Name: "", Code: nil, Timestamp: 700},
		{Pid: 77, Tid: 77, VMA: 0x1000, CodeAddr: 0x1000, Index: 3, Name: "f'", Code: bytes.Repeat([]byte{0xcc}, 5000), Timestamp: 800},
	}
	for i := range loads {
		w.Load(&loads[i])
	}
	if err := w.Close(900); err != nil {
		t.Fatal(err)
	}
	d, err := OpenJitDump(path)
	if err != nil {
		t.Fatal(err)
	}
	h := d.Header
	if h.Magic != JitDumpMagic || h.Version != 1 || h.TotalSize != 40 || h.ElfMach != 62 || h.Pid != 77 ||
		h.Timestamp != 500 || h.Flags != JitDumpFlagArchTime || !d.Closed || d.Skipped != 0 {
		t.Errorf("header %+v closed %v skipped %d", h, d.Closed, d.Skipped)
	}
	if len(d.Loads) != len(loads) {
		t.Fatalf("%d loads, want %d", len(d.Loads), len(loads))
	}
	for i, l := range d.Loads {
		want := loads[i]
		if l.Pid != want.Pid || l.Tid != want.Tid || l.VMA != want.VMA || l.CodeAddr != want.CodeAddr ||
			l.Index != want.Index || l.Name != want.Name || !bytes.Equal(l.Code, want.Code) || l.Timestamp != want.Timestamp {
			t.Errorf("load %d: %+v, want %+v", i, l, want)
		}
	}
	// Corruptions give offset errors, not panics.
	raw, _ := os.ReadFile(path)
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"short", raw[:10], "jitdump at 0x0: file of 10 bytes"},
		{"magic", append([]byte{1, 2, 3, 4}, raw[4:]...), "bad magic"},
		{"cut", raw[:len(raw)-20], "exceeds file"},
		{"size", func() []byte { b := append([]byte(nil), raw...); b[44] = 0xff; b[45] = 0xff; b[46] = 0xff; return b }(), "jitdump at 0x28: record id 0 size"},
	} {
		_, err := ReadJitDump(bytes.NewReader(c.data), int64(len(c.data)), "x.dump")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// JIT code used by the export test: two versions of a counted loop at the
// same address; version 2 is shifted by two NOPs and counts to 2.
var (
	jitCodeV1 = []byte{0xb9, 0x03, 0x00, 0x00, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0x90, 0x0f, 0x05}
	jitCodeV2 = []byte{0x90, 0x90, 0xb9, 0x02, 0x00, 0x00, 0x00, 0xff, 0xc9, 0x75, 0xfc, 0x90, 0x0f, 0x05}
	// listing indices walked by each run
	jitPathV1 = []int{0, 1, 2, 1, 2, 1, 2, 3, 4}
	jitPathV2 = []int{0, 1, 2, 3, 4, 3, 4, 5, 6}
)

// objdumpRaw lists the instruction addresses of raw x86-64 bytes placed at
// vma, with objdump.
func objdumpRaw(t testing.TB, code []byte, vma uint64) []uint64 {
	t.Helper()
	f := filepath.Join(t.TempDir(), "code.bin")
	if err := os.WriteFile(f, code, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
		"--adjust-vma="+strconv.FormatUint(vma, 10), f).Output()
	if err != nil {
		t.Fatalf("objdump: %v", err)
	}
	re := regexp.MustCompile(`^\s+([0-9a-f]+):\s`)
	var addrs []uint64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			addrs = append(addrs, a)
		}
	}
	return addrs
}

func pageWith(code []byte) []byte {
	p := make([]byte, db.PageSize)
	copy(p, code)
	return p
}

// TestExportJitPerfInject builds a synthetic recording (a code.db with two
// versions of JIT code at an anonymous address, a perf.data whose PT runs
// through both), shows that perf cannot decode the JIT addresses, exports,
// runs perf inject --jit, and checks perf then decodes exactly the
// instructions objdump lists along the traced paths, from jitted-PID-N.so.
func TestExportJitPerfInject(t *testing.T) {
	skipIfNoPerf(t)
	const pid = 5151
	const jitAddr = 0x7f0000001000
	dir := t.TempDir()
	home := t.TempDir() // perf's build-id cache goes to $HOME/.debug

	// code.db through the lead's Recorder.
	rec, err := db.Create(filepath.Join(dir, "code.db"), db.Meta{Command: []string{"jit"}, TSCHz: 1e9, Start: clock.Stamp{TSC: 50}})
	if err != nil {
		t.Fatal(err)
	}
	rec.ProcessStart(pid, 1, clock.Stamp{TSC: 50})
	rec.ThreadStart(pid, pid, clock.Stamp{TSC: 50})
	reg := rec.NewRegion(pid, jitAddr, db.PageSize, clock.Stamp{TSC: 1000})
	v1, _ := rec.AddVersion(db.Version{Region: reg, PID: pid, TID: pid, Addr: jitAddr, Size: db.PageSize,
		Data: pageWith(jitCodeV1), At: clock.Stamp{TSC: 1000}, Cause: "mprotect"})
	rec.EndVersion(v1, clock.Stamp{TSC: 3000})
	rec.AddVersion(db.Version{Region: reg, PID: pid, TID: pid, Addr: jitAddr, Size: db.PageSize,
		Data: pageWith(jitCodeV2), At: clock.Stamp{TSC: 3000}, Cause: "write"})
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}

	// perf.data: two runs through the JIT code, one per version.
	w, err := CreatePerfData(filepath.Join(dir, "perf.data"), PerfDataConfig{})
	if err != nil {
		t.Fatal(err)
	}
	w.Comm(pid, pid, "jitprog", true, 100)
	w.ItraceStart(pid, pid, 200)
	run := func(tsc uint64, tnt ...bool) []byte {
		return concat(ptPSB, ptTSC(tsc), ptPSBEND, ptModeExec64, ptTIP48(ptOpTIPPGE, jitAddr),
			ptShortTNT(tnt...), []byte{ptOpTIPPGD})
	}
	w.AuxTrace(pid, -1, 2000, run(2000, true, true, false))
	w.AuxTrace(pid, -1, 4000, run(4000, true, false))
	w.Exit(pid, 1, pid, pid, 5000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	var want []uint64
	l1, l2 := objdumpRaw(t, jitCodeV1, jitAddr), objdumpRaw(t, jitCodeV2, jitAddr)
	for _, i := range jitPathV1 {
		want = append(want, l1[i])
	}
	for _, i := range jitPathV2 {
		want = append(want, l2[i])
	}

	perf := func(args ...string) (string, string) {
		cmd := exec.Command("perf", args...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("perf %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	ips := func(out string) []uint64 {
		var r []uint64
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if ip, err := strconv.ParseUint(f[0], 16, 64); err == nil {
				r = append(r, ip)
			}
		}
		return r
	}

	// Before: perf has no code for the JIT addresses.
	before, beforeErr := perf("script", "-i", filepath.Join(dir, "perf.data"), "--itrace=i0nse", "-F", "ip,sym,dso")
	for _, ip := range ips(before) {
		if ip >= jitAddr && ip < jitAddr+db.PageSize {
			t.Fatalf("perf decoded JIT address %#x without the jitdump:\n%s", ip, before)
		}
	}
	t.Logf("perf script before export:\n%s%s", before, beforeErr)
	if !strings.Contains(before+beforeErr, "error") {
		t.Errorf("perf script reported no decoding error before export:\n%s%s", before, beforeErr)
	}

	// Export as ptjit export jitdump does.
	d, err := db.Open(filepath.Join(dir, "code.db"))
	if err != nil {
		t.Fatal(err)
	}
	infos, err := d.Versions(db.VersionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var vs []JitCodeVersion
	for i := range infos {
		data, err := d.VersionData(&infos[i])
		if err != nil {
			t.Fatal(err)
		}
		vs = append(vs, JitCodeVersion{Pid: infos[i].PID, Tid: infos[i].TID, Addr: infos[i].Addr, Code: data, TSC: infos[i].Valid.TSC})
	}
	d.Close()
	out := filepath.Join(dir, "export")
	res, err := ExportJit(filepath.Join(dir, "perf.data"), out, vs)
	if err != nil {
		t.Fatal(err)
	}
	if res.Loads != 2 || res.Dumps[pid] != filepath.Join(out, "jit-5151.dump") {
		t.Fatalf("export %+v", res)
	}
	jd, err := OpenJitDump(res.Dumps[pid])
	if err != nil {
		t.Fatal(err)
	}
	if len(jd.Loads) != 2 || jd.Loads[0].Timestamp != 1000 || jd.Loads[1].Timestamp != 3000 ||
		!bytes.HasPrefix(jd.Loads[1].Code, jitCodeV2) {
		t.Errorf("jitdump loads %+v", jd.Loads)
	}
	// Our reader sees the marker and the TIME_CONV.
	pd, err := OpenPerfData(res.PerfData)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := LoadPerfTrace(pd)
	pd.Close()
	if err != nil {
		t.Fatal(err)
	}
	marker := false
	for _, r := range tr.Sideband {
		marker = marker || (r.Type == RecMmap2 && r.Mmap.Filename == res.Dumps[pid] && r.Mmap.Pid == pid)
	}
	if !marker || !tr.HasTimeConv || len(tr.Queues) != 1 {
		t.Errorf("exported perf.data: marker %v time conv %v queues %d", marker, tr.HasTimeConv, len(tr.Queues))
	}

	injected := filepath.Join(out, "injected.data")
	perf("inject", "--jit", "-i", res.PerfData, "-o", injected)
	after, afterErr := perf("script", "-i", injected, "--itrace=i0nse", "-F", "ip,sym,dso")
	t.Logf("perf script after export and inject:\n%s%s", after, afterErr)
	got := ips(after)
	if !equalU64(got, want) {
		t.Fatalf("after inject perf decoded\n%x\nwant\n%x\n%s%s", got, want, after, afterErr)
	}
	if !strings.Contains(after, "jitted-5151-1.so") || !strings.Contains(after, "jitted-5151-2.so") {
		t.Errorf("perf script does not name the jitted DSOs:\n%s", after)
	}
}
