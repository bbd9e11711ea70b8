package history

import (
	"errors"
	"testing"

	"imlab/ref/model"
)

func TestAddressingEdges(t *testing.T) {
	l := Layout{Size: 100}
	conv, err := model.SingleConvID(7, 9)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		seq  uint64
		idx  uint64
		slot int
	}{
		{1, 0, 0},
		{99, 0, 98},
		{100, 0, 99},
		{101, 1, 0},
		{200, 1, 99},
		{201, 2, 0},
		{10086, 100, 85},
	}
	for _, c := range cases {
		idx, err := l.DocIndex(c.seq)
		if err != nil || idx != c.idx {
			t.Errorf("DocIndex(%d) = %d, %v; want %d", c.seq, idx, err, c.idx)
		}
		slot, err := l.Slot(c.seq)
		if err != nil || slot != c.slot {
			t.Errorf("Slot(%d) = %d, %v; want %d", c.seq, slot, err, c.slot)
		}
		id, err := l.DocID(conv, c.seq)
		if want := DocIDOf(conv, c.idx); err != nil || id != want {
			t.Errorf("DocID(%d) = %q, %v; want %q", c.seq, id, err, want)
		}
		if back := l.SeqOf(c.idx, c.slot); back != c.seq {
			t.Errorf("SeqOf(%d,%d) = %d; want %d", c.idx, c.slot, back, c.seq)
		}
	}
	// seq 100 and 101 must not collide (the seed's "minus one" rule).
	a, _ := l.DocID(conv, 100)
	b, _ := l.DocID(conv, 101)
	sa, _ := l.Slot(100)
	sb, _ := l.Slot(101)
	if a == b && sa == sb {
		t.Fatal("seq 100 and 101 share a position")
	}
	for _, f := range []func() error{
		func() error { _, err := l.DocIndex(0); return err },
		func() error { _, err := l.Slot(0); return err },
		func() error { _, err := l.DocID(conv, 0); return err },
		func() error { _, err := l.GroupByDoc(conv, []uint64{5, 0}); return err },
	} {
		if err := f(); !errors.Is(err, model.ErrInvalid) {
			t.Errorf("seq 0: err = %v, want ErrInvalid", err)
		}
	}
}

func TestDocIDKeepsUint64(t *testing.T) {
	conv, err := model.SingleConvID(1, model.MaxUID)
	if err != nil {
		t.Fatal(err)
	}
	if conv < 1<<63 {
		t.Fatalf("1:1 conv id %d lacks bit 63", conv)
	}
	// 2^63 + 1<<31 + (2^31-1): above MaxInt64, kept exact as a decimal string.
	want := "9223372041149743103:3"
	if got := DocIDOf(conv, 3); got != want {
		t.Fatalf("DocIDOf = %q, want %q", got, want)
	}
}

func TestGroupByDoc(t *testing.T) {
	l := Layout{Size: 100}
	g, err := l.GroupByDoc(7, []uint64{101, 1, 100, 99, 100, 250})
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != 3 {
		t.Fatalf("groups = %+v", g)
	}
	if g[0].DocID != "7:0" || len(g[0].Seqs) != 3 || g[0].Seqs[0] != 1 || g[0].Slots[2] != 99 {
		t.Errorf("group 0 = %+v", g[0])
	}
	if g[1].DocID != "7:1" || len(g[1].Seqs) != 1 || g[1].Slots[0] != 0 {
		t.Errorf("group 1 = %+v", g[1])
	}
	if g[2].DocID != "7:2" || g[2].Seqs[0] != 250 || g[2].Slots[0] != 49 {
		t.Errorf("group 2 = %+v", g[2])
	}
	if g, err := l.GroupByDoc(7, nil); err != nil || len(g) != 0 {
		t.Errorf("empty: %v %v", g, err)
	}
}

func TestOtherBucketSize(t *testing.T) {
	l := Layout{Size: 5000}
	if idx, _ := l.DocIndex(5000); idx != 0 {
		t.Errorf("5000 -> %d", idx)
	}
	if idx, _ := l.DocIndex(5001); idx != 1 {
		t.Errorf("5001 -> %d", idx)
	}
	// The same seq lands elsewhere under another size: why the size is
	// recorded with the data.
	a, _ := Layout{Size: 100}.DocID(1, 150)
	b, _ := Layout{Size: 200}.DocID(1, 150)
	if a == b {
		t.Errorf("seq 150 addressed alike under 100 and 200: %s", a)
	}
}
