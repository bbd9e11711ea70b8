package seqalloc

// CounterKeys exposes (*Redis).counterKeys to the tests.
func CounterKeys(r *Redis, uids []uint64) []string { return r.counterKeys(uids) }
