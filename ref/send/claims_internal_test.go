package send

import (
	"context"
	"slices"
	"testing"
	"time"
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

// TestClaimsFewConflicts: with fewer than half of its messages sharing a
// uid with another committer's batch in flight, a committer takes the
// others; the rest is left in order, a conversation with a message left has
// its later messages left too, and a uid left for is not taken back by its
// holder before the one waiting took it.
func TestClaimsFewConflicts(t *testing.T) {
	cl := newClaims(2)
	a1 := []*Pending{pend(1, 10, 11)}
	take, left, ta, _ := cl.claim(0, a1, nil, nil)
	if len(take) != 1 || len(left) != 0 || ta == nil || len(ta.deps) != 0 {
		t.Fatalf("A: take %v left %v", convsOf(take), convsOf(left))
	}
	// B: conv 2 touches 11 (held by A); conv 2's later message touches
	// only 20 but must wait behind its predecessor; five others are free.
	b := []*Pending{pend(2, 11, 20), pend(3, 30, 31), pend(2, 20, 21), pend(4, 40, 41), pend(5, 50, 51), pend(6, 60, 61), pend(7, 70, 71)}
	take, left, tb, changed := cl.claim(1, b, nil, nil)
	if !slices.Equal(convsOf(take), []uint64{3, 4, 5, 6, 7}) || !slices.Equal(convsOf(left), []uint64{2, 2}) || len(tb.deps) != 0 {
		t.Fatalf("B: take %v left %v", convsOf(take), convsOf(left))
	}
	select {
	case <-changed:
		t.Fatal("changed closed before any release")
	default:
	}
	cl.release(ta, a1)
	select {
	case <-changed:
	default:
		t.Fatal("release did not close changed")
	}
	select {
	case <-ta.proposed:
	default:
		t.Fatal("a released ticket must not hold anyone back")
	}
	// A again, with a message for 11 among free ones: B wants 11 now, so A
	// leaves it.
	a2 := []*Pending{pend(8, 11, 80), pend(9, 90, 91), pend(12, 92, 93)}
	take, left, ta2, _ := cl.claim(0, a2, nil, nil)
	if !slices.Equal(convsOf(take), []uint64{9, 12}) || !slices.Equal(convsOf(left), []uint64{8}) {
		t.Fatalf("A after release: take %v left %v (11 is wanted by B)", convsOf(take), convsOf(left))
	}
	cl.release(tb, []*Pending{pend(3, 30, 31), pend(4, 40, 41), pend(5, 50, 51), pend(6, 60, 61), pend(7, 70, 71)})
	// B takes what it left, in order.
	take, left, tb2, _ := cl.claim(1, []*Pending{pend(2, 11, 20), pend(2, 20, 21)}, nil, nil)
	if !slices.Equal(convsOf(take), []uint64{2, 2}) || len(left) != 0 {
		t.Fatalf("B second round: take %v left %v", convsOf(take), convsOf(left))
	}
	cl.release(tb2, take)
	cl.release(ta2, []*Pending{pend(9, 90, 91), pend(12, 92, 93)})
	if len(cl.owner) != 0 {
		t.Fatalf("owners left after every release: %v", cl.owner)
	}
}

// TestClaimsHotUIDShared: when most messages share a hot uid with the batch
// in flight, the whole batch is taken (no serialising the committers) and
// ordered behind the holder: its proposals wait for the holder's, its fence
// step for the holder's fence step (bounded), and the uid's owner is the
// latest batch.
func TestClaimsHotUIDShared(t *testing.T) {
	cl := newClaims(2)
	hot := func(conv uint64, n int) []*Pending {
		var ps []*Pending
		for i := 0; i < n; i++ {
			ps = append(ps, pend(conv+uint64(i), 1, 1000+conv+uint64(i)))
		}
		return ps
	}
	a := hot(100, 5)
	take, left, ta, _ := cl.claim(0, a, nil, nil)
	if len(take) != 5 || len(left) != 0 || len(ta.deps) != 0 {
		t.Fatalf("A: took %d left %d", len(take), len(left))
	}
	b := hot(200, 5)
	take, left, tb, _ := cl.claim(1, b, nil, nil)
	if len(take) != 5 || len(left) != 0 {
		t.Fatalf("B: took %d and left %d; a hot batch is shared, not left", len(take), len(left))
	}
	if len(tb.deps) != 1 || tb.deps[0] != ta {
		t.Fatalf("B's deps %v, want A's ticket", tb.deps)
	}
	if cl.owner[1] != tb {
		t.Fatal("the hot uid's owner is not the latest batch")
	}
	// B's proposals wait for A's.
	got := make(chan struct{})
	go func() { tb.awaitProposed(context.Background()); close(got) }()
	select {
	case <-got:
		t.Fatal("B did not wait for A's proposals")
	case <-time.After(20 * time.Millisecond):
	}
	ta.doneProposing()
	select {
	case <-got:
	case <-time.After(time.Second):
		t.Fatal("B still waiting after A's proposals")
	}
	// B's fence step waits for A's, but never longer than fenceOrderWait.
	start := time.Now()
	tb.awaitFenced(context.Background())
	if w := time.Since(start); w < fenceOrderWait/2 || w > 20*fenceOrderWait {
		t.Fatalf("fence wait %v, want about %v", w, fenceOrderWait)
	}
	// A released: the hot uid stays B's.
	cl.release(ta, a)
	if cl.owner[1] != tb {
		t.Fatal("A's release gave back a uid B holds now")
	}
	cl.release(tb, b)
	if len(cl.owner) != 0 {
		t.Fatalf("owners left: %v", cl.owner)
	}
}
