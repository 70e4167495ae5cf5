package elfnote

import (
	"bytes"
	"encoding/binary"
	"testing"
)

// TestFindBuildID covers the note parser on crafted note areas.
func TestFindBuildID(t *testing.T) {
	note := func(name string, typ uint32, desc []byte) []byte { return noteAligned(name, typ, desc, 4) }
	id := []byte{0xde, 0xad, 0xbe, 0xef, 0x01}
	abi := note("GNU\x00", 1, []byte{0, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0})
	tests := []struct {
		name    string
		area    []byte
		want    []byte
		wantErr bool
	}{
		{"after ABI tag", append(append([]byte{}, abi...), note("GNU\x00", 3, id)...), id, false},
		{"other owner", note("XYZ\x00", 3, id), nil, false},
		{"other type", note("GNU\x00", 4, id), nil, false},
		{"empty", nil, nil, false},
		{"desc past end", note("GNU\x00", 3, id)[:20], nil, true},
	}
	for _, tc := range tests {
		got, err := findBuildID(tc.area, binary.LittleEndian, 4)
		if (err != nil) != tc.wantErr || !bytes.Equal(got, tc.want) {
			t.Errorf("%s: got %x, %v; want %x, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
}

func noteAligned(name string, typ uint32, desc []byte, align int) []byte {
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, uint32(len(name)))
	binary.Write(&b, binary.LittleEndian, uint32(len(desc)))
	binary.Write(&b, binary.LittleEndian, typ)
	b.WriteString(name)
	for b.Len()%align != 0 {
		b.WriteByte(0)
	}
	b.Write(desc)
	for b.Len()%align != 0 {
		b.WriteByte(0)
	}
	return b.Bytes()
}

// TestFindBuildIDAlign8 walks an 8-aligned note area (a PT_NOTE segment
// with p_align 8, as linkers emit for .note.gnu.property): a 4-byte walker
// would misread the note after a property note whose size is not a
// multiple of 8.
func TestFindBuildIDAlign8(t *testing.T) {
	id := []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	prop := noteAligned("GNU\x00", 5, []byte{2, 0, 0, 0xc0, 4, 0, 0, 0, 3, 0, 0, 0}, 8) // 12-byte desc padded to 16
	area := append(append([]byte{}, prop...), noteAligned("GNU\x00", 3, id, 8)...)
	got, err := findBuildID(area, binary.LittleEndian, 8)
	if err != nil || !bytes.Equal(got, id) {
		t.Errorf("align 8: got %x, %v; want %x", got, err, id)
	}
	if got, _ := findBuildID(area, binary.LittleEndian, 4); bytes.Equal(got, id) {
		t.Errorf("align 4 read an 8-aligned area as if it were 4-aligned: the test's area does not discriminate")
	}
}
