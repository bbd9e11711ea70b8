package ledger

import (
	"reflect"
	"testing"
	"time"
)

// Every time.Duration field of every record kind moves with Shift: a new
// field with a time in it must be added to Shift, or this test fails.
func TestShiftMovesEveryTime(t *testing.T) {
	durType := reflect.TypeOf(time.Duration(0))
	rt := reflect.TypeOf(Record{})
	kinds := map[string]Kind{"Attempt": KindAttempt, "Delivery": KindDelivery, "Cursor": KindCursor,
		"Device": KindDevice, "Group": KindGroup, "Witness": KindWitness, "Probe": KindProbe, "Note": KindNote}
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Type.Kind() != reflect.Struct {
			continue
		}
		kind, ok := kinds[f.Name]
		if !ok {
			t.Fatalf("Record.%s: a record kind this test does not know; add it here and to Shift", f.Name)
		}
		for j := range f.Type.NumField() {
			if f.Type.Field(j).Type != durType {
				continue
			}
			var r Record
			r.Kind = kind
			reflect.ValueOf(&r).Elem().Field(i).Field(j).SetInt(int64(time.Second))
			r.Shift(3 * time.Second)
			if got := time.Duration(reflect.ValueOf(r).Field(i).Field(j).Int()); got != 4*time.Second {
				t.Errorf("Record.%s.%s: Shift(3s) of 1s gave %s", f.Name, f.Type.Field(j).Name, got)
			}
		}
	}
}
