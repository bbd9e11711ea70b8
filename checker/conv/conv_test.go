package conv

import "testing"

// TestConvLogPut: put itself reports a conv_seq holding a second message
// and a message at a second conv_seq; repeats are quiet.
func TestConvLogPut(t *testing.T) {
	cl := newConvLog()
	if _, d, _, c := cl.put(5, 201); d || c {
		t.Fatal("a first entry is no anomaly")
	}
	if _, d, _, c := cl.put(5, 201); d || c {
		t.Fatal("the same entry again is no anomaly")
	}
	if _, _, other, c := cl.put(5, 202); !c || other != 201 {
		t.Fatalf("conv log: conv_seq 5 reused: conflict %v other %d", c, other)
	}
	if first, d, _, _ := cl.put(6, 201); !d || first != 5 {
		t.Fatalf("conv log: 201 at conv_seq 6 after 5: double %v first %d", d, first)
	}
}

// TestPassesFirstAbove: the earliest time a conv_seq above the one asked
// was stored, whatever order the copies came in.
func TestPassesFirstAbove(t *testing.T) {
	var p Passes
	if _, ok := p.FirstAbove(0); ok {
		t.Fatal("no copy: nothing above")
	}
	p.Add(5, 50)
	p.Add(3, 70)
	p.Add(9, 20)
	for _, c := range []struct {
		seq  uint64
		at   int64
		want bool
	}{{0, 20, true}, {3, 20, true}, {5, 20, true}, {8, 20, true}, {9, 0, false}, {2, 20, true}} {
		at, ok := p.FirstAbove(c.seq)
		if ok != c.want || ok && int64(at) != c.at {
			t.Fatalf("above %d: %d %v, want %d %v", c.seq, at, ok, c.at, c.want)
		}
	}
	p.Add(10, 5)
	if at, _ := p.FirstAbove(9); at != 5 {
		t.Fatalf("a copy added after a read: above 9 at %d, want 5", at)
	}
}
