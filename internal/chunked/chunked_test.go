package chunked

import "testing"

// TestList: items come back in order across blocks, and Drain lets the
// blocks go.
func TestList(t *testing.T) {
	var c List[int]
	n := 3*BlockLen + 7
	for i := range n {
		c.Add(i)
	}
	var got []int
	c.Each(func(v *int) { got = append(got, *v) })
	if len(got) != n || c.Len() != n || got[BlockLen] != BlockLen || got[n-1] != n-1 {
		t.Fatalf("each: %d items, len %d", len(got), c.Len())
	}
	i := 0
	c.Drain(func(v *int) {
		if *v != i {
			t.Fatalf("drain: item %d is %d", i, *v)
		}
		i++
	})
	if i != n || c.blocks != nil || c.Len() != n {
		t.Fatalf("drain saw %d, blocks %v, len %d", i, c.blocks != nil, c.Len())
	}
}
