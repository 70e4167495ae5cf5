#include "textflag.h"

// func RDTSC() uint64
TEXT ·RDTSC(SB), NOSPLIT, $0-8
	RDTSC
	SHLQ $32, DX
	ORQ  DX, AX
	MOVQ AX, ret+0(FP)
	RET
