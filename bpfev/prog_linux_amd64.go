package bpfev

import (
	"fmt"
	"math/bits"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"
)

// execRule says how a watched call makes memory executable.
type execRule int

const (
	execNever  execRule = iota
	execProt            // mprotect, pkey_mprotect: ret 0, PROT_EXEC in rdx, range rdi+rsi
	execMmap            // mmap: ret an address, PROT_EXEC in rdx, range ret+rsi
	execShmat           // shmat: ret an address, SHM_EXEC in rdx, size unknown here
	execMremap          // mremap: ret an address, its mapping executable, new size in rdx
)

// watch is one syscall the programs follow: an fexit program on its
// x86-64 entry point __x64_sys_<name>.
type watch struct {
	name string
	nr   int
	exec execRule
	// skip: the call is not reported when its third argument's low 32
	// bits equal one of these (madvise's harmless advice).
	skip []uint32
}

// shmExec is SHM_EXEC.
const shmExec = 0o100000

// harmlessAdvice is the madvise advice that never changes the contents
// or mapping of memory (the same list as the seccomp filter's).
var harmlessAdvice = []uint32{
	unix.MADV_NORMAL, unix.MADV_RANDOM, unix.MADV_SEQUENTIAL, unix.MADV_WILLNEED,
	unix.MADV_MERGEABLE, unix.MADV_UNMERGEABLE, unix.MADV_HUGEPAGE, unix.MADV_NOHUGEPAGE,
	unix.MADV_DONTDUMP, unix.MADV_DODUMP, unix.MADV_KEEPONFORK, unix.MADV_COLD,
	unix.MADV_PAGEOUT, 22 /* MADV_POPULATE_READ */, 23, /* MADV_POPULATE_WRITE */
	25, /* MADV_COLLAPSE */
}

// Watched lists the calls the source reports: every call the tracker's
// seccomp filter stops for the address space. (Its other rules, open,
// openat, openat2, process_vm_writev and ptrace, are not address-space
// calls and stay with seccomp.)
var watched = []watch{
	{"mmap", unix.SYS_MMAP, execMmap, nil},
	{"mprotect", unix.SYS_MPROTECT, execProt, nil},
	{"pkey_mprotect", unix.SYS_PKEY_MPROTECT, execProt, nil},
	{"munmap", unix.SYS_MUNMAP, execNever, nil},
	{"mremap", unix.SYS_MREMAP, execMremap, nil},
	{"madvise", unix.SYS_MADVISE, execNever, harmlessAdvice},
	{"brk", unix.SYS_BRK, execNever, nil},
	{"shmat", unix.SYS_SHMAT, execShmat, nil},
	{"shmdt", unix.SYS_SHMDT, execNever, nil},
	{"remap_file_pages", unix.SYS_REMAP_FILE_PAGES, execNever, nil},
}

// Watched returns the syscall numbers the source reports.
func Watched() []int {
	nrs := make([]int, len(watched))
	for i, w := range watched {
		nrs[i] = w.nr
	}
	return nrs
}

// regsOffsets are the offsets in struct pt_regs of the fields the
// programs read, looked up in the kernel's BTF (the programs read the
// pointer the syscall entry point receives, a BTF-typed pointer, so the
// verifier checks each load against the same BTF).
type regsOffsets struct {
	di, si, dx, r10, r8, r9, origAX, ip int16
}

// tsCompat is x86's TS_COMPAT, the thread_info status bit of a 32-bit
// system call in progress.
const tsCompat = 0x0002

// kernelOffsets are the kernel structure offsets the program reads.
type kernelOffsets struct {
	regs     regsOffsets
	tiStatus int16 // task_struct.thread_info.status
	vmFlags  int16 // vm_area_struct.vm_flags
	taskMM   int16 // task_struct.mm
	mmSeq    int16 // mm_struct.mm_lock_seq.sequence
	mmUsers  int16 // mm_struct.mm_users
}

func loadKernelOffsets(spec *btf.Spec) (kernelOffsets, error) {
	regs, err := loadRegsOffsets(spec)
	if err != nil {
		return kernelOffsets{}, err
	}
	var task, ti *btf.Struct
	if err := spec.TypeByName("task_struct", &task); err != nil {
		return kernelOffsets{}, fmt.Errorf("struct task_struct in the kernel's BTF: %w", err)
	}
	if err := spec.TypeByName("thread_info", &ti); err != nil {
		return kernelOffsets{}, fmt.Errorf("struct thread_info in the kernel's BTF: %w", err)
	}
	tiOff, ok := memberOffset(task, "thread_info")
	if !ok {
		return kernelOffsets{}, fmt.Errorf("struct task_struct in the kernel's BTF has no thread_info (CONFIG_THREAD_INFO_IN_TASK)")
	}
	stOff, ok := memberOffset(ti, "status")
	if !ok {
		return kernelOffsets{}, fmt.Errorf("struct thread_info in the kernel's BTF has no status")
	}
	mmOff, ok := memberOffset(task, "mm")
	if !ok {
		return kernelOffsets{}, fmt.Errorf("struct task_struct in the kernel's BTF has no mm")
	}
	var mm *btf.Struct
	if err := spec.TypeByName("mm_struct", &mm); err != nil {
		return kernelOffsets{}, fmt.Errorf("struct mm_struct in the kernel's BTF: %w", err)
	}
	seqOff, ok := memberOffset(mm, "mm_lock_seq")
	seqType, _ := memberType(mm, "mm_lock_seq")
	sc, isStruct := btf.UnderlyingType(seqType).(*btf.Struct)
	if !ok || !isStruct || sc.Size != 4 {
		return kernelOffsets{}, fmt.Errorf("struct mm_struct in the kernel's BTF has no mm_lock_seq seqcount (Linux 6.12 or later with CONFIG_PER_VMA_LOCK): the copy could not detect a concurrent change of the address space")
	}
	usersOff, ok := memberOffset(mm, "mm_users")
	if !ok {
		return kernelOffsets{}, fmt.Errorf("struct mm_struct in the kernel's BTF has no mm_users")
	}
	vmFlags, ok := memberOffset(mustStruct(spec, "vm_area_struct"), "vm_flags")
	if !ok {
		return kernelOffsets{}, fmt.Errorf("struct vm_area_struct in the kernel's BTF has no vm_flags")
	}
	return kernelOffsets{regs: regs, tiStatus: int16(tiOff + stOff), taskMM: int16(mmOff), mmSeq: int16(seqOff), mmUsers: int16(usersOff), vmFlags: int16(vmFlags)}, nil
}

// mustStruct is the struct name of spec, or nil.
func mustStruct(spec *btf.Spec, name string) btf.Type {
	var s *btf.Struct
	if spec.TypeByName(name, &s) != nil {
		return nil
	}
	return s
}

// memberOffset finds a member by name, also inside anonymous structs and
// unions, and returns its offset in bytes.
func memberOffset(t btf.Type, name string) (int, bool) {
	_, off, ok := findMember(t, name)
	return off, ok
}

// memberType is the type of the member memberOffset finds.
func memberType(t btf.Type, name string) (btf.Type, bool) {
	m, _, ok := findMember(t, name)
	return m.Type, ok
}

func findMember(t btf.Type, name string) (btf.Member, int, bool) {
	var members []btf.Member
	switch c := btf.UnderlyingType(t).(type) {
	case *btf.Struct:
		members = c.Members
	case *btf.Union:
		members = c.Members
	}
	for _, m := range members {
		if m.Name == name {
			return m, int(m.Offset.Bytes()), true
		}
		if m.Name == "" {
			if in, off, ok := findMember(m.Type, name); ok {
				return in, int(m.Offset.Bytes()) + off, true
			}
		}
	}
	return btf.Member{}, 0, false
}

func loadRegsOffsets(spec *btf.Spec) (regsOffsets, error) {
	var s *btf.Struct
	if err := spec.TypeByName("pt_regs", &s); err != nil {
		return regsOffsets{}, fmt.Errorf("struct pt_regs in the kernel's BTF: %w", err)
	}
	off := map[string]int16{}
	for _, m := range s.Members {
		off[m.Name] = int16(m.Offset.Bytes())
	}
	var r regsOffsets
	for _, f := range []struct {
		name string
		dst  *int16
	}{{"di", &r.di}, {"si", &r.si}, {"dx", &r.dx}, {"r10", &r.r10}, {"r8", &r.r8}, {"r9", &r.r9}, {"orig_ax", &r.origAX}, {"ip", &r.ip}} {
		o, ok := off[f.name]
		if !ok {
			return regsOffsets{}, fmt.Errorf("struct pt_regs in the kernel's BTF has no field %s", f.name)
		}
		*f.dst = o
	}
	return r, nil
}

// Stack slots of the programs (offsets from R10).
const (
	slotKey     = -8   // u32 map key
	slotExec    = -16  // u64 1 when the call made memory executable
	slotPage    = -24  // the page record being filled (the scratch map's value)
	slotEpoch   = -40  // u64 the process's cache epoch (its tgid map value)
	slotTgid    = -48  // its tgid map value's address
	slotCKey    = -64  // 16 bytes: the page cache key (tgid u32, 0 u32, address u64)
	slotCmp     = -88  // 24 bytes: the compare callback's context (fresh page, cached page, differs)
	slotEntry   = -96  // the page's cache entry (0: none)
	slotScratch = -104 // this CPU's scratch page (token u64, then the page)
	slotLoop    = -144 // 40 bytes: the page loop's context (loop*)
	slotMM      = -152 // readMM's copies
	budgetHard  = 64   // Config.BudgetPages at most (Event.Same has a bit per page)
)

// cacheBudget is the most pages one call may copy through the page
// cache: Event.Same has a bit per page. The copy is a bpf_loop whose
// callback the verifier checks once, whatever the range; when the loop
// was open-coded the verifier walked it once per page, and the cache was
// kept to 16 pages (110 ms an Open, against 65 without the cache; 48
// pages went over the verifier's million instructions).
const cacheBudget = 64

// cmpChunk is the bytes the compare callback compares per call (64
// words, their differences or'd together, one branch at the end): a page
// is pageSize/cmpChunk calls of bpf_loop. Eight words a call cost the
// traced thread a third more system time on LuaJIT's bench.lua than
// sending every page; a branch per word made the verifier walk the
// callback once per word (36 ms against 30 ms an Open, 2026-11-26).
const cmpChunk = 512

// bpf_ringbuf_submit's flags and bpf_ringbuf_query's BPF_RB_AVAIL_DATA.
const (
	rbNoWakeup    = 1
	rbForceWakeup = 2
	rbAvailData   = 0
)

// maxEventBytes is the most ring space one event takes: its call record
// and budget page records, each with the ring's 8-byte header.
func maxEventBytes(budget int) int { return callSize + 8 + budget*(pageRecSize+8) }

// bpf_map_update_elem's BPF_ANY.
const bpfAny = 0

// Exec kinds in the slotExec stack slot.
const (
	slotExecNone  = 0
	slotExecArgs  = 1 // range at args[0]
	slotExecRet   = 2 // range at the result
	slotExecShmat = 3 // range of unknown size
	slotExecMove  = 4 // range at the result, its size args[2] (mremap)
	slotVMFlags   = -32
	vmExec        = 0x4 // VM_EXEC
)

// program returns the BTF raw tracepoint program on sys_exit, whose
// context is the tracepoint's arguments { struct pt_regs *regs; long ret }:
// regs is the thread's user registers (a BTF-typed pointer, so every
// load from it is checked by the verifier against the kernel's BTF).
//
// Registers: R6 the context (then the page count), R7 pid_tgid (then the
// page index), R8 pt_regs (then the range's address), R9 the call
// record.
func program(ws []watch, off kernelOffsets, m progMaps, sig unix.Signal, budget, wakeBytes int, ignore uint64) asm.Instructions {
	R0, R1, R2, R3, R4, R6, R7, R8, R9, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R6, asm.R7, asm.R8, asm.R9, asm.R10
	tgids, ring, counters := m.tgids, m.ring, m.counters
	regs := off.regs
	loadRet := func() asm.Instruction { return asm.LoadMem(R1, R6, 8, asm.DWord) } // R1 = the call's result
	ins := asm.Instructions{
		btf.WithFuncMetadata(asm.Mov.Reg(R6, R1).WithSymbol("ptjit_as_exit"), &btf.Func{
			Name: "ptjit_as_exit", Linkage: btf.GlobalFunc,
			Type: &btf.FuncProto{Return: &btf.Int{Name: "int", Size: 4, Encoding: btf.Signed},
				Params: []btf.FuncParam{{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}}},
		}),
		asm.LoadMem(R8, R6, 0, asm.DWord),
		asm.LoadMem(R1, R8, regs.origAX, asm.DWord),
	}
	for _, w := range ws {
		ins = append(ins, asm.JEq.Imm(R1, int32(w.nr), "watched"))
	}
	ins = append(ins,
		asm.Ja.Label("out"),
		// a 32-bit call (int 0x80) has i386 numbers: not ours (the
		// seccomp filter stops every such call)
		asm.FnGetCurrentTaskBtf.Call().WithSymbol("watched"),
		asm.LoadMem(R1, R0, off.tiStatus, asm.Word),
		asm.And.Imm(R1, tsCompat),
		asm.JNE.Imm(R1, 0, "out"),
		asm.FnGetCurrentPidTgid.Call(),
		asm.Mov.Reg(R7, R0),
		asm.RSh.Imm(R0, 32),
		asm.StoreMem(FP, slotKey, R0, asm.Word),
		asm.LoadMapPtr(R1, tgids.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(R0, 0, "out"),
	)
	if ignore != 0 {
		// the tracer's own injected call (Config.Ignore in r9): no
		// record, no copy, no signal
		ins = append(ins,
			asm.LoadMem(R1, R8, regs.r9, asm.DWord),
			asm.LoadImm(R2, int64(ignore), asm.DWord),
			asm.JEq.Reg(R1, R2, "out"),
		)
	}
	ins = append(ins,
		asm.StoreMem(FP, slotTgid, R0, asm.DWord),
		asm.LoadMem(R1, R0, 0, asm.DWord),
		asm.StoreMem(FP, slotEpoch, R1, asm.DWord),
		storeImm64(FP, slotExec, slotExecNone),
		asm.LoadMem(R1, R8, regs.origAX, asm.DWord),
	)
	for _, w := range ws {
		if w.exec != execNever || len(w.skip) > 0 {
			ins = append(ins, asm.JEq.Imm(R1, int32(w.nr), "decide_"+w.name))
		}
	}
	ins = append(ins, asm.Ja.Label("record"))
	for _, w := range ws {
		if w.exec == execNever && len(w.skip) == 0 {
			continue
		}
		first := len(ins)
		if len(w.skip) > 0 {
			ins = append(ins, asm.LoadMem(R1, R8, regs.dx, asm.DWord))
			for _, v := range w.skip {
				ins = append(ins, asm.JEq.Imm32(R1, int32(v), "out"))
			}
		}
		if w.exec == execMremap {
			// executable when the mapping at the result is (bpf_find_vma)
			ins = append(ins,
				loadRet(),
				asm.JGE.Imm(R1, -4095, "record"),
				storeImm64(FP, slotVMFlags, 0),
				asm.FnGetCurrentTaskBtf.Call(),
				asm.Mov.Reg(R1, R0),
				asm.LoadMem(R2, R6, 8, asm.DWord),
				asm.Instruction{OpCode: asm.LoadImmOp(asm.DWord), Dst: R3, Src: asm.PseudoFunc, Constant: -1}.WithReference("vma_exec"),
				asm.Mov.Reg(R4, FP),
				asm.Add.Imm(R4, slotVMFlags),
				asm.Mov.Imm(asm.R5, 0),
				asm.FnFindVma.Call(),
				asm.LoadMem(R1, FP, slotVMFlags, asm.DWord),
				asm.JEq.Imm(R1, 0, "record"),
				storeImm64(FP, slotExec, slotExecMove),
			)
		} else if w.exec != execNever {
			bit, kind := int32(unix.PROT_EXEC), int32(slotExecArgs)
			switch w.exec {
			case execShmat:
				bit, kind = shmExec, slotExecShmat
			case execMmap:
				kind = slotExecRet
			}
			ins = append(ins, asm.LoadMem(R1, R6, 8, asm.DWord))
			if w.exec == execProt {
				ins = append(ins, asm.JNE.Imm(R1, 0, "record"))
			} else {
				ins = append(ins, asm.JGE.Imm(R1, -4095, "record")) // unsigned: -errno
			}
			ins = append(ins,
				asm.LoadMem(R1, R8, regs.dx, asm.DWord),
				asm.And.Imm(R1, bit),
				asm.JEq.Imm(R1, 0, "record"),
				storeImm64(FP, slotExec, kind),
			)
		}
		ins = append(ins, asm.Ja.Label("record"))
		ins[first] = ins[first].WithSymbol("decide_" + w.name)
	}
	ins = append(ins,
		asm.LoadMapPtr(R1, ring.FD()).WithSymbol("record"),
		asm.Mov.Imm(R2, callSize),
		asm.Mov.Imm(R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(R0, 0, "dropped"),
		asm.Mov.Reg(R9, R0),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(R9, offTime, R0, asm.DWord),
		asm.StoreMem(R9, offDone, R0, asm.DWord),
	)
	ins = append(ins, readMM(off, off.mmSeq)...)
	ins = append(ins,
		asm.StoreMem(R9, offSeq, R1, asm.DWord),
		asm.StoreImm(R9, offKind, kindCall, asm.Word),
		asm.StoreImm(R9, offFlags, 0, asm.Word),
		asm.StoreMem(R9, offTID, R7, asm.DWord), // tid, then tgid
	)
	for _, f := range []struct {
		src int16
		dst int16
	}{{regs.ip, offIP}, {regs.origAX, offNr}, {regs.di, offArgs}, {regs.si, offArgs + 8}, {regs.dx, offArgs + 16},
		{regs.r10, offArgs + 24}, {regs.r8, offArgs + 32}, {regs.r9, offArgs + 40}} {
		ins = append(ins, asm.LoadMem(R1, R8, f.src, asm.DWord), asm.StoreMem(R9, f.dst, R1, asm.DWord))
	}
	ins = append(ins,
		asm.LoadMem(R1, R6, 8, asm.DWord),
		asm.StoreMem(R9, offRet, R1, asm.DWord),
		storeImm64(R9, offAddr, 0),
		storeImm64(R9, offLen, 0),
		asm.StoreImm(R9, offNPages, 0, asm.Word),
		asm.StoreImm(R9, offReason, 0, asm.Word),
		asm.StoreImm(R9, offSigErr, 0, asm.Word),
		storeImm64(R9, offEpoch, 0),
		storeImm64(R9, offSame, 0),
		asm.Mov.Imm(R7, 0),
		asm.LoadMem(R2, FP, slotExec, asm.DWord),
		asm.JEq.Imm(R2, slotExecNone, "submit"),
		asm.StoreImm(R9, offFlags, FlagExec, asm.Word),
		asm.Mov.Imm(R1, int32(ReasonUnsized)),
		asm.JEq.Imm(R2, slotExecShmat, "fallbackReason"),
		asm.LoadMem(R8, R9, offArgs, asm.DWord),
		asm.LoadMem(R1, R9, offArgs+8, asm.DWord),
		asm.JEq.Imm(R2, slotExecArgs, "haveRange"),
		asm.LoadMem(R8, R9, offRet, asm.DWord),
		asm.JNE.Imm(R2, slotExecMove, "haveRange"),
		asm.LoadMem(R1, R9, offArgs+16, asm.DWord),
		asm.StoreMem(R9, offAddr, R8, asm.DWord).WithSymbol("haveRange"),
		asm.Add.Imm(R1, pageSize-1),
		asm.RSh.Imm(R1, 12),
		asm.Mov.Reg(R2, R1),
		asm.LSh.Imm(R2, 12),
		asm.StoreMem(R9, offLen, R2, asm.DWord),
		asm.JGT.Imm(R1, int32(budget), "overBudget"),
		asm.Mov.Reg(R6, R1),
		// the copy: a bpf_loop over the pages (page_plain, or page_cached
		// below), whose callback is verified once rather than walked
		// once per page, with its context on this frame's stack
		asm.StoreMem(FP, slotLoop+loopRec, R9, asm.DWord),
		asm.StoreMem(FP, slotLoop+loopAddr, R8, asm.DWord),
		storeImm64(FP, slotLoop+loopReason, 0),
		storeImm64(FP, slotLoop+loopDone, 0),
		asm.LoadMem(R1, FP, slotTgid, asm.DWord),
		asm.StoreMem(FP, slotLoop+loopTgid, R1, asm.DWord),
		// the page cache: only while the process has one thread (no
		// other thread can copy into the same entries meanwhile)
		asm.JGT.Imm(R6, cacheBudget, "plain"),
		asm.LoadMem(R1, FP, slotEpoch, asm.DWord),
		asm.JEq.Imm(R1, 0, "plain"),
	)
	ins = append(ins, readMM(off, off.mmUsers)...)
	ins = append(ins,
		asm.JNE.Imm(R1, 1, "plain"),
		asm.LoadMem(R1, FP, slotEpoch, asm.DWord),
		asm.StoreMem(R9, offEpoch, R1, asm.DWord),
		asm.Mov.Reg(R1, R6),
	)
	ins = append(ins, callLoop("page_cached", slotLoop)...)
	ins = append(ins,
		asm.Ja.Label("looped"),
		asm.Mov.Reg(R1, R6).WithSymbol("plain"),
	)
	ins = append(ins, callLoop("page_plain", slotLoop)...)
	ins = append(ins,
		asm.LoadMem(R7, FP, slotLoop+loopDone, asm.DWord).WithSymbol("looped"),
		asm.LoadMem(R1, FP, slotLoop+loopReason, asm.DWord),
		asm.JNE.Imm(R1, 0, "fallbackReason"),
		asm.Ja.Label("copied"),

		asm.Mov.Imm(R1, int32(ReasonOverBudget)).WithSymbol("overBudget"),
		asm.Ja.Label("fallbackReason"),
		asm.Mov.Imm(R1, int32(ReasonRaced)).WithSymbol("raced"),
		asm.Ja.Label("fallbackReason"),

		// the copy is exact when no thread held mmap_lock for writing
		// at its start, and none took it until its end
		asm.StoreMem(R9, offNPages, R7, asm.Word).WithSymbol("copied"),
	)
	ins = append(ins, readMM(off, off.mmSeq)...)
	ins = append(ins,
		asm.LoadMem(R2, R9, offSeq, asm.DWord),
		asm.JNE.Reg(R1, R2, "raced"),
		asm.And.Imm(R2, 1),
		asm.JNE.Imm(R2, 0, "raced"),
		asm.FnKtimeGetNs.Call(),
		asm.StoreMem(R9, offDone, R0, asm.DWord),
		asm.Ja.Label("submit"),

		asm.StoreMem(R9, offReason, R1, asm.Word).WithSymbol("fallbackReason"),
		asm.StoreMem(R9, offNPages, R7, asm.Word),
		asm.StoreImm(R9, offFlags, FlagExec|FlagFallback, asm.Word),
		asm.Mov.Imm(R1, int32(sig)),
		asm.FnSendSignalThread.Call(),
		asm.StoreMem(R9, offSigErr, R0, asm.Word),
		asm.JNE.Imm(R0, 0, "fallbackDone"),
		asm.StoreImm(R9, offFlags, FlagExec|FlagFallback|FlagSignaled, asm.Word),
		asm.FnKtimeGetNs.Call().WithSymbol("fallbackDone"),
		asm.StoreMem(R9, offDone, R0, asm.DWord),

		// wake a blocked reader when this event took the ring past
		// wakeBytes, and only then (it polls meanwhile): a wakeup is an
		// interrupt, which costs more than the event, and a reader that
		// is behind needs no more of them
		asm.LoadMapPtr(R1, ring.FD()).WithSymbol("submit"),
		asm.Mov.Imm(R2, rbAvailData),
		asm.FnRingbufQuery.Call(),
		asm.Mov.Imm(R2, rbNoWakeup),
		asm.JLT.Imm(R0, int32(wakeBytes), "commit"),
		asm.JGE.Imm(R0, int32(wakeBytes+maxEventBytes(budget)), "commit"),
		asm.Mov.Imm(R2, rbForceWakeup),
		asm.Mov.Reg(R1, R9).WithSymbol("commit"),
		asm.FnRingbufSubmit.Call(),
		asm.Mov.Imm(R0, 0).WithSymbol("out"),
		asm.Return(),

		// no room for the call record: count it, and stop the thread
		// when its bytes were to be copied
		asm.StoreImm(FP, slotKey, 0, asm.Word).WithSymbol("dropped"),
		asm.LoadMapPtr(R1, counters.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, slotKey),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(R0, 0, "droppedCounted"),
		asm.Mov.Imm(R1, 1),
		asm.StoreXAdd(R0, R1, asm.DWord),
		asm.LoadMem(R1, FP, slotExec, asm.DWord).WithSymbol("droppedCounted"),
		asm.JEq.Imm(R1, slotExecNone, "out"),
		asm.Mov.Imm(R1, int32(sig)),
		asm.FnSendSignalThread.Call(),
		asm.Ja.Label("out"),

		// bpf_find_vma's callback: *ctx = vma->vm_flags & VM_EXEC
		btf.WithFuncMetadata(asm.LoadMem(R0, R2, off.vmFlags, asm.DWord).WithSymbol("vma_exec"), &btf.Func{
			Name: "vma_exec", Linkage: btf.StaticFunc,
			Type: &btf.FuncProto{Return: &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed},
				Params: []btf.FuncParam{{Name: "task", Type: &btf.Pointer{Target: &btf.Void{}}},
					{Name: "vma", Type: &btf.Pointer{Target: &btf.Void{}}},
					{Name: "data", Type: &btf.Pointer{Target: &btf.Void{}}}}},
		}),
		asm.And.Imm(R0, vmExec),
		asm.StoreMem(R3, 0, R0, asm.DWord),
		asm.Mov.Imm(R0, 0),
		asm.Return(),
	)
	ins = append(ins, pagePlain(ring)...)
	ins = append(ins, pageCached(m)...)
	// bpf_loop's callback: compare the index'th cmpChunk bytes of the
	// fresh page and the cached one (ctx: their addresses, then a word
	// set to 1, and the loop stopped, at the first difference)
	ins = append(ins,
		btf.WithFuncMetadata(asm.And.Imm(R1, pageSize/cmpChunk-1).WithSymbol("page_cmp"), &btf.Func{
			Name: "page_cmp", Linkage: btf.StaticFunc,
			Type: &btf.FuncProto{Return: &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed},
				Params: []btf.FuncParam{{Name: "index", Type: &btf.Int{Name: "u64", Size: 8}},
					{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}}},
		}),
		asm.LSh.Imm(R1, int32(bits.TrailingZeros(cmpChunk))),
		asm.LoadMem(R3, R2, 0, asm.DWord),
		asm.Add.Reg(R3, R1),
		asm.LoadMem(R4, R2, 8, asm.DWord),
		asm.Add.Reg(R4, R1),
	)
	// the differences of the chunk's words, or'd together: no branch per
	// word, so the verifier walks the callback once, not once per word
	ins = append(ins, asm.Mov.Imm(asm.R5, 0))
	for k := int16(0); k < cmpChunk; k += 8 {
		ins = append(ins,
			asm.LoadMem(R0, R3, k, asm.DWord),
			asm.LoadMem(R1, R4, k, asm.DWord),
			asm.Xor.Reg(R0, R1),
			asm.Or.Reg(asm.R5, R0),
		)
	}
	ins = append(ins,
		asm.JNE.Imm(asm.R5, 0, "page_cmp_differs"),
		asm.Mov.Imm(R0, 0),
		asm.Return(),
		storeImm64(R2, 16, 1).WithSymbol("page_cmp_differs"),
		asm.Mov.Imm(R0, 1),
		asm.Return(),
	)
	return withStops(ins, m.stopping, sig) // stop_linux_amd64.go
}

// progMaps are the maps the program uses.
type progMaps struct {
	tgids, ring, counters *ebpf.Map
	// scratch: a per-CPU array of one page with its user's token (also
	// what a new entry is inserted with before the page's bytes are
	// copied in); cache: a hash (preallocated, no eviction) from (tgid, page
	// address) to the page's last bytes sent to the reader (epoch u64,
	// then the page)
	scratch, cache *ebpf.Map
	// stopping: the processes in stopping mode (stop_linux_amd64.go)
	stopping *ebpf.Map
}

// reservePage reserves a page record in the ring (R0, kept in slotPage;
// none: a jump to full) and fills in its kind, its page's index (R7) and
// the thread (from the call record at R9).
func reservePage(ring *ebpf.Map, full string) asm.Instructions {
	R0, R1, R2, R3, R7, R9, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R7, asm.R9, asm.R10
	return asm.Instructions{
		asm.LoadMapPtr(R1, ring.FD()),
		asm.Mov.Imm(R2, pageRecSize),
		asm.Mov.Imm(R3, 0),
		asm.FnRingbufReserve.Call(),
		asm.JEq.Imm(R0, 0, full),
		asm.StoreMem(FP, slotPage, R0, asm.DWord),
		asm.StoreImm(R0, offKind, kindPage, asm.Word),
		asm.StoreMem(R0, pageOffIdx, R7, asm.Word),
		asm.LoadMem(R1, R9, offTID, asm.DWord),
		asm.StoreMem(R0, pageOffTID, R1, asm.DWord),
	}
}

// storeImm64 is *(u64 *)(dst + off) = imm (sign-extended from 32 bits),
// which asm.StoreImm does not emit.
func storeImm64(dst asm.Register, off int16, imm int32) asm.Instruction {
	return asm.Instruction{OpCode: asm.StoreImmOp(asm.DWord), Dst: dst, Offset: off, Constant: int64(imm)}
}

// The page loop's context (at slotLoop on the program's stack, the
// callbacks' second argument): the call record, the range's address, the
// reason a page stopped the copy (0: none stopped it), the pages done, the
// process's tgid map value (its epoch, set to 0 to end its caching).
const (
	loopRec    = 0
	loopAddr   = 8
	loopReason = 16
	loopDone   = 24
	loopTgid   = 32
)

// loopCallback is the start of a bpf_loop callback named name: (index,
// ctx) with ctx the page loop's context; R6 takes ctx, R7 the index, R9
// the call record and R8 the range's address (a callback has registers
// of its own).
func loopCallback(name string) asm.Instructions {
	R1, R2, R6, R7, R8, R9 := asm.R1, asm.R2, asm.R6, asm.R7, asm.R8, asm.R9
	return asm.Instructions{
		btf.WithFuncMetadata(asm.Mov.Reg(R6, R2).WithSymbol(name), &btf.Func{
			Name: name, Linkage: btf.StaticFunc,
			Type: &btf.FuncProto{Return: &btf.Int{Name: "long", Size: 8, Encoding: btf.Signed},
				Params: []btf.FuncParam{{Name: "index", Type: &btf.Int{Name: "u64", Size: 8}},
					{Name: "ctx", Type: &btf.Pointer{Target: &btf.Void{}}}}},
		}),
		asm.Mov.Reg(R7, R1),
		asm.LoadMem(R9, R6, loopRec, asm.DWord),
		asm.LoadMem(R8, R6, loopAddr, asm.DWord),
	}
}

// loopEnd ends a page loop callback whose labels start with name: next
// counts the page done and goes on; absent, full and (with raced) raced
// record their reason and end the loop.
func loopEnd(name string, raced bool) asm.Instructions {
	R0, R1, R6, R7 := asm.R0, asm.R1, asm.R6, asm.R7
	ins := asm.Instructions{
		asm.Add.Imm(R7, 1).WithSymbol(name + "_next"),
		asm.StoreMem(R6, loopDone, R7, asm.DWord),
		asm.Mov.Imm(R0, 0),
		asm.Return(),
		asm.Mov.Imm(R1, int32(ReasonNotPresent)).WithSymbol(name + "_absent"),
		asm.Ja.Label(name + "_stop"),
		asm.Mov.Imm(R1, int32(ReasonRingFull)).WithSymbol(name + "_full"),
	}
	if raced {
		ins = append(ins,
			asm.Ja.Label(name+"_stop"),
			asm.Mov.Imm(R1, int32(ReasonRaced)).WithSymbol(name+"_raced"),
		)
	}
	return append(ins,
		asm.StoreMem(R6, loopReason, R1, asm.DWord).WithSymbol(name+"_stop"),
		asm.Mov.Imm(R0, 1),
		asm.Return(),
	)
}

// pagePlain is the page loop's callback without the cache: the index'th
// page read into a page record of its own.
func pagePlain(ring *ebpf.Map) asm.Instructions {
	R0, R1, R2, R3, R7, R8, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R7, asm.R8, asm.R10
	ins := loopCallback("page_plain")
	ins = append(ins, reservePage(ring, "page_plain_full")...)
	ins = append(ins,
		storeImm64(R0, pageOffEp, 0),
		asm.Mov.Reg(R3, R7),
		asm.LSh.Imm(R3, 12),
		asm.Add.Reg(R3, R8),
		asm.StoreMem(R0, pageOffVA, R3, asm.DWord),
		asm.Mov.Reg(R1, R0),
		asm.Add.Imm(R1, pageDataOff),
		asm.Mov.Imm(R2, pageSize),
		asm.FnProbeReadUser.Call(),
		asm.LoadMem(R1, FP, slotPage, asm.DWord),
		asm.JNE.Imm(R0, 0, "page_plain_discard"),
		asm.Mov.Imm(R2, rbNoWakeup), // the call record's commit wakes the reader
		asm.FnRingbufSubmit.Call(),
		asm.Ja.Label("page_plain_next"),
		asm.Mov.Imm(R2, 0).WithSymbol("page_plain_discard"),
		asm.FnRingbufDiscard.Call(),
		asm.Ja.Label("page_plain_absent"),
	)
	return append(ins, loopEnd("page_plain", false)...)
}

// pageCached is the page loop's callback with the cache: the index'th page
// read into this CPU's scratch page and compared with its entry; one that
// equals it is only a bit in offSame; the others go into a page record
// and the cache. The scratch starts with its user's token (the thread,
// offTID): another task that runs the program on this CPU while this one
// is preempted writes its own first, so a token that changed while the
// page was in use means the page may be another's, and the call falls
// back (ReasonRaced).
func pageCached(m progMaps) asm.Instructions {
	R0, R1, R2, R3, R4, R6, R7, R8, R9, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R4, asm.R6, asm.R7, asm.R8, asm.R9, asm.R10
	ins := loopCallback("page_cached")
	ins = append(ins,
		asm.StoreImm(FP, slotKey, 0, asm.Word),
	)
	ins = append(ins, mapLookup(m.scratch, slotKey)...)
	ins = append(ins,
		asm.JEq.Imm(R0, 0, "page_cached_absent"),
		asm.StoreMem(FP, slotScratch, R0, asm.DWord),
		asm.LoadMem(R1, R9, offTID, asm.DWord),
		asm.StoreMem(R0, 0, R1, asm.DWord),
		asm.Mov.Reg(R3, R7),
		asm.LSh.Imm(R3, 12),
		asm.Add.Reg(R3, R8),
		asm.StoreMem(FP, slotCKey+8, R3, asm.DWord),
		asm.LoadMem(R1, R9, offTGID, asm.Word),
		asm.StoreMem(FP, slotCKey, R1, asm.DWord), // tgid, then 0
		asm.Mov.Reg(R1, R0),
		asm.Add.Imm(R1, 8),
		asm.Mov.Imm(R2, pageSize),
		asm.FnProbeReadUser.Call(),
		asm.JNE.Imm(R0, 0, "page_cached_absent"),
		storeImm64(FP, slotEntry, 0),
	)
	ins = append(ins, mapLookup(m.cache, slotCKey)...)
	ins = append(ins,
		asm.JEq.Imm(R0, 0, "page_cached_changed"),
		asm.StoreMem(FP, slotEntry, R0, asm.DWord),
		asm.LoadMem(R1, R0, 0, asm.DWord),
		asm.LoadMem(R2, R9, offEpoch, asm.DWord),
		asm.JNE.Reg(R1, R2, "page_cached_changed"),
		// compare, a word at a time: equal bytes, never a hash
		asm.Add.Imm(R0, 8),
		asm.StoreMem(FP, slotCmp+8, R0, asm.DWord),
		asm.LoadMem(R1, FP, slotScratch, asm.DWord),
		asm.Add.Imm(R1, 8),
		asm.StoreMem(FP, slotCmp, R1, asm.DWord),
		storeImm64(FP, slotCmp+16, 0),
		asm.Mov.Imm(R1, pageSize/cmpChunk),
	)
	ins = append(ins, callLoop("page_cmp", slotCmp)...)
	ins = append(ins,
		asm.JNE.Imm(R0, pageSize/cmpChunk, "page_cached_changed"), // stopped early: a difference
		asm.LoadMem(R1, FP, slotCmp+16, asm.DWord),
		asm.JNE.Imm(R1, 0, "page_cached_changed"),
		asm.LoadMem(R1, FP, slotScratch, asm.DWord),
		asm.LoadMem(R1, R1, 0, asm.DWord),
		asm.LoadMem(R2, R9, offTID, asm.DWord),
		asm.JNE.Reg(R1, R2, "page_cached_raced"),
		asm.Mov.Imm(R1, 1),
		asm.LSh.Reg(R1, R7),
		asm.LoadMem(R2, R9, offSame, asm.DWord),
		asm.Or.Reg(R2, R1),
		asm.StoreMem(R9, offSame, R2, asm.DWord),
		asm.Ja.Label("page_cached_next"),

		// changed, or no entry: a page record with the scratch's bytes,
		// then (the token still this thread's) the entry takes the
		// record's bytes and the epoch (inserted when missing, while the
		// map has room), then the record is committed (a commit cannot
		// fail): the entry holds what the reader is sent. A copy into the
		// entry that fails deletes it; a delete that fails ends the
		// process's caching (its epoch becomes 0).
	)
	rec := reservePage(m.ring, "page_cached_full")
	rec[0] = rec[0].WithSymbol("page_cached_changed")
	ins = append(ins, rec...)
	ins = append(ins,
		asm.LoadMem(R1, R9, offEpoch, asm.DWord),
		asm.StoreMem(R0, pageOffEp, R1, asm.DWord),
		asm.LoadMem(R1, FP, slotCKey+8, asm.DWord),
		asm.StoreMem(R0, pageOffVA, R1, asm.DWord),
		asm.Mov.Reg(R1, R0),
		asm.Add.Imm(R1, pageDataOff),
		asm.Mov.Imm(R2, pageSize),
		asm.LoadMem(R3, FP, slotScratch, asm.DWord),
		asm.Add.Imm(R3, 8),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(R0, 0, "page_cached_discard"),
		asm.LoadMem(R1, FP, slotScratch, asm.DWord),
		asm.LoadMem(R1, R1, 0, asm.DWord),
		asm.LoadMem(R2, R9, offTID, asm.DWord),
		asm.JNE.Reg(R1, R2, "page_cached_discard"),
		asm.LoadMem(R1, FP, slotEntry, asm.DWord),
		asm.JNE.Imm(R1, 0, "page_cached_store"),
		asm.LoadMapPtr(R1, m.cache.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, slotCKey),
		asm.LoadMem(R3, FP, slotScratch, asm.DWord),
		asm.Mov.Imm(R4, bpfAny),
		asm.FnMapUpdateElem.Call(),
		asm.JNE.Imm(R0, 0, "page_cached_send"), // full: no entry
	)
	ins = append(ins, mapLookup(m.cache, slotCKey)...)
	ins = append(ins,
		asm.JEq.Imm(R0, 0, "page_cached_send"),
		asm.StoreMem(FP, slotEntry, R0, asm.DWord),
		asm.LoadMem(R1, FP, slotEntry, asm.DWord).WithSymbol("page_cached_store"),
		asm.Add.Imm(R1, 8),
		asm.Mov.Imm(R2, pageSize),
		asm.LoadMem(R3, FP, slotPage, asm.DWord),
		asm.Add.Imm(R3, pageDataOff),
		asm.FnProbeReadKernel.Call(),
		asm.JNE.Imm(R0, 0, "page_cached_unstore"),
		asm.LoadMem(R1, FP, slotEntry, asm.DWord),
		asm.LoadMem(R2, R9, offEpoch, asm.DWord),
		asm.StoreMem(R1, 0, R2, asm.DWord),
		asm.Ja.Label("page_cached_send"),
		asm.LoadMapPtr(R1, m.cache.FD()).WithSymbol("page_cached_unstore"),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, slotCKey),
		asm.FnMapDeleteElem.Call(),
		asm.JEq.Imm(R0, 0, "page_cached_send"),
		asm.LoadMem(R1, R6, loopTgid, asm.DWord),
		storeImm64(R1, 0, 0),
		asm.LoadMem(R1, FP, slotPage, asm.DWord).WithSymbol("page_cached_send"),
		asm.Mov.Imm(R2, rbNoWakeup), // the call record's commit wakes the reader
		asm.FnRingbufSubmit.Call(),
		asm.Ja.Label("page_cached_next"),
		asm.LoadMem(R1, FP, slotPage, asm.DWord).WithSymbol("page_cached_discard"),
		asm.Mov.Imm(R2, 0),
		asm.FnRingbufDiscard.Call(),
		asm.Ja.Label("page_cached_raced"),
	)
	return append(ins, loopEnd("page_cached", true)...)
}

// readMM is R1 = the u32 at offset field of the current task's mm (0 when
// it has none), read with bpf_probe_read_kernel from an untyped task
// pointer. A load of task->mm through the BTF-typed pointer makes the
// verifier look for "mm_struct__safe_trusted" and
// "mm_struct__safe_trusted_or_null" by name among every type of the
// kernel's BTF (btf_nested_type_is_trusted, a linear search) each time
// it walks the load: with the three such loads, most of an Open's 47 ms
// went there (perf, 2026-11-26). A probe read costs the traced thread tens
// of nanoseconds.
func readMM(off kernelOffsets, field int16) asm.Instructions {
	R0, R1, R2, R3, FP := asm.R0, asm.R1, asm.R2, asm.R3, asm.R10
	return asm.Instructions{
		storeImm64(FP, slotMM, 0),
		asm.FnGetCurrentTask.Call(),
		asm.Mov.Reg(R3, R0),
		asm.Add.Imm(R3, int32(off.taskMM)),
		asm.Mov.Reg(R1, FP),
		asm.Add.Imm(R1, slotMM),
		asm.Mov.Imm(R2, 8),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(R3, FP, slotMM, asm.DWord),
		storeImm64(FP, slotMM, 0),
		asm.Add.Imm(R3, int32(field)), // no mm: a read of a low address, which fails (and zeroes)
		asm.Mov.Reg(R1, FP),
		asm.Add.Imm(R1, slotMM),
		asm.Mov.Imm(R2, 4),
		asm.FnProbeReadKernel.Call(),
		asm.LoadMem(R1, FP, slotMM, asm.Word),
	}
}

// callLoop is bpf_loop(R1, fn, the stack at slot, 0): R1, the iterations,
// is set by the caller.
func callLoop(fn string, slot int16) asm.Instructions {
	R2, R3, R4, FP := asm.R2, asm.R3, asm.R4, asm.R10
	return asm.Instructions{
		asm.Instruction{OpCode: asm.LoadImmOp(asm.DWord), Dst: R2, Src: asm.PseudoFunc, Constant: -1}.WithReference(fn),
		asm.Mov.Reg(R3, FP),
		asm.Add.Imm(R3, int32(slot)),
		asm.Mov.Imm(R4, 0),
		asm.FnLoop.Call(),
	}
}

// mapLookup is R0 = bpf_map_lookup_elem(m, the key on the stack at slot).
func mapLookup(m *ebpf.Map, slot int16) asm.Instructions {
	R1, R2, FP := asm.R1, asm.R2, asm.R10
	return asm.Instructions{
		asm.LoadMapPtr(R1, m.FD()),
		asm.Mov.Reg(R2, FP),
		asm.Add.Imm(R2, int32(slot)),
		asm.FnMapLookupElem.Call(),
	}
}
