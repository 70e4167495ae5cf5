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

clean:
	rm -rf bin
	$(MAKE) -C testdata clean
