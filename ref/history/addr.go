package history

import (
	"fmt"
	"sort"
	"strconv"

	"imlab/ref/model"
)

// DefaultBucketSize is the seed's slots per document (singleGocMsgNum).
// There is no second, unused size: the size in force is Config.BucketSize,
// recorded with the data and refused if it changes.
const DefaultBucketSize = 100

// MaxBucketSize bounds Config.BucketSize (a 16 MiB document must hold a full
// bucket of MaxContentLen messages with their del_lists).
const MaxBucketSize = 1000

// Layout is the position addressing of one bucket size. It is pure.
type Layout struct {
	Size uint64
	// noMinusOne is defect.HistoryDocIndexOffByOne (set by New only).
	noMinusOne bool
}

// DocIndex is (seq-1)/size. conv_seq 0 does not exist and is refused.
func (l Layout) DocIndex(seq uint64) (uint64, error) {
	if seq == 0 {
		return 0, fmt.Errorf("%w: conv_seq 0 does not exist (conv_seq starts at 1)", model.ErrInvalid)
	}
	if l.noMinusOne {
		return seq / l.Size, nil // the defect: the seed's "-1" dropped
	}
	return (seq - 1) / l.Size, nil
}

// Slot is (seq-1)%size, the index in the msgs array.
func (l Layout) Slot(seq uint64) (int, error) {
	if seq == 0 {
		return 0, fmt.Errorf("%w: conv_seq 0 does not exist (conv_seq starts at 1)", model.ErrInvalid)
	}
	return int((seq - 1) % l.Size), nil
}

// DocID is "{conv_id}:{(seq-1)/size}".
func (l Layout) DocID(convID, seq uint64) (string, error) {
	idx, err := l.DocIndex(seq)
	if err != nil {
		return "", err
	}
	return DocIDOf(convID, idx), nil
}

// DocIDOf names bucket idx of a conversation.
func DocIDOf(convID, idx uint64) string {
	return strconv.FormatUint(convID, 10) + ":" + strconv.FormatUint(idx, 10)
}

// SeqOf is the conv_seq stored at slot of bucket idx.
func (l Layout) SeqOf(idx uint64, slot int) uint64 {
	return idx*l.Size + uint64(slot) + 1
}

// DocSeqs is the seqs of one request that fall into one bucket.
type DocSeqs struct {
	Idx   uint64
	DocID string
	Seqs  []uint64 // ascending, no duplicates
	Slots []int    // Slots[i] is the slot of Seqs[i]
}

// GroupByDoc groups seqs by bucket (the seed's GetDocIDSeqsMap), buckets and
// seqs ascending, duplicates dropped. A zero seq is refused.
func (l Layout) GroupByDoc(convID uint64, seqs []uint64) ([]DocSeqs, error) {
	sorted := append([]uint64(nil), seqs...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var out []DocSeqs
	var prev uint64
	for i, seq := range sorted {
		if i > 0 && seq == prev {
			continue
		}
		prev = seq
		idx, err := l.DocIndex(seq)
		if err != nil {
			return nil, err
		}
		slot, _ := l.Slot(seq)
		if len(out) == 0 || out[len(out)-1].Idx != idx {
			out = append(out, DocSeqs{Idx: idx, DocID: DocIDOf(convID, idx)})
		}
		g := &out[len(out)-1]
		g.Seqs = append(g.Seqs, seq)
		g.Slots = append(g.Slots, slot)
	}
	return out, nil
}
