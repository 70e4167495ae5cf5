package decode

import "testing"

func TestRetStack(t *testing.T) {
	tests := []struct {
		name string
		push []uint64
		pops int
		want []uint64 // popped values; a trailing 0 means "empty"
	}{
		{"empty", nil, 1, []uint64{0}},
		{"lifo", []uint64{1, 2, 3}, 4, []uint64{3, 2, 1, 0}},
		{"exactly full", seq(1, retStackSize), retStackSize + 1, append(rev(seq(1, retStackSize)), 0)},
		{"overflow drops oldest", seq(1, retStackSize+3), retStackSize + 1, append(rev(seq(4, retStackSize+3)), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r retStack
			for _, v := range tt.push {
				r.push(v)
			}
			if n := r.len(); n != min(len(tt.push), retStackSize) {
				t.Fatalf("len = %d", n)
			}
			for i := 0; i < tt.pops; i++ {
				ip, ok := r.pop()
				want := tt.want[i]
				if want == 0 {
					if ok {
						t.Fatalf("pop %d = %#x, want empty", i, ip)
					}
					continue
				}
				if !ok || ip != want {
					t.Fatalf("pop %d = %#x, %v; want %#x", i, ip, ok, want)
				}
			}
		})
	}
}

func seq(from, to int) []uint64 {
	var out []uint64
	for i := from; i <= to; i++ {
		out = append(out, uint64(i))
	}
	return out
}

func rev(s []uint64) []uint64 {
	out := make([]uint64, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
