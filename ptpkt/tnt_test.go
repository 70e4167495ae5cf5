package ptpkt

import (
	"strings"
	"testing"
)

func TestTNTCache(t *testing.T) {
	type step struct {
		add      bool
		bits     uint64
		size     int
		wantErr  error
		wantBits string // outcomes of queries after the add, "!" taken "." not taken
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"empty query fails", []step{{wantBits: ""}}},
		{"oldest bit first", []step{{add: true, bits: 0b100, size: 3, wantBits: "!.."}}},
		{"tnt-8 full", []step{{add: true, bits: 0b101101, size: 6, wantBits: "!.!!.!"}}},
		{"tnt-64 47 bits", []step{{add: true, bits: 1<<46 | 1, size: 47, wantBits: "!" + strings.Repeat(".", 45) + "!"}}},
		{"add while bits left", []step{
			{add: true, bits: 0b11, size: 2, wantBits: "!"},
			{add: true, bits: 1, size: 1, wantErr: ErrBadContext, wantBits: "!"},
		}},
		{"refill after use", []step{
			{add: true, bits: 0b1, size: 1, wantBits: "!"},
			{add: true, bits: 0b0, size: 1, wantBits: "."},
		}},
		{"zero size", []step{{add: true, bits: 0, size: 0, wantErr: ErrBadPacket}}},
		{"oversized", []step{{add: true, bits: 0, size: 65, wantErr: ErrBadPacket}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c TNTCache
			for i, s := range tt.steps {
				if s.add {
					if err := c.Add(s.bits, s.size); err != s.wantErr {
						t.Fatalf("step %d: add = %v, want %v", i, err, s.wantErr)
					}
				}
				got := ""
				for j := 0; j < len(s.wantBits); j++ {
					taken, err := c.Query()
					if err != nil {
						t.Fatalf("step %d: query %d: %v", i, j, err)
					}
					if taken {
						got += "!"
					} else {
						got += "."
					}
				}
				if got != s.wantBits {
					t.Fatalf("step %d: got %q, want %q", i, got, s.wantBits)
				}
			}
			if !c.Empty() {
				t.Fatal("cache not empty after consuming all bits")
			}
			if _, err := c.Query(); err != ErrBadQuery {
				t.Fatalf("query on empty cache = %v, want %v", err, ErrBadQuery)
			}
		})
	}
}
