package tracker

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// evalFilter runs a compiled filter on (arch, nr, args) in
// golang.org/x/net/bpf's classic BPF virtual machine: an interpreter
// written apart from Compile, so the tests check the filter's meaning
// rather than Compile against its own reading of its opcodes.
//
// The input is struct seccomp_data (int nr; u32 arch; u64
// instruction_pointer; u64 args[6]). The kernel's 32-bit loads read it in
// host order (little-endian: an argument's low word at its offset, the high
// word 4 bytes on); the VM's loads read network order, so each 32-bit word
// is stored here big-endian at the offset where the kernel would find it.
func evalFilter(prog []unix.SockFilter, arch uint32, nr int, args [6]uint64) (uint32, error) {
	raw := make([]bpf.RawInstruction, len(prog))
	for i, in := range prog {
		raw[i] = bpf.RawInstruction{Op: in.Code, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		for i, in := range insns {
			if r, unknown := in.(bpf.RawInstruction); unknown {
				return 0, fmt.Errorf("pc %d: opcode %#x is not classic BPF", i, r.Op)
			}
		}
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		return 0, err
	}
	var data [64]byte
	word := func(off int, v uint32) { binary.BigEndian.PutUint32(data[off:], v) }
	word(offNr, uint32(nr))
	word(offArch, arch)
	for i, a := range args {
		word(offArgs+8*i, uint32(a))
		word(offArgs+8*i+4, uint32(a>>32))
	}
	ret, err := vm.Run(data[:])
	return uint32(ret), err
}
