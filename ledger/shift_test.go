package ledger

import (
	"reflect"
	"testing"
	"time"
)

// Every time.Duration field of every record kind (nested ones included,
// like an action's Act) moves with Shift: a new field with a time in it
// must be added to Shift, or this test fails.
func TestShiftMovesEveryTime(t *testing.T) {
	durType := reflect.TypeOf(time.Duration(0))
	rt := reflect.TypeOf(Record{})
	// Each record field and the kind (and sub-kind) that sets it.
	kinds := map[string]func(r *Record){
		"Attempt": func(r *Record) { r.Kind = KindAttempt }, "Delivery": func(r *Record) { r.Kind = KindDelivery },
		"Cursor": func(r *Record) { r.Kind = KindCursor }, "Device": func(r *Record) { r.Kind = KindDevice },
		"Group": func(r *Record) { r.Kind = KindGroup }, "Witness": func(r *Record) { r.Kind = KindWitness },
		"Probe": func(r *Record) { r.Kind = KindProbe }, "Note": func(r *Record) { r.Kind = KindNote },
		"ConvPull":  func(r *Record) { r.Kind, r.Action = KindAction, ActConvPull },
		"History":   func(r *Record) { r.Kind, r.Action = KindAction, ActHistory },
		"MsgAction": func(r *Record) { r.Kind, r.Action = KindAction, ActRevoke },
		"Clear":     func(r *Record) { r.Kind, r.Action = KindAction, ActClear },
		"Read":      func(r *Record) { r.Kind, r.Action = KindAction, ActRead },
		"Slot":      func(r *Record) { r.Kind, r.HistoryPart = KindHistory, PartSlot },
		"Watermark": func(r *Record) { r.Kind, r.HistoryPart = KindHistory, PartWatermark },
		"Head":      func(r *Record) { r.Kind, r.HistoryPart = KindHistory, PartHead },
		"Deletion":  func(r *Record) { r.Kind = KindRetention },
		"Settings":  func(r *Record) { r.Kind, r.IsSettings = KindRetention, true },
		"DelRange":  func(r *Record) { r.Kind = KindDelRange },
		"Contact":   func(r *Record) { r.Kind = KindContact },
	}
	// Settings' durations other than At are lengths, not times.
	lengths := map[string]bool{"Settings.MaxAge": true, "Settings.PulledMinAge": true, "Settings.Interval": true}
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Type.Kind() != reflect.Struct {
			continue
		}
		set, ok := kinds[f.Name]
		if !ok {
			t.Fatalf("Record.%s: a record kind this test does not know; add it here and to Shift", f.Name)
		}
		for _, path := range durations(f.Type, durType, nil) {
			name := f.Name + "." + fieldPath(f.Type, path)
			var r Record
			set(&r)
			field(reflect.ValueOf(&r).Elem().Field(i), path).SetInt(int64(time.Second))
			r.Shift(3 * time.Second)
			got := time.Duration(field(reflect.ValueOf(&r).Elem().Field(i), path).Int())
			switch {
			case lengths[name] && got != time.Second:
				t.Errorf("Record.%s is a length, yet Shift(3s) of 1s gave %s", name, got)
			case !lengths[name] && got != 4*time.Second:
				t.Errorf("Record.%s: Shift(3s) of 1s gave %s", name, got)
			}
		}
	}
}

// durations lists the index paths of every time.Duration field of t,
// nested structs included.
func durations(t, durType reflect.Type, prefix []int) [][]int {
	var out [][]int
	for j := range t.NumField() {
		ft := t.Field(j).Type
		path := append(append([]int(nil), prefix...), j)
		switch {
		case ft == durType:
			out = append(out, path)
		case ft.Kind() == reflect.Struct:
			out = append(out, durations(ft, durType, path)...)
		}
	}
	return out
}

func field(v reflect.Value, path []int) reflect.Value {
	for _, j := range path {
		v = v.Field(j)
	}
	return v
}

func fieldPath(t reflect.Type, path []int) string {
	name := ""
	for k, j := range path {
		if k > 0 {
			name += "."
		}
		name += t.Field(j).Name
		t = t.Field(j).Type
	}
	return name
}
