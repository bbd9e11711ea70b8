package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"imlab/ref/model"
	"imlab/ref/sqlin"
)

// ErrFenceMoved is what a FenceMovedError is (errors.Is): a guarded write
// found a fence row not at the value its proposals assumed.
var ErrFenceMoved = errors.New("inbox: a seq_fence row was not where the proposals assumed")

// FenceMovedError is returned by WriteFreshGuardedTx when a guard did not
// hold (a hole in a uid's seqs, a racing writer, a uid's first message, a
// fence behind the table). The guarded raise may have moved some fence rows
// already, so the caller must roll the transaction back, then write the
// same items with WriteFreshTx (the locking read), handing it Proposals:
// it checks them under the lock instead of taking new ones, so a miss leaves
// no hole in any inbox.
type FenceMovedError struct {
	Reason    string
	Proposals *Proposals
}

func (e *FenceMovedError) Error() string { return "inbox: guarded fence raise missed: " + e.Reason }

// Is makes errors.Is(err, ErrFenceMoved) hold.
func (e *FenceMovedError) Is(target error) bool { return target == ErrFenceMoved }

// Proposals are the first seqs taken from the allocator for one set of
// items (each uid's count), not committed anywhere.
type Proposals struct {
	want   map[uint64]int
	firsts map[uint64]uint64
}

// fits tells whether p was taken for exactly these counts.
func (p *Proposals) fits(want map[uint64]int) bool {
	return p != nil && maps.Equal(p.want, want)
}

// covers tells whether p holds at least want's count for every uid of
// want (p may hold more uids).
func (p *Proposals) covers(want map[uint64]int) bool {
	if p == nil {
		return false
	}
	for u, n := range want {
		if p.want[u] < n {
			return false
		}
	}
	return true
}

// Propose takes the allocator's first seqs for want (each uid's count of
// items) ahead of a fresh write, before its transaction begins, so that
// the allocator's round trip overlaps the transaction's first statements
// instead of adding to them. WriteFreshGuardedTx uses them when they fit its
// items; proposals never used are holes, which the seq contract allows.
func (w *Writer) Propose(ctx context.Context, want map[uint64]int) (*Proposals, error) {
	firsts, err := w.propose(ctx, want)
	if err != nil {
		return nil, err
	}
	return &Proposals{want: want, firsts: firsts}, nil
}

// WriteFreshGuardedTx is WriteFreshTx (items whose msg_ids were created in
// this transaction) without reading the fence first. It takes each uid's
// proposals, first..first+n-1, and bets that the uid's fence is exactly
// first-1, which holds whenever the allocator hands out a uid's seqs
// densely and every proposal before this one was committed (one process
// writing the uid at a time, Redis allocator, no failure): one statement
// then locks, checks and raises every fence row,
//
//	UPDATE seq_fence FORCE INDEX (PRIMARY) SET updated_at = now, max_seq = max_seq + <n per uid>
//	WHERE uid IN (…) AND (uid, max_seq) IN ((u, first-1), …)
//
// (the guard packed into one integer per bet when uids and bets fit:
// guardedRaiseAs), and the rows are inserted. A row matches only if it holds exactly first-1
// (so every proposal is above the fence, and first-1 is the entry's PrevSeq),
// and every matched row changes, so the affected rows count the bets that
// held whatever CLIENT_FOUND_ROWS says. A bet that did not hold, or a
// PRIMARY or uk_uid_msg collision at the INSERT, fails with a
// *FenceMovedError; a batch the statement cannot express (more than
// maxRaiseSteps distinct counts) is written by WriteFreshTx at once. The
// guarantees are those of WriteFreshTx, the lock order the same (the fence
// rows ascending, by the PRIMARY index). pre (nil: none) are proposals
// taken ahead by Propose: used if they cover the items (a uid's items take
// the first of its proposed seqs; its fence is raised over all of them, and
// a uid pre holds without items has its fence raised too, so the allocator
// and the fence stay where the next guard bets), else fresh ones are taken.
func (w *Writer) WriteFreshGuardedTx(ctx context.Context, tx *sql.Tx, items []Item, pre *Proposals) ([]model.InboxEntry, error) {
	if len(items) == 0 {
		return nil, nil
	}
	if err := validItems(items, w.cfg.MaxItems); err != nil {
		return nil, err
	}
	items = uniqueItems(byUID(items))
	_, want := runsOf(items)
	// raise is each fence row's step: the items' counts, or the counts
	// pre was taken for when it covers them (a batch that shrank after
	// Propose: the rest of its seqs stay unused below the fence, holes).
	firsts, raise := map[uint64]uint64(nil), want
	if pre.covers(want) {
		firsts, raise = pre.firsts, pre.want
	}
	uids := slices.Sorted(maps.Keys(raise))
	steps := map[uint64][]uint64{} // count -> uids
	for _, u := range uids {
		steps[uint64(raise[u])] = append(steps[uint64(raise[u])], u)
	}
	if len(steps) > maxRaiseSteps {
		return w.write(ctx, tx, items, writeFresh, nil)
	}
	if firsts == nil {
		var err error
		if firsts, err = w.propose(ctx, want); err != nil {
			return nil, err
		}
	}
	moved := func(reason string) error {
		return &FenceMovedError{Reason: reason, Proposals: &Proposals{want: raise, firsts: firsts}}
	}
	for _, u := range uids {
		if firsts[u] == 0 {
			return nil, moved(fmt.Sprintf("allocator %s gave no seq above 0 for uid %d", w.alloc.Name(), u))
		}
	}
	if n, err := guardedRaise(ctx, tx, &w.hint, uids, steps, firsts); err != nil {
		return nil, err
	} else if n != len(uids) {
		return nil, moved(fmt.Sprintf("%d of %d fence rows as proposed", n, len(uids)))
	}
	seqs := seqsFrom(items, firsts)
	if err := insertRows(ctx, tx, items, seqs, w.cfg.InsertChunk, w.cfg.Defects); err != nil {
		if _, dup := DupKey(err); dup {
			return nil, moved(err.Error())
		}
		return nil, fmt.Errorf("inbox: insert offline_msg: %w", err)
	}
	entries := make([]model.InboxEntry, len(items))
	for i, it := range items {
		// seqs[i]-1: the fence before this transaction for a uid's first
		// entry, the entry before it for the others.
		entries[i] = entryOf(it, seqs[i], seqs[i]-1)
	}
	return entries, nil
}

// WriteFreshProposedTx is WriteFreshTx checking held (from a
// FenceMovedError of the same items) under the fence lock instead of taking
// new proposals; held that do not fit the items (other uids or counts) are
// left unused.
func (w *Writer) WriteFreshProposedTx(ctx context.Context, tx *sql.Tx, items []Item, held *Proposals) ([]model.InboxEntry, error) {
	return w.write(ctx, tx, items, writeFresh, held)
}

// guardedRaise is the one UPDATE of WriteFreshGuardedTx: each uid's row
// raised by its count if and only if it holds first-1. It returns how many
// rows it raised. The guard is packed (packedGuard) when every uid and
// every bet fits, else the row-constructor list.
func guardedRaise(ctx context.Context, tx *sql.Tx, hint *PrimaryHint, uids []uint64, steps map[uint64][]uint64, firsts map[uint64]uint64) (int, error) {
	return guardedRaiseAs(ctx, tx, hint, uids, steps, firsts, packable(uids, firsts))
}

// packedLimit bounds the uids and fence values a packed guard carries
// (32 bits each: model.MaxUID is 31).
const packedLimit = 1 << 32

// packable tells whether the packed guard can state every bet exactly:
// each uid and each bet, first-1, below packedLimit.
func packable(uids []uint64, firsts map[uint64]uint64) bool {
	for _, u := range uids {
		if u >= packedLimit || firsts[u]-1 >= packedLimit {
			return false
		}
	}
	return true
}

// guardedRaiseAs is guardedRaise with the guard's form chosen. The
// row-constructor guard is
//
//	AND (uid, max_seq) IN ((u, first-1), …)
//
// and the packed one, one integer per bet,
//
//	AND max_seq < 4294967296 AND uid * 4294967296 + max_seq IN (u<<32 | first-1, …)
//
// which the server compares as integers (BenchmarkGuardForm: about 1.2 µs
// of mariadbd CPU less per row than the row constructors). It is exact
// only because both halves fit: a listed uid is below 2^32 (packable), and
// a row whose max_seq is 2^32 or more is refused by the bound before it is
// packed, since (u, 2^32+x) would pack to the bet (u+1, x). A row the
// guard refuses is a miss, never a wrong raise.
func guardedRaiseAs(ctx context.Context, tx *sql.Tx, hint *PrimaryHint, uids []uint64, steps map[uint64][]uint64, firsts map[uint64]uint64, packed bool) (int, error) {
	now := time.Now().UTC().Format("2006-01-02 15:04:05.000")
	res, err := hint.Exec(ctx, tx, func(sb *strings.Builder, hint string) {
		sb.Grow(160 + len(uids)*48)
		sb.WriteString("UPDATE seq_fence")
		sb.WriteString(hint)
		sb.WriteString(" SET updated_at = '")
		sb.WriteString(now)
		sb.WriteString("', max_seq = max_seq + ")
		sqlin.StepCase(sb, "uid", steps)
		sb.WriteString(" WHERE uid IN (")
		uidList(sb, uids)
		if packed {
			sb.WriteString(") AND max_seq < 4294967296 AND uid * 4294967296 + max_seq IN (")
			for i, u := range uids {
				if i > 0 {
					sb.WriteByte(',')
				}
				sqlin.Uint(sb, u<<32|(firsts[u]-1))
			}
		} else {
			sb.WriteString(") AND (uid, max_seq) IN (")
			sqlin.UintTuples(sb, len(uids), func(i int) (uint64, uint64) { return uids[i], firsts[uids[i]] - 1 })
		}
		sb.WriteByte(')')
	})
	if err != nil {
		return 0, fmt.Errorf("inbox: guarded raise of seq_fence: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("inbox: guarded raise of seq_fence: %w", err)
	}
	return int(n), nil
}
