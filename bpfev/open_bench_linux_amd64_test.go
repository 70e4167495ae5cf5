package bpfev

import "testing"

// BenchmarkOpen measures Open and Close: the kernel BTF, the maps, the
// verifier, the attach (what ptjit run --events=bpf adds before the
// program starts).
func BenchmarkOpen(b *testing.B) {
	if err := Available(); err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		s, err := Open(Config{})
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
}
