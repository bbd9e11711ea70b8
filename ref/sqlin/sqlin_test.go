package sqlin

import (
	"reflect"
	"strings"
	"testing"
)

func TestPairs(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("SELECT 1 FROM t WHERE ")
	keys := [][2]any{{uint64(1), "a"}, {uint64(2), "b"}}
	args := Pairs(&sb, "uid", "device_id", len(keys), nil, func(i int) (any, any) { return keys[i][0], keys[i][1] })
	want := "SELECT 1 FROM t WHERE (uid = ? AND device_id = ?) OR (uid = ? AND device_id = ?)"
	if sb.String() != want {
		t.Fatalf("got %q", sb.String())
	}
	if !reflect.DeepEqual(args, []any{uint64(1), "a", uint64(2), "b"}) {
		t.Fatalf("args %v", args)
	}
	var empty strings.Builder
	if got := Pairs(&empty, "a", "b", 0, []any{7}, nil); len(got) != 1 || empty.Len() != 0 {
		t.Fatal("n = 0 must write nothing")
	}
}

func TestStepCase(t *testing.T) {
	for _, c := range []struct {
		steps map[uint64][]uint64
		want  string
	}{
		{map[uint64][]uint64{1: {5, 3}}, "1"},
		{map[uint64][]uint64{1: {9, 3, 4}, 2: {7, 1}, 5: {2}}, "CASE WHEN uid IN (1,7) THEN 2 WHEN uid IN (2) THEN 5 ELSE 1 END"},
		{map[uint64][]uint64{3: {1}, 2: {2}}, "CASE WHEN uid IN (1) THEN 3 ELSE 2 END"},
	} {
		var sb strings.Builder
		StepCase(&sb, "uid", c.steps)
		if sb.String() != c.want {
			t.Errorf("StepCase(%v) = %q, want %q", c.steps, sb.String(), c.want)
		}
	}
}
