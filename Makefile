# ptjit — see README.md.
GO      ?= go
BIN     := bin/ptjit

.PHONY: all ptjit testdata test bench demo clean
all: ptjit testdata

ptjit:
	$(GO) build -o $(BIN) ./cmd/ptjit

testdata:
	$(MAKE) -C testdata

test: all
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 60m ./...

# The quick start's main job: record ubpf-test's JIT code and show its history.
demo: all
	./$(BIN) run -o ptjit.out -- ./testdata/bin/ubpf-test
	./$(BIN) history -i ptjit.out

# Benchmarks: ptjit run overhead and stop costs (a table; see cmd/ptjit-bench),
# then the decoder against libipt (needs libipt-dev for the cgo comparison).
bench: all
	$(GO) run ./cmd/ptjit-bench -ptjit $(BIN)
	$(GO) test -run '^$$' -bench . -benchtime 3x $(if $(wildcard /usr/include/intel-pt.h),-tags libipt) ./decode/

clean:
	rm -rf bin
	$(MAKE) -C testdata clean
