package tracker

import (
	"golang.org/x/sys/unix"
)

// evalFilter runs a compiled filter on (arch, nr, args) in
// golang.org/x/net/bpf's classic BPF virtual machine (filterVM, as
// refusedBy runs the program's filters): an interpreter written apart
// from Compile, so the tests check the filter's meaning rather than
// Compile against its own reading of its opcodes.
func evalFilter(prog []unix.SockFilter, arch uint32, nr int, args [6]uint64) (uint32, error) {
	vm, err := filterVM(prog)
	if err != nil {
		return 0, err
	}
	data := seccompData(nr, arch, 0, args)
	ret, err := vm.Run(data[:])
	return uint32(ret), err
}
