// Package chunked is an append-only list kept in blocks, for the
// checker's millions of records.
package chunked

// BlockLen is the number of items in one block of a List.
const BlockLen = 1 << 14

// List is an append-only list kept in blocks of BlockLen items, so that a
// list of millions of records grows without copying (a slice grown by
// append allocates about five times its final size on the way). Its zero
// value is an empty list.
type List[T any] struct {
	blocks [][]T
	n      int
}

// Add appends v.
func (c *List[T]) Add(v T) {
	if c.n%BlockLen == 0 {
		c.blocks = append(c.blocks, make([]T, 0, BlockLen))
	}
	b := &c.blocks[len(c.blocks)-1]
	*b = append(*b, v)
	c.n++
}

// Len is the number of items added (drained ones included).
func (c *List[T]) Len() int { return c.n }

// Each calls fn with a pointer to every item, in order.
func (c *List[T]) Each(fn func(*T)) {
	for _, b := range c.blocks {
		for i := range b {
			fn(&b[i])
		}
	}
}

// Drain calls fn with a pointer to every item, in order, and lets each
// block go once fn has seen it: the list holds nothing after (and is not
// added to again: the checker drains its evidence once ingestion is over).
func (c *List[T]) Drain(fn func(*T)) {
	for i, b := range c.blocks {
		for j := range b {
			fn(&b[j])
		}
		c.blocks[i] = nil
	}
	c.blocks = nil
}
