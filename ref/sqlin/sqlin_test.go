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
