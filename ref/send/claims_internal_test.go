package send

import (
	"slices"
	"testing"
)

func pend(conv uint64, uids ...uint64) *Pending {
	p := &Pending{Recipients: uids}
	p.Msg.ConvID = conv
	return p
}

func convsOf(ps []*Pending) []uint64 {
	var out []uint64
	for _, p := range ps {
		out = append(out, p.Msg.ConvID)
	}
	return out
}

// TestClaimsDisjoint: a committer takes only messages none of whose uids
// another committer holds; the rest is left in order, and a conversation
// with a message left has its later messages left too.
func TestClaimsDisjoint(t *testing.T) {
	cl := newClaims(2)
	a1 := pend(1, 10, 11)
	take, left, _ := cl.claim(0, []*Pending{a1}, nil, nil)
	if len(take) != 1 || len(left) != 0 {
		t.Fatalf("A: take %v left %v", convsOf(take), convsOf(left))
	}
	// B: conv 2 touches 11 (held by A); conv 2's later message touches
	// only 20 but must wait behind its predecessor; conv 3 is free.
	b := []*Pending{pend(2, 11, 20), pend(3, 30, 31), pend(2, 20, 21), pend(4, 10, 40)}
	take, left, changed := cl.claim(1, b, nil, nil)
	if !slices.Equal(convsOf(take), []uint64{3}) || !slices.Equal(convsOf(left), []uint64{2, 2, 4}) {
		t.Fatalf("B: take %v left %v", convsOf(take), convsOf(left))
	}
	select {
	case <-changed:
		t.Fatal("changed closed before any release")
	default:
	}
	cl.release(0, []*Pending{a1})
	select {
	case <-changed:
	default:
		t.Fatal("release did not close changed")
	}
	// A again, with a message for 11: B wants 11 now, so A leaves it.
	take, left, _ = cl.claim(0, []*Pending{pend(5, 11, 50), pend(6, 60, 61)}, nil, nil)
	if !slices.Equal(convsOf(take), []uint64{6}) || !slices.Equal(convsOf(left), []uint64{5}) {
		t.Fatalf("A after release: take %v left %v (11 is wanted by B)", convsOf(take), convsOf(left))
	}
	// B takes what it left, in order.
	take, left, _ = cl.claim(1, []*Pending{pend(2, 11, 20), pend(2, 20, 21), pend(4, 10, 40)}, nil, nil)
	if !slices.Equal(convsOf(take), []uint64{2, 2, 4}) || len(left) != 0 {
		t.Fatalf("B second round: take %v left %v", convsOf(take), convsOf(left))
	}
	// Now 11 is B's: A still leaves conv 5; once B releases, A takes it.
	take, left, _ = cl.claim(0, []*Pending{pend(5, 11, 50)}, nil, nil)
	if len(take) != 0 || len(left) != 1 {
		t.Fatalf("A while B holds 11: take %v left %v", convsOf(take), convsOf(left))
	}
	cl.release(1, []*Pending{pend(3, 30, 31), pend(2, 11, 20), pend(2, 20, 21), pend(4, 10, 40)})
	take, _, _ = cl.claim(0, []*Pending{pend(5, 11, 50)}, nil, nil)
	if len(take) != 1 {
		t.Fatal("A could not take 11 after B released it")
	}
	cl.release(0, take)
	cl.release(0, []*Pending{pend(6, 60, 61)})
	if len(cl.owner) != 0 {
		t.Fatalf("owners left after every release: %v", cl.owner)
	}
}

// TestClaimsHotUID: two committers whose every message is for one hot
// uid take turns, each batch taking all its messages for it, and neither
// starves.
func TestClaimsHotUID(t *testing.T) {
	cl := newClaims(2)
	batchOf := func(conv uint64, n int) []*Pending {
		var ps []*Pending
		for i := 0; i < n; i++ {
			ps = append(ps, pend(conv+uint64(i), 1, 1000+conv+uint64(i)))
		}
		return ps
	}
	// A holds the hot uid.
	held, _, _ := cl.claim(0, batchOf(100, 5), nil, nil)
	if len(held) != 5 {
		t.Fatalf("A took %d of 5", len(held))
	}
	holder := 0
	for round := 0; round < 6; round++ {
		other := 1 - holder
		// The other committer leaves everything while the holder holds it.
		take, left, _ := cl.claim(other, batchOf(uint64(1000*round+200), 5), nil, nil)
		if len(take) != 0 || len(left) != 5 {
			t.Fatalf("round %d: committer %d took %d while %d held the hot uid", round, other, len(take), holder)
		}
		cl.release(holder, held)
		// The holder, back first, may not take it again: the other wants it.
		take, left, _ = cl.claim(holder, batchOf(uint64(1000*round+300), 5), nil, nil)
		if len(take) != 0 || len(left) != 5 {
			t.Fatalf("round %d: committer %d took the hot uid back (%d) before the one waiting for it", round, holder, len(take))
		}
		// The waiting one takes all its messages for it in one batch.
		held, left, _ = cl.claim(other, batchOf(uint64(1000*round+200), 5), nil, nil)
		if len(held) != 5 || len(left) != 0 {
			t.Fatalf("round %d: committer %d took %d and left %d after waiting", round, other, len(held), len(left))
		}
		holder = other
	}
}
