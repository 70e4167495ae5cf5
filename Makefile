# ptjit — see README.md.
GO      ?= go
BIN     := bin/ptjit

.PHONY: all ptjit testdata test bench clean
all: ptjit testdata

ptjit:
	$(GO) build -o $(BIN) ./cmd/ptjit

testdata:
	$(MAKE) -C testdata

test: all
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 60m ./...

clean:
	rm -rf bin
	$(MAKE) -C testdata clean
