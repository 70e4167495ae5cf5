# ptjit — see README.md.
GO      ?= go
BIN     := bin/ptjit

.PHONY: all ptjit testdata test bench demo clean
all: ptjit testdata

ptjit:
	$(GO) build -o $(BIN) ./cmd/ptjit

testdata:
	$(MAKE) -C testdata

# The differential tests against libipt (cgo) run where libipt-dev is
# installed (.ci/run installs it); every fuzz target runs for FUZZTIME.
LIBIPT   := $(if $(wildcard /usr/include/intel-pt.h),-tags libipt)
FUZZTIME ?= 20s
test: all
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 60m $(LIBIPT) ./...
	$(GO) test -run '^$$' -fuzz '^FuzzPacketDecoder$$' -fuzztime $(FUZZTIME) ./decode/
	$(GO) test -run '^$$' -fuzz '^FuzzFlowDecoder$$' -fuzztime $(FUZZTIME) ./decode/
	$(GO) test -run '^$$' -fuzz '^FuzzPerfDataReader$$' -fuzztime $(FUZZTIME) ./decode/

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
	$(GO) test -run '^$$' -bench . -benchtime 3x $(LIBIPT) ./decode/ ./tracker/

clean:
	rm -rf bin
	$(MAKE) -C testdata clean
