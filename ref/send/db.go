package send

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/sqlin"
)

const lookupChunk = 500

// lookupSent finds the stored answers of batch's (sender, client_msg_id).
func lookupSent(ctx context.Context, tx *sql.Tx, batch []*Pending) (map[dupKey]model.SendResult, error) {
	var found map[dupKey]model.SendResult
	for start := 0; start < len(batch); start += lookupChunk {
		end := min(start+lookupChunk, len(batch))
		var sb strings.Builder
		args := make([]any, 0, 2*(end-start))
		sb.WriteString("SELECT sender_uid, client_msg_id, msg_id, conv_id, conv_seq, created_at FROM msg_content WHERE ")
		args = sqlin.Pairs(&sb, "sender_uid", "client_msg_id", end-start, args, func(i int) (any, any) {
			return batch[start+i].Req.SenderUID, batch[start+i].Req.ClientMsgID
		})
		rows, err := tx.QueryContext(ctx, sb.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("send: dedupe lookup: %w", err)
		}
		for rows.Next() {
			var k dupKey
			var r model.SendResult
			if err := rows.Scan(&k.sender, &k.client, &r.MsgID, &r.ConvID, &r.ConvSeq, &r.ServerTime); err != nil {
				rows.Close()
				return nil, fmt.Errorf("send: dedupe scan: %w", err)
			}
			r.ServerTime = r.ServerTime.UTC()
			if found == nil {
				found = make(map[dupKey]model.SendResult)
			}
			found[k] = r
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("send: dedupe rows: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("send: dedupe rows: %w", err)
		}
	}
	return found, nil
}

// convCacheSize bounds the conversations one committer remembers the
// committed counter of (cleared when full).
const convCacheSize = 1 << 17

// maxConvSteps bounds the distinct per-conversation message counts one
// guarded conv_counter upsert carries; a batch with more reads back.
const maxConvSteps = 32

// convTops is what one committer knows of its conversations' conv_counter
// values as last committed by it (a conversation always goes to the same
// committer of a process). It is owned by that committer's goroutine. The
// values are predictions only: advanceConvSeqs checks them in the UPDATE
// itself and rolls the attempt back when one was wrong (another process
// wrote the conversation, a restore set the counter back).
type convTops struct {
	m map[uint64]uint64
	// paused counts the batches left that read back without predicting,
	// after a prediction failed: where processes take turns in the same
	// conversations (two users on two API processes), predicting would
	// roll back a batch at every turn; this bounds that to one rollback
	// per convStalePause batches.
	paused int
	// hint is the guarded UPDATE's index hint (the Service's, shared by
	// its committers).
	hint *inbox.PrimaryHint
}

// convStalePause is how many batches a committer reads back after a
// failed prediction before it predicts again.
const convStalePause = 256

func (c *convTops) get(conv uint64) (uint64, bool) {
	v, ok := c.m[conv]
	return v, ok
}

// committed records the counters batch left (its messages' highest
// conv_seq per conversation) after COMMIT.
func (c *convTops) committed(batch []*Pending) {
	if c.m == nil || len(c.m)+len(batch) > convCacheSize {
		c.m = make(map[uint64]uint64, min(convCacheSize, 4096))
	}
	for _, p := range batch {
		if p.Msg.ConvSeq > c.m[p.Msg.ConvID] {
			c.m[p.Msg.ConvID] = p.Msg.ConvSeq
		}
	}
}

// forget drops batch's conversations (their prediction failed).
func (c *convTops) forget(batch []*Pending) {
	for _, p := range batch {
		delete(c.m, p.Msg.ConvID)
	}
}

// errConvStale marks an attempt rolled back because a remembered
// conv_counter value was not the stored one (or a conversation not
// remembered had a row already); the next attempt reads back.
var errConvStale = errors.New("send: remembered conv_counter value stale")

// advanceConvSeqs takes len(msgs of conv) conv_seqs per conversation (rows
// locked in ascending conv_id order within each statement) and hands them
// out in batch order. When the committer remembers some of the counters
// (tops), they are checked by the statement itself and nothing is read
// back; otherwise the counters are read back unless every row was created.
func advanceConvSeqs(ctx context.Context, tx *sql.Tx, batch []*Pending, tops *convTops) error {
	if tops != nil && tops.paused > 0 {
		tops.paused--
	} else if tops != nil {
		done, err := advanceConvSeqsKnown(ctx, tx, batch, tops)
		if done || err != nil {
			return err
		}
	}
	return advanceConvSeqsRead(ctx, tx, batch)
}

// advanceConvSeqsKnown advances, without read back, a batch where at least
// one conversation's counter is remembered. The remembered rows are raised
// by each conversation's count k in one guarded UPDATE that matches a row
// only if it holds exactly the remembered value b:
//
//	UPDATE conv_counter FORCE INDEX (PRIMARY) SET max_seq = max_seq + k
//	WHERE conv_id IN (…) AND (conv_id, max_seq) IN ((c, b), …)
//
// (k grouped as in the fence raise, sqlin.StepCase). The IN list of ids
// makes it a point lookup per row (FORCE INDEX: on a small table the
// optimizer would otherwise scan it), and the constant row list is a
// binary search per row on MySQL 8 and MariaDB; each matched row changes,
// so the affected rows count the predictions that held, whatever
// CLIENT_FOUND_ROWS says. Per row one key read and one update, against the
// upsert's failed insert attempt, key read and update. The conversations
// not remembered are inserted (INSERT, k each); one that exists already
// fails the statement (1062, nothing changed). Either miss rolls the
// attempt back (errConvStale): the conversations are forgotten and the
// committer reads back for the next convStalePause batches. done is false
// when the batch is not for this path (nothing remembered, too many
// distinct counts).
func advanceConvSeqsKnown(ctx context.Context, tx *sql.Tx, batch []*Pending, tops *convTops) (done bool, err error) {
	counts := make(map[uint64]uint64, len(batch))
	for _, p := range batch {
		counts[p.Msg.ConvID]++
	}
	convs := slices.Sorted(maps.Keys(counts))
	base := make(map[uint64]uint64, len(convs))
	steps := map[uint64][]uint64{} // count -> remembered convs
	var known, fresh []uint64
	for _, c := range convs {
		if b, ok := tops.get(c); ok {
			base[c] = b
			known = append(known, c)
			steps[counts[c]] = append(steps[counts[c]], c)
		} else {
			fresh = append(fresh, c)
		}
	}
	if len(known) == 0 || len(steps) > maxConvSteps {
		return false, nil
	}
	stale := func(what string) error {
		tops.forget(batch)
		tops.paused = convStalePause
		return fmt.Errorf("%w: %s", errConvStale, what)
	}
	res, err := tops.hint.Exec(ctx, tx, func(sb *strings.Builder, hint string) {
		sb.Grow(160 + len(known)*48)
		sb.WriteString("UPDATE conv_counter")
		sb.WriteString(hint)
		sb.WriteString(" SET max_seq = max_seq + ")
		sqlin.StepCase(sb, "conv_id", steps)
		sb.WriteString(" WHERE conv_id IN (")
		sqlin.Uints(sb, known)
		sb.WriteString(") AND (conv_id, max_seq) IN (")
		sqlin.UintTuples(sb, len(known), func(i int) (uint64, uint64) { return known[i], base[known[i]] })
		sb.WriteByte(')')
	})
	if err != nil {
		return true, fmt.Errorf("send: advance conv_counter: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return true, fmt.Errorf("send: advance conv_counter: %w", err)
	}
	if n != int64(len(known)) {
		return true, stale(fmt.Sprintf("%d of %d remembered counters as predicted", n, len(known)))
	}
	if len(fresh) > 0 {
		var sb strings.Builder
		sb.WriteString("INSERT INTO conv_counter (conv_id, max_seq) VALUES ")
		sqlin.UintTuples(&sb, len(fresh), func(i int) (uint64, uint64) { return fresh[i], counts[fresh[i]] })
		if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
			if _, dup := inbox.DupKey(err); dup {
				return true, stale("a conversation not remembered has a counter")
			}
			return true, fmt.Errorf("send: create conv_counter: %w", err)
		}
	}
	next := make(map[uint64]uint64, len(convs))
	for _, p := range batch {
		next[p.Msg.ConvID]++
		p.Msg.ConvSeq = base[p.Msg.ConvID] + next[p.Msg.ConvID]
	}
	return true, nil
}

// advanceConvSeqsRead is the upsert with read back.
func advanceConvSeqsRead(ctx context.Context, tx *sql.Tx, batch []*Pending) error {
	counts := make(map[uint64]uint64, len(batch))
	for _, p := range batch {
		counts[p.Msg.ConvID]++
	}
	convs := slices.Sorted(maps.Keys(counts))

	var sb strings.Builder
	sb.WriteString("INSERT INTO conv_counter (conv_id, max_seq) VALUES ")
	for i, c := range convs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteByte('(')
		sqlin.Uint(&sb, c)
		sb.WriteByte(',')
		sqlin.Uint(&sb, counts[c])
		sb.WriteByte(')')
	}
	// VALUES() keeps this O(rows); MySQL 8.0.20+ only warns that it is deprecated.
	sb.WriteString(" ON DUPLICATE KEY UPDATE max_seq = max_seq + VALUES(max_seq)")
	res, err := tx.ExecContext(ctx, sb.String())
	if err != nil {
		return fmt.Errorf("send: advance conv_counter: %w", err)
	}
	// Affected rows count 1 per row inserted and 2 per row updated (an
	// update always changes max_seq here, so CLIENT_FOUND_ROWS does not
	// matter). All inserted: every conversation is new in this transaction
	// (its row is ours and locked), its counter is exactly its count, and
	// the read back is skipped.
	if n, err := res.RowsAffected(); err == nil && n == int64(len(convs)) {
		next := make(map[uint64]uint64, len(convs))
		for _, p := range batch {
			next[p.Msg.ConvID]++
			p.Msg.ConvSeq = next[p.Msg.ConvID]
		}
		return nil
	}
	sb.Reset()
	sb.WriteString("SELECT conv_id, max_seq FROM conv_counter WHERE conv_id IN (")
	for i, c := range convs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sqlin.Uint(&sb, c)
	}
	sb.WriteString(")")
	rows, err := tx.QueryContext(ctx, sb.String())
	if err != nil {
		return fmt.Errorf("send: read conv_counter: %w", err)
	}
	defer rows.Close()
	next := make(map[uint64]uint64, len(convs))
	for rows.Next() {
		var c, max uint64
		if err := rows.Scan(&c, &max); err != nil {
			return fmt.Errorf("send: scan conv_counter: %w", err)
		}
		next[c] = max - counts[c] + 1
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("send: read conv_counter: %w", err)
	}
	if len(next) != len(convs) {
		return fmt.Errorf("send: read %d of %d conv_counter rows", len(next), len(convs))
	}
	for _, p := range batch {
		p.Msg.ConvSeq = next[p.Msg.ConvID]
		next[p.Msg.ConvID]++
	}
	return nil
}

// contentChunkBytes bounds one msg_content INSERT statement.
const contentChunkBytes = 1 << 20

// insertContent inserts batch's msg_content rows in statements of at most
// contentChunkBytes; on error it also tells how many rows earlier
// statements inserted. Every value is written into the statement text
// (sqlin.Uint, sqlin.Literal): no argument list, no client-side
// interpolation, no per-value allocation.
func insertContent(ctx context.Context, tx *sql.Tx, batch []*Pending) (int, error) {
	var sb strings.Builder
	for start := 0; start < len(batch); {
		end, size := start, 0
		for end < len(batch) && (end == start || size+len(batch[end].Msg.Content)+len(batch[end].Msg.ClientMsgID) < contentChunkBytes) {
			size += len(batch[end].Msg.Content) + len(batch[end].Msg.ClientMsgID) + 64
			end++
		}
		sb.Reset()
		// A literal takes at most twice its bytes plus 3 (X'…').
		sb.Grow(128 + 2*size + (end-start)*32)
		sb.WriteString("INSERT INTO msg_content (msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES ")
		// One created_at for the whole batch (attempt sets it): formatted
		// once per distinct value.
		var lastAt time.Time
		var lastAtText string
		for i := start; i < end; i++ {
			m := &batch[i].Msg
			if i == start || !m.CreatedAt.Equal(lastAt) {
				lastAt, lastAtText = m.CreatedAt, m.CreatedAt.Format("2006-01-02 15:04:05.000")
			}
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteByte('(')
			sqlin.Uint(&sb, m.MsgID)
			sb.WriteByte(',')
			sqlin.Uint(&sb, m.ConvID)
			sb.WriteByte(',')
			sqlin.Uint(&sb, uint64(m.ConvType))
			sb.WriteByte(',')
			sqlin.Uint(&sb, m.ConvSeq)
			sb.WriteByte(',')
			sqlin.Uint(&sb, m.SenderUID)
			sb.WriteByte(',')
			sqlin.Literal(&sb, m.ClientMsgID)
			sb.WriteByte(',')
			sqlin.Literal(&sb, m.Content)
			sb.WriteString(",'")
			sb.WriteString(lastAtText)
			sb.WriteString("')")
		}
		if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
			return start, fmt.Errorf("send: insert msg_content: %w", err)
		}
		start = end
	}
	return len(batch), nil
}

// lowerConvCounters sets conversations' counters back by the given counts
// (conv_seqs taken in this transaction for messages that turned out to be
// stored duplicates; the rows are locked by it).
func lowerConvCounters(ctx context.Context, tx *sql.Tx, by map[uint64]uint64) error {
	if len(by) == 0 {
		return nil
	}
	convs := slices.Sorted(maps.Keys(by))
	var sb strings.Builder
	sb.WriteString("UPDATE conv_counter SET max_seq = max_seq - CASE conv_id")
	for _, c := range convs {
		fmt.Fprintf(&sb, " WHEN %d THEN %d", c, by[c])
	}
	sb.WriteString(" ELSE 0 END WHERE conv_id IN (")
	for i, c := range convs {
		if i > 0 {
			sb.WriteByte(',')
		}
		sqlin.Uint(&sb, c)
	}
	sb.WriteString(")")
	if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
		return fmt.Errorf("send: lower conv_counter: %w", err)
	}
	return nil
}

func createGroupTx(ctx context.Context, db *sql.DB, groupID uint64, sorted []uint64, hash []byte) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return fmt.Errorf("%w: create group: begin: %v", model.ErrUnavailable, err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	now := time.Now().UTC().Truncate(time.Millisecond)
	_, err = tx.ExecContext(ctx, `INSERT INTO im_group (group_id, member_count, member_hash, created_at) VALUES (?, ?, ?, ?)`,
		groupID, len(sorted), hash, now)
	if key, dup := inbox.DupKey(err); dup && key == "PRIMARY" {
		_ = tx.Rollback()
		var stored []byte
		if err := db.QueryRowContext(ctx, `SELECT member_hash FROM im_group WHERE group_id = ?`, groupID).Scan(&stored); err != nil {
			return fmt.Errorf("%w: create group: read existing: %v", model.ErrUnavailable, err)
		}
		if string(stored) != string(hash) {
			return fmt.Errorf("%w: group %d exists with other members", model.ErrConflict, groupID)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: create group: %v", model.ErrUnavailable, err)
	}
	var sb strings.Builder
	sb.WriteString("INSERT INTO group_member (group_id, uid, joined_at) VALUES ")
	ts := now.Format("2006-01-02 15:04:05.000")
	for i, u := range sorted {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "(%d,%d,'%s')", groupID, u, ts)
	}
	if _, err := tx.ExecContext(ctx, sb.String()); err != nil {
		return fmt.Errorf("%w: create group members: %v", model.ErrUnavailable, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%w: create group: commit: %v", model.ErrUnavailable, err)
	}
	return nil
}

func loadMembers(ctx context.Context, db *sql.DB, groupID uint64) ([]uint64, error) {
	rows, err := db.QueryContext(ctx, `SELECT uid FROM group_member WHERE group_id = ? ORDER BY uid`, groupID)
	if err != nil {
		return nil, fmt.Errorf("%w: load group members: %v", model.ErrUnavailable, err)
	}
	defer rows.Close()
	var out []uint64
	for rows.Next() {
		var u uint64
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("%w: scan group member: %v", model.ErrUnavailable, err)
		}
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%w: load group members: %v", model.ErrUnavailable, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: group %d", model.ErrNotFound, groupID)
	}
	return out, nil
}

// repairConvCounters raises the batch's conversations' counters to the
// highest conv_seq stored (after a restore set conv_counter back), so that
// the next attempt continues densely above it.
func repairConvCounters(ctx context.Context, db *sql.DB, batch []*Pending) error {
	seen := map[uint64]bool{}
	var sb strings.Builder
	sb.WriteString("UPDATE conv_counter c JOIN (SELECT conv_id, MAX(conv_seq) AS m FROM msg_content WHERE conv_id IN (")
	for _, p := range batch {
		if seen[p.Msg.ConvID] {
			continue
		}
		if len(seen) > 0 {
			sb.WriteByte(',')
		}
		seen[p.Msg.ConvID] = true
		sqlin.Uint(&sb, p.Msg.ConvID)
	}
	sb.WriteString(") GROUP BY conv_id) x ON x.conv_id = c.conv_id SET c.max_seq = GREATEST(c.max_seq, x.m)")
	if _, err := db.ExecContext(ctx, sb.String()); err != nil {
		return fmt.Errorf("%w: repair conv_counter: %v", model.ErrUnavailable, err)
	}
	return nil
}
