package ptpkt

import "testing"

func TestLastIP(t *testing.T) {
	type step struct {
		ipc     IPCompression
		ip      uint64
		want    uint64
		wantErr error
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"suppressed without an ip", []step{{IPSuppressed, 0, 0, ErrNoIP}}},
		{"update16 from zero", []step{{IPUpdate16, 0x1234, 0x1234, nil}}},
		{"full then updates", []step{
			{IPFull, 0x0a00ccccddddeeee, 0x0a00ccccddddeeee, nil},
			{IPUpdate48, 0xffffeeeeffff, 0x0a00ffffeeeeffff, nil},
			{IPUpdate16, 0xdddd, 0x0a00ffffeeeedddd, nil},
			{IPUpdate32, 0x11223344, 0x0a00ffff11223344, nil},
		}},
		{"sext48 negative and positive", []step{
			{IPSext48, 0xffffddddeeee, 0xffffffffddddeeee, nil},
			{IPUpdate32, 0xeeeeffff, 0xffffffffeeeeffff, nil},
			{IPSext48, 0x7fffddddeeee, 0x00007fffddddeeee, nil},
		}},
		{"suppressed keeps the value for later updates", []step{
			{IPFull, 0xffffffff81000000, 0xffffffff81000000, nil},
			{IPSuppressed, 0, 0, ErrIPSuppressed},
			{IPUpdate16, 0x0010, 0xffffffff81000010, nil},
		}},
		{"reserved compression", []step{{IPFull, 0x1000, 0x1000, nil}, {5, 0, 0x1000, ErrBadPacket}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l LastIP
			if _, err := l.IP(); err != ErrNoIP {
				t.Fatalf("fresh LastIP: %v, want ErrNoIP", err)
			}
			for i, s := range tc.steps {
				err := l.Update(s.ipc, s.ip)
				if err == nil {
					var ip uint64
					ip, err = l.IP()
					if err == nil && ip != s.want {
						t.Errorf("step %d: ip %#x, want %#x", i, ip, s.want)
					}
				}
				if err != s.wantErr {
					t.Errorf("step %d: error %v, want %v", i, err, s.wantErr)
				}
			}
			l.Reset()
			if _, err := l.IP(); err != ErrNoIP {
				t.Errorf("after Reset: %v, want ErrNoIP", err)
			}
		})
	}
}
