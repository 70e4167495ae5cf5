# ptjit — see README.md.
GO      ?= go
BIN     := bin/ptjit

.PHONY: all ptjit testdata speedscope test lint bench demo clean
all: ptjit testdata

ptjit:
	$(GO) build -o $(BIN) ./cmd/ptjit

testdata:
	$(MAKE) -C testdata

# speedscope, the flame graph viewer the browser test opens --folded output
# in, at the version testdata/web/package-lock.json pins; npm ci needs the
# network the first time only (.ci/run runs this target).
SPEEDSCOPE := testdata/web/node_modules/.installed
speedscope: $(SPEEDSCOPE)
$(SPEEDSCOPE): testdata/web/package.json testdata/web/package-lock.json
	cd testdata/web && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# The differential tests against libipt (cgo) run where libipt-dev is
# installed (.ci/run installs it; under CI=true a missing header fails the
# run instead of skipping them); every fuzz target runs FUZZTIME inputs;
# the packages with goroutines of their own also run under the race
# detector. FUZZTIME is a count, not a duration: with a duration, Go 1.26's
# fuzz coordinator can fail a target with a bare "context deadline
# exceeded" at the deadline, with no failing input (golang/go#75804, fixed
# in Go 1.27; it failed FuzzPerfDataReader in a CI run of 2026-11-25). A
# count has no deadline to race. 300000 inputs take 5-25 s per target here.
LIBIPT   := $(if $(wildcard /usr/include/intel-pt.h),-tags libipt)
FUZZTIME ?= 300000x
RACE_PKGS := ./db/ ./decode/ ./ptfmt/ ./tracker/
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
test: all lint
	@if [ -n "$$CI" ] && [ -z "$(LIBIPT)" ]; then echo "make test: CI=true but /usr/include/intel-pt.h is missing: install libipt-dev (the libipt differential tests would not run)"; exit 1; fi
	$(GO) test -count=1 -timeout 80m $(LIBIPT) ./...
	$(GO) test -count=1 -timeout 30m -race $(LIBIPT) $(RACE_PKGS)
	$(GO) test -run '^$$' -fuzz '^FuzzPacketDecoder$$' -fuzztime $(FUZZTIME) ./ptpkt/
	$(GO) test -run '^$$' -fuzz '^FuzzFlowDecoder$$' -fuzztime $(FUZZTIME) ./decode/
	$(GO) test -run '^$$' -fuzz '^FuzzPerfDataReader$$' -fuzztime $(FUZZTIME) ./perf/
	$(GO) test -run '^$$' -fuzz '^FuzzPtdump$$' -fuzztime $(FUZZTIME) ./ptfmt/

# Static checks: formatting, go vet (with and without the libipt tag),
# staticcheck's default checks, and go.mod/go.sum as go mod tidy leaves them.
lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags libipt ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff

# The quick start's main job: record ubpf-test (a uBPF-style JIT) with the
# best PT backend this machine has, then show its code history and the
# decoded flow through the JIT loop.
DEMO_PT := $(shell test -e /sys/bus/event_source/devices/intel_pt/type && echo intel || echo soft)
demo: all
	./$(BIN) run --pt=$(DEMO_PT) -o ptjit.out -- ./testdata/bin/ubpf-test
	@echo; echo '$$ ptjit history -i ptjit.out'
	@./$(BIN) history -i ptjit.out
	@echo; echo '$$ ptjit decode -i ptjit.out | grep -m 24 region    # the first JIT instructions'
	@./$(BIN) decode -i ptjit.out | grep -m 24 region
	@echo; echo '$$ ptjit decode -i ptjit.out --stat'
	@./$(BIN) decode -i ptjit.out --stat

# Benchmarks: ptjit run overhead and stop costs (a table; see cmd/ptjit-bench),
# then the decoder against libipt (needs libipt-dev for the cgo comparison).
bench: all
	$(GO) run ./cmd/ptjit-bench -ptjit $(BIN)
	$(GO) test -run '^$$' -bench . -benchtime 3x $(LIBIPT) ./ptpkt/ ./x86/ ./perf/ ./decode/ ./ptfmt/ ./tracker/

clean:
	rm -rf bin
	$(MAKE) -C testdata clean
