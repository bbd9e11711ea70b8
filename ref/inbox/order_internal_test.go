package inbox

import (
	"math/rand/v2"
	"testing"
)

// byUID then uniqueItems: grouped by uid ascending, input order kept within
// a uid, each (uid, msg_id) once (its first occurrence), for short runs
// (pairwise check) and long ones (map), against a plain reference.
func TestByUIDUnique(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		n := rng.IntN(120)
		uids := 1 + rng.IntN(8)
		items := make([]Item, n)
		for i := range items {
			items[i] = Item{UID: 1 + rng.Uint64N(uint64(uids)), MsgID: 1 + rng.Uint64N(40), ConvSeq: uint64(i)}
		}
		got := uniqueItems(byUID(items))
		// Reference: per uid ascending, the input order, first of each pair.
		var want []Item
		for u := uint64(1); u <= uint64(uids); u++ {
			seen := map[uint64]bool{}
			for _, it := range items {
				if it.UID == u && !seen[it.MsgID] {
					seen[it.MsgID] = true
					want = append(want, it)
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d items, want %d", round, len(got), len(want))
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("round %d item %d: %+v, want %+v", round, i, got[i], want[i])
			}
		}
		uidList, counts := runsOf(got)
		total := 0
		for i, u := range uidList {
			if i > 0 && uidList[i-1] >= u {
				t.Fatalf("runsOf uids not ascending: %v", uidList)
			}
			total += counts[u]
		}
		if total != len(got) || len(counts) != len(uidList) {
			t.Fatalf("runsOf: %v %v for %d items", uidList, counts, len(got))
		}
	}
}
