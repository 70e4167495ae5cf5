package bpfev

import (
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// Stopping mode: a process added with AddStopping also gets the signal
// (Config.Signal, with FlagSignaled|FlagStop in its event) at the exit of
// every successful mmap, mprotect and pkey_mprotect that asked for
// PROT_WRITE|PROT_EXEC together, so that its thread stops before it runs
// on. A tracer that has no seccomp filter in the process (ptjit run -p)
// applies there, after the call, what the launch path does at the call's
// entry (W^X: the memory is writable and executable only between the
// call and that stop, while the calling thread has not run on). A call
// that already fell back is signaled once. The processes in stopping
// mode are in a map of their own (ptjit_stopping), looked up only for
// such calls.

// FlagStop: the thread was sent the signal because its process is in
// stopping mode (AddStopping) and the call asked for write and execute.
const FlagStop = 1 << 3

// newStoppingMap makes the map of the processes in stopping mode.
func newStoppingMap() (*ebpf.Map, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Name: "ptjit_stopping", Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 4096})
	if err != nil {
		return nil, fmt.Errorf("bpfev: stopping map: %w", err)
	}
	return m, nil
}

// AddStopping is Add in stopping mode (above). Remove ends both.
func (s *Source) AddStopping(tgid int) error {
	if err := s.Add(tgid); err != nil {
		return err
	}
	if err := s.stopping.Put(uint32(tgid), uint8(1)); err != nil {
		return fmt.Errorf("bpfev: add process %d in stopping mode: %w", tgid, err)
	}
	return nil
}

// withStops inserts, before the instruction named "submit" (the call
// record's commit, which every path reaches with the record in R9), the
// stopping mode's signal; "submit" then names the block's first
// instruction, and the commit is "commit_record".
func withStops(ins asm.Instructions, stopping *ebpf.Map, sig unix.Signal) asm.Instructions {
	R0, R1, R2, R9, FP := asm.R0, asm.R1, asm.R2, asm.R9, asm.R10
	at := -1
	for i, in := range ins {
		if in.Symbol() == "submit" {
			at = i
			break
		}
	}
	if at < 0 {
		panic("bpfev: no submit in the program")
	}
	block := asm.Instructions{
		asm.LoadMem(R1, R9, offRet, asm.DWord).WithSymbol("submit"),
		asm.JGE.Imm(R1, -4095, "commit_record"), // unsigned: -errno
		asm.LoadMem(R1, R9, offNr, asm.DWord),
		asm.JEq.Imm(R1, unix.SYS_MMAP, "stop_prot"),
		asm.JEq.Imm(R1, unix.SYS_MPROTECT, "stop_prot"),
		asm.JEq.Imm(R1, unix.SYS_PKEY_MPROTECT, "stop_prot"),
		asm.Ja.Label("commit_record"),
		asm.LoadMem(R1, R9, offArgs+16, asm.DWord).WithSymbol("stop_prot"),
		asm.And.Imm(R1, unix.PROT_WRITE|unix.PROT_EXEC),
		asm.JNE.Imm(R1, unix.PROT_WRITE|unix.PROT_EXEC, "commit_record"),
		asm.LoadMem(R1, R9, offFlags, asm.Word),
		asm.And.Imm(R1, FlagSignaled),
		asm.JNE.Imm(R1, 0, "commit_record"),
		asm.LoadMem(R1, R9, offTGID, asm.Word),
		asm.StoreMem(FP, slotKey, R1, asm.Word),
		asm.LoadMapPtr(R1, stopping.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(R0, 0, "commit_record"),
		asm.Mov.Imm(R1, int32(sig)),
		asm.FnSendSignalThread.Call(),
		asm.JNE.Imm(R0, 0, "commit_record"),
		asm.LoadMem(R1, R9, offFlags, asm.Word),
		asm.Or.Imm(R1, FlagSignaled|FlagStop),
		asm.StoreMem(R9, offFlags, R1, asm.Word),
	}
	out := make(asm.Instructions, 0, len(ins)+len(block))
	out = append(out, ins[:at]...)
	out = append(out, block...)
	out = append(out, ins[at].WithSymbol("commit_record"))
	return append(out, ins[at+1:]...)
}
