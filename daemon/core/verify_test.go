package core

import (
	"errors"
	"reflect"
	"testing"
)

// TestVerifyCollector checks the report's rules: the first problem per
// session wins, sessions come in id order, damage outside any session has
// an empty id, and a damaged session is not checked again.
func TestVerifyCollector(t *testing.T) {
	var c VerifyCollector
	for _, session := range []bool{true, false, true} {
		c.Record()
		if session {
			c.Session()
		}
	}
	c.Note("b", "message 3 is missing")
	c.Note("b", "a later problem")
	c.Note("", "malformed key")
	var checked []string
	c.Check([]string{"c", "b", "a"}, func(sid string) error {
		checked = append(checked, sid)
		if sid == "c" {
			return errors.New("revision 2 is missing")
		}
		return nil
	})
	if want := []string{"a", "c"}; !reflect.DeepEqual(checked, want) {
		t.Errorf("checked %v, want %v", checked, want)
	}
	want := VerifyReport{CheckedSessions: 2, CheckedRecords: 3, Damaged: []DamagedSession{
		{"", "malformed key"}, {"b", "message 3 is missing"}, {"c", "revision 2 is missing"},
	}}
	if got := c.Report(); !reflect.DeepEqual(got, want) {
		t.Errorf("report = %+v, want %+v", got, want)
	}
	if got := (&VerifyCollector{}).Report(); got.Damaged != nil || got.CheckedRecords != 0 {
		t.Errorf("empty report = %+v", got)
	}
}
