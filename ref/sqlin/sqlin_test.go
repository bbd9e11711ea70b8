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

func TestUintAndLiteral(t *testing.T) {
	var sb strings.Builder
	for _, v := range []uint64{0, 7, 99, 100, 18446744073709551615} {
		Uint(&sb, v)
		sb.WriteByte(' ')
	}
	if got, want := sb.String(), "0 7 99 100 18446744073709551615 "; got != want {
		t.Fatalf("Uint: %q, want %q", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{"", "''"},
		{"b123-x_y.z:~ ", "'b123-x_y.z:~ '"},
		{"it's", "X'69742773'"},
		{`a\b`, "X'615c62'"},
		{"é", "X'c3a9'"},
		{"\x00\xff\n", "X'00ff0a'"},
		{strings.Repeat("\x01", 40), "X'" + strings.Repeat("01", 40) + "'"},
	} {
		sb.Reset()
		Literal(&sb, c.in)
		if sb.String() != c.want {
			t.Errorf("Literal(%q) = %q, want %q", c.in, sb.String(), c.want)
		}
	}
}

func TestUintTuples(t *testing.T) {
	var sb strings.Builder
	a, b := []uint64{1, 20}, []uint64{300, 4}
	UintTuples(&sb, 2, func(i int) (uint64, uint64) { return a[i], b[i] })
	if got, want := sb.String(), "(1,300),(20,4)"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	sb.Reset()
	UintTuples(&sb, 0, nil)
	if sb.Len() != 0 {
		t.Fatalf("no tuples wrote %q", sb.String())
	}
}
