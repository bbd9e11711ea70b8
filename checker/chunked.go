package checker

// chunkLen is the number of items in one block of a chunked list.
const chunkLen = 1 << 14

// chunked is an append-only list kept in blocks of chunkLen items, so
// that a list of millions of records grows without copying (a slice
// grown by append allocates about five times its final size on the way).
type chunked[T any] struct {
	blocks [][]T
	n      int
}

// add appends v.
func (c *chunked[T]) add(v T) {
	if c.n%chunkLen == 0 {
		c.blocks = append(c.blocks, make([]T, 0, chunkLen))
	}
	b := &c.blocks[len(c.blocks)-1]
	*b = append(*b, v)
	c.n++
}

// len is the number of items added (drained ones included).
func (c *chunked[T]) len() int { return c.n }

// each calls fn with a pointer to every item, in order.
func (c *chunked[T]) each(fn func(*T)) {
	for _, b := range c.blocks {
		for i := range b {
			fn(&b[i])
		}
	}
}

// drain calls fn with a pointer to every item, in order, and lets each
// block go once fn has seen it: the list holds nothing after (and is not
// added to again: the model drains the evidence once ingestion is over).
func (c *chunked[T]) drain(fn func(*T)) {
	for i, b := range c.blocks {
		for j := range b {
			fn(&b[j])
		}
		c.blocks[i] = nil
	}
	c.blocks = nil
}
