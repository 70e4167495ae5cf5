package main

import (
	"bytes"
	"context"
	"html"
	"image"
	"image/color"
	"image/png"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ptjit/ptjit/internal/testenv"
)

// TestSpeedscope looks at decode --folded as a person would: it records
// testdata/perfmap-jit with --soft-filter=jit, checks the folded stacks
// with parseFolded (every line parses, the counts sum to --stat's
// instructions, every JIT function of the program's call log ends a
// stack), then serves them with speedscope (testdata/web, the version
// pinned there; make speedscope installs it) and opens them in headless
// Chromium:
//   - the Sandwich view, read from the DOM: no error page, and one row per
//     function with the total and self weights computed from the folded
//     lines, so speedscope's own parser read what parseFolded read, JIT
//     names included;
//   - the Left Heavy flame graph, a screenshot: each JIT function's colour
//     (its swatch in the Sandwich table) fills an area of the canvas in
//     proportion to its instructions (jit_mul3, called twice, twice the
//     others').
//
// With PTJIT_SCREENSHOT=FILE the screenshot is also written to FILE (the
// README's picture). Chromium or speedscope missing skips the test, or
// fails it under CI.
func TestSpeedscope(t *testing.T) {
	chromium, release := browserTools(t)
	e2eSetup(t)
	dir, calls, insns := recordPerfmapJIT(t, "jit")
	folded := e2ePtjit(t, nil, "decode", "-i", dir, "--folded")
	if folded.code != 0 {
		t.Fatalf("decode --folded: exit %d\n%s", folded.code, folded.stderr)
	}
	stacks, counts, sum := parseFolded(t, folded.stdout)
	if sum != insns {
		t.Errorf("folded counts sum to %d, decode --stat counts %d instructions", sum, insns)
	}
	want := foldedWeights(stacks, counts)
	for name := range calls {
		if want[name].self == 0 {
			t.Errorf("no folded stack ends in %s\n%s", name, folded.stdout)
		}
	}

	index, err := os.ReadFile(filepath.Join(release, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	head := []byte("<head>")
	if !bytes.Contains(index, head) {
		t.Fatalf("speedscope's index.html has no <head>")
	}
	// speedscope says "Unrecognized format" in an alert, which would
	// block headless Chromium; the page writes it into the DOM instead
	index = bytes.Replace(index, head, append(head, alertToDOM...), 1)
	mux := http.NewServeMux()
	mux.Handle("/", http.FileServer(http.Dir(release)))
	mux.HandleFunc("/index.html", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(index)
	})
	mux.HandleFunc("/perfmap-jit.folded", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte(folded.stdout))
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	page := func(view string) string {
		return srv.URL + "/index.html#profileURL=" + url.QueryEscape(srv.URL+"/perfmap-jit.folded") +
			"&title=perfmap-jit&view=" + view
	}

	dom := runChromium(t, chromium, "--dump-dom", page("sandwich"))
	rows := sandwichRows(t, dom)
	got := map[string]weight{}
	for _, row := range rows {
		got[row.name] = row.weight
	}
	if !maps.Equal(got, want) {
		t.Errorf("speedscope's Sandwich table (name: total self) %v, want %v (from the folded lines)\n%s", got, want, folded.stdout)
	}

	shotFile := filepath.Join(t.TempDir(), "speedscope.png")
	runChromium(t, chromium, "--window-size=1000,240", "--force-device-scale-factor=1", "--screenshot="+shotFile, page("left-heavy"))
	shot, err := os.ReadFile(shotFile)
	if err != nil {
		t.Fatalf("chromium wrote no screenshot: %v", err)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The canvas's colours are within a few units of the swatches'.
	// Each JIT function's area is in proportion to its instructions:
	// pixels per instruction within 20% of their mean.
	var jit []sandwichRow
	var perInsn []float64
	for _, row := range rows {
		if calls[row.name] == 0 {
			continue
		}
		a := colourArea(img, row.colour, 10)
		t.Logf("flame graph: %s (%d calls, %d instructions) in colour %v: %d pixels", row.name, calls[row.name], row.self, row.colour, a)
		jit = append(jit, row)
		perInsn = append(perInsn, float64(a)/float64(row.self))
	}
	if len(jit) != len(calls) {
		t.Fatalf("flame graph: %d of the program's %d JIT functions in the Sandwich table", len(jit), len(calls))
	}
	mean := 0.0
	for _, p := range perInsn {
		mean += p / float64(len(perInsn))
	}
	if mean < 100 {
		t.Errorf("flame graph: %.0f pixels per instruction in the JIT functions' colours, want 100 or more", mean)
	}
	for i, row := range jit {
		if perInsn[i] < 0.8*mean || perInsn[i] > 1.2*mean {
			t.Errorf("flame graph: %s: %.0f pixels per instruction, mean of the JIT functions %.0f", row.name, perInsn[i], mean)
		}
	}
	if out := os.Getenv("PTJIT_SCREENSHOT"); out != "" {
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// alertToDOM replaces window.alert in speedscope's page: the message
// goes into the data-alert attribute of <html>, which sandwichRows reads.
const alertToDOM = `<script>window.alert = m => document.documentElement.setAttribute("data-alert", m)</script>`

// browserTools returns the chromium binary and speedscope's static build,
// or skips (fails under CI) naming what to install.
func browserTools(t *testing.T) (chromium, release string) {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		testenv.Missing(t, "chromium not found: install it (Debian: apt-get install chromium)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	release = filepath.Join(root, "testdata", "web", "node_modules", "speedscope", "dist", "release")
	if _, err := os.Stat(filepath.Join(release, "index.html")); err != nil {
		testenv.Missing(t, "speedscope not installed: run make speedscope (npm ci in testdata/web): %v", err)
	}
	return chromium, release
}

// chromiumTimeout bounds one Chromium run; a hang fails the test.
const chromiumTimeout = 3 * time.Minute

// runChromium runs headless Chromium on a page with args and returns its
// stdout. Speedscope draws with WebGL: without a GPU Chromium needs
// SwiftShader, allowed explicitly; shared memory goes to /tmp, as
// containers' /dev/shm is small; nothing is fetched but the test's pages
// (no component updates, sync or background networking). Virtual time
// stands still while the page fetches the profile; the 2 s of it that
// follow let speedscope parse and render before Chromium dumps or shoots
// the page (each virtual second renders frames: more only costs time).
// The browser runs in a process group of its own with a temporary
// profile and home, and the group is killed afterwards so no renderer
// outlives the test.
func runChromium(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), chromiumTimeout)
	defer cancel()
	argv := append([]string{"--headless=new", "--no-sandbox", "--disable-gpu", "--enable-unsafe-swiftshader",
		"--user-data-dir=" + filepath.Join(home, "profile"), "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--mute-audio", "--hide-scrollbars", "--disable-dev-shm-usage", "--virtual-time-budget=2000"}, args...)
	cmd := exec.CommandContext(ctx, chromium, argv...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Start()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	err = cmd.Wait()
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	t.Logf("chromium %s: %v", args[len(args)-2], time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("chromium %s: still running after %v, killed\nstderr:\n%s", strings.Join(args, " "), chromiumTimeout, errb.String())
	}
	if err != nil {
		t.Fatalf("chromium %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

// weight is a function's instructions in a profile: total with callees,
// self without.
type weight struct{ total, self uint64 }

// foldedWeights computes each frame's weights from folded stacks the way
// a flame graph viewer does: a stack's count goes to its leaf's self and,
// once per stack, to the total of every frame on it.
func foldedWeights(stacks [][]string, counts []uint64) map[string]weight {
	w := map[string]weight{}
	for i, st := range stacks {
		seen := map[string]bool{}
		for _, f := range st {
			if !seen[f] {
				seen[f] = true
				x := w[f]
				x.total += counts[i]
				w[f] = x
			}
		}
		x := w[st[len(st)-1]]
		x.self += counts[i]
		w[st[len(st)-1]] = x
	}
	return w
}

// sandwichRow is one row of speedscope's Sandwich table.
type sandwichRow struct {
	name string
	weight
	colour color.RGBA // the row's swatch, the frame's colour in the flame graph
}

// sandwichRows reads the Sandwich table from speedscope's DOM: rows of
// three cells, "TOTAL (P%)", "SELF (P%)" and a swatch then the name. It
// fails the test on speedscope's error page or when there is no table.
func sandwichRows(t *testing.T, dom string) []sandwichRow {
	t.Helper()
	for _, bad := range []string{"data-alert=", "Something went wrong", "Failed to load", "Drag and drop a profile"} {
		if strings.Contains(dom, bad) {
			t.Fatalf("speedscope shows %q\n%s", bad, dom)
		}
	}
	if !strings.Contains(dom, "<title>perfmap-jit - speedscope</title>") {
		t.Fatalf("speedscope did not load the profile (no title perfmap-jit)\n%s", dom)
	}
	tr := regexp.MustCompile(`(?s)<tr[ >].*?</tr>`)
	td := regexp.MustCompile(`(?s)<td[ >].*?</td>`)
	tag := regexp.MustCompile(`<[^>]*>`)
	num := regexp.MustCompile(`^([0-9][0-9,]*) \(<?[0-9.]+%\)$`)
	swatch := regexp.MustCompile(`background-color: rgb\((\d+), (\d+), (\d+)\)`)
	var rows []sandwichRow
	for _, r := range tr.FindAllString(dom, -1) {
		cells := td.FindAllString(r, -1)
		if len(cells) == 0 {
			continue // the header
		}
		text := make([]string, len(cells))
		for i, c := range cells {
			text[i] = strings.TrimSpace(html.UnescapeString(tag.ReplaceAllString(c, "")))
		}
		tot, self, sw := num.FindStringSubmatch(text[0]), num.FindStringSubmatch(text[min(1, len(text)-1)]), swatch.FindStringSubmatch(r)
		if len(cells) != 3 || tot == nil || self == nil || sw == nil {
			t.Fatalf("Sandwich row %q: want \"TOTAL (P%%)\", \"SELF (P%%)\", a swatch and a name\n%s", text, r)
		}
		row := sandwichRow{name: text[2]}
		row.total, _ = strconv.ParseUint(strings.ReplaceAll(tot[1], ",", ""), 10, 64)
		row.self, _ = strconv.ParseUint(strings.ReplaceAll(self[1], ",", ""), 10, 64)
		var c [3]uint8
		for i := range c {
			v, _ := strconv.ParseUint(sw[i+1], 10, 8)
			c[i] = uint8(v)
		}
		row.colour = color.RGBA{c[0], c[1], c[2], 0xff}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatalf("speedscope: no Sandwich table\n%s", dom)
	}
	return rows
}

// colourArea counts the pixels of img within tol of c in every channel.
func colourArea(img image.Image, c color.RGBA, tol int) int {
	near := func(a, b uint8) bool { return int(a)-int(b) <= tol && int(b)-int(a) <= tol }
	n := 0
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			p := color.RGBAModel.Convert(img.At(x, y)).(color.RGBA)
			if near(p.R, c.R) && near(p.G, c.G) && near(p.B, c.B) {
				n++
			}
		}
	}
	return n
}
