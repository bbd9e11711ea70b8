package defect

import (
	"errors"
	"testing"
)

func TestParseAndEnable(t *testing.T) {
	s, err := Parse("zset-short-page, cursor-on-pull", "cursor-on-pull")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Has(ZSetShortPage) || !s.Has(CursorOnPull) || s.Has(SeqReuse) || s.String() != "cursor-on-pull,zset-short-page" {
		t.Fatalf("set %q", s)
	}
	if _, err := Parse("no-such-defect"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown name: %v", err)
	}
	if _, err := Enable(false, CursorOnPull); !errors.Is(err, ErrNotLab) {
		t.Fatalf("without the lab switch: %v", err)
	}
	if s, err := Enable(false); err != nil || !s.Empty() {
		t.Fatalf("no defect without the lab switch: %v %v", s, err)
	}
	if s, err := Enable(true, CursorOnPull); err != nil || !s.Has(CursorOnPull) {
		t.Fatalf("with the lab switch: %v %v", s, err)
	}
	var zero Set
	if !zero.Empty() || zero.Has(CursorOnPull) {
		t.Fatal("the zero set is not empty")
	}
}

func TestListDocumented(t *testing.T) {
	seen := map[string]bool{}
	for _, d := range List() {
		if d.Name == "" || d.Where == "" || d.What == "" || seen[d.Name] {
			t.Fatalf("defect %+v", d)
		}
		seen[d.Name] = true
	}
	if len(seen) < 17 {
		t.Fatalf("%d defects", len(seen))
	}
}

func TestSampled(t *testing.T) {
	n := 0
	for k := uint64(1); k <= 16000; k++ {
		if Sampled(k, 16) {
			n++
		}
	}
	if n < 700 || n > 1300 {
		t.Fatalf("Sampled(·, 16) picked %d of 16000", n)
	}
}
