package main

import (
	"strconv"
	"strings"
	"testing"
)

// TestE2EEventsCopyChanged: with --events=bpf, a JIT range over the BPF
// program's budget (jit-pages: 4 MiB, each version rewrites two or three
// pages) falls back to a stop at every exec-adding call, and there, as at
// the seccomp stops, its later versions are read from the pages written
// since the previous one (the userfaultfd is made at the first fallback
// stop; the version after it is read whole): every version exact against
// the manifest, far fewer pages read than the versions hold. The same for
// shared anonymous memory (PHP's opcache JIT buffer).
func TestE2EEventsCopyChanged(t *testing.T) {
	e2eSetup(t)
	if len(e2eEventSources(t)) < 2 {
		t.Skip("BPF events cannot run here")
	}
	for _, c := range []struct {
		args []string
		want int // versions read from their written pages, at least
	}{
		// seccomp (TestCopyChanged, auto): 20 of the 28 later
		// versions (the others split under 1 MiB); one fewer here
		{[]string{"24"}, 19},
		{[]string{"12", "4096", "shared"}, 11},
	} {
		t.Run(strings.Join(c.args, "_"), func(t *testing.T) {
			p := e2eProgram{name: "jit-pages", args: c.args}
			ms, dir := e2eRecord(t, p, "--pt=off", "--events=bpf")
			meta := checkManifestBytes(t, dir, ms)
			read, _ := strconv.Atoi(meta["copy_pages_read"])
			total, _ := strconv.Atoi(meta["copy_pages"])
			versions, _ := strconv.Atoi(meta["copy_changed_versions"])
			fallbacks, _ := strconv.Atoi(meta["events_fallbacks"])
			t.Logf("copy_mode %s: %d changed versions, %d of %d pages read, %d fallbacks (fallback %q)",
				meta["copy_mode"], versions, read, total, fallbacks, meta["copy_fallback"])
			if meta["events"] != "bpf" || meta["copy_mode"] != "auto" {
				t.Errorf("meta events %q copy_mode %q, want bpf and auto", meta["events"], meta["copy_mode"])
			}
			if versions < c.want {
				t.Errorf("%d versions read from their written pages, want at least %d (fallback: %q)", versions, c.want, meta["copy_fallback"])
			}
			if read == 0 || read*4 > total {
				t.Errorf("%d of %d pages read: not far below a full copy", read, total)
			}
		})
	}
}
