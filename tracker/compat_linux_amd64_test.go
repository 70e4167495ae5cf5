package tracker

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"
)

// TestElfKind checks the ELF-class half of compatKind on headers: a
// 64-bit x86-64 ELF (this test binary) and anything not ELF are
// recordable; ELFCLASS32 is refused, as i386 or as x32 (EM_X86_64).
func TestElfKind(t *testing.T) {
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	header := func(class elf.Class, m elf.Machine) []byte {
		h := make([]byte, 64)
		copy(h, elf.ELFMAG)
		h[elf.EI_CLASS], h[elf.EI_DATA] = byte(class), byte(elf.ELFDATA2LSB)
		binary.LittleEndian.PutUint16(h[18:], uint16(m))
		return h
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"this 64-bit test binary", self[:64], ""},
		{"ELFCLASS64 x86-64", header(elf.ELFCLASS64, elf.EM_X86_64), ""},
		{"ELFCLASS32 i386", header(elf.ELFCLASS32, elf.EM_386), "a 32-bit (compat-mode) program"},
		{"ELFCLASS32 x86-64 (x32)", header(elf.ELFCLASS32, elf.EM_X86_64), "an x32 program"},
		{"a script", []byte("#!/bin/sh\necho hello, this is long enough\n"), ""},
		{"short", []byte("\x7fELF\x01"), ""},
	} {
		if got := elfKind(bytes.NewReader(c.b)); got != c.want {
			t.Errorf("%s: elfKind = %q, want %q", c.name, got, c.want)
		}
	}
}
