package layers

// Allowed maps each package of the module (relative to the module path)
// to the module packages its non-test files may import. The order of the
// groups is the order of the layers, bottom up.
var Allowed = map[string][]string{
	// Platform guard and small leaves.
	"internal/platform": nil,
	"internal/elfnote":  nil,
	"internal/layers":   nil,
	"internal/testenv":  nil, // test helpers: standard library only
	"internal/testmain": nil,

	// Formats and storage: the bottom of the pipeline.
	"ptpkt":                nil,
	"x86":                  nil,
	"x86/att":              {"x86"},
	"x86/internal/x86test": {"x86"},
	"clock":                {"internal/platform"},
	"perf":                 {"internal/platform", "ptpkt"}, // ptpkt.Config: the PT configuration perf.data records
	"db":                   {"clock"},
	"snapshot":             {"internal/platform", "internal/elfnote"},
	"bpfev":                {"internal/platform", "clock"}, // eBPF events of the address-space calls; the tracker reads them

	// The decoder and the software PT generator, above the formats.
	"decode": {"ptpkt", "x86"},
	"ptfmt":  {"decode", "ptpkt", "x86", "x86/att", "perf"},
	"softpt": {"ptpkt", "x86", "perf"},

	// The recorder: tracker, then the launcher above it.
	"tracker/internal/x86emu": nil,
	"tracker": {"internal/platform", "clock", "db", "snapshot", "softpt", "perf", "x86", "x86/att", "bpfev",
		"tracker/internal/x86emu"},
	"ptrun": {"internal/platform", "clock", "db", "snapshot", "softpt", "perf", "tracker", "bpfev"},

	// Opening a recording for decoding, then the CLI on top.
	"recording": {"internal/elfnote", "db", "perf", "ptpkt", "x86", "x86/att", "decode", "ptfmt"},
	"cmd/ptjit": {"internal/platform", "internal/elfnote", "clock", "db", "perf", "ptpkt", "x86", "x86/att",
		"decode", "ptfmt", "softpt", "tracker", "ptrun", "recording", "bpfev"},
	"cmd/ptjit-bench": {"db", "perf"}, // perf: the decoders row writes a perf.data
}
