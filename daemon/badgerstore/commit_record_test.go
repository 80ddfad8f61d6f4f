package badgerstore

import "testing"

func TestCommitPayloadRoundTrip(t *testing.T) {
	ws := []write{{key: []byte("a"), val: []byte("1")}, {key: []byte("b")}, {key: []byte("c"), val: []byte{}}}
	p := appendCommitPayload(nil, 42, []*op{{writes: ws[:2]}, {writes: ws[2:]}})
	v, got, err := decodeCommitPayload(p)
	if err != nil || v != 42 || len(got) != 3 || string(got[0].val) != "1" || got[1].val != nil || got[2].val == nil {
		t.Fatalf("decoded %d %+v %v", v, got, err)
	}
	if _, _, err := decodeCommitPayload(p[:len(p)-1]); err == nil {
		t.Fatal("a cut payload decoded")
	}
}
