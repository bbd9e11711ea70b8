package pull

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"imlab/ref/model"
)

// StoreReader is the lab's witness of the store of record: it reads a
// uid's inbox rows (offline_msg joined with msg_content) and what the
// store holds of one message, straight from MySQL, bypassing the hot
// cache, the rate limit, the served high-water mark and the cursors. It
// writes nothing. It backs the lab routes (/v1/lab/inbox, /v1/lab/stored),
// which a server mounts only when told to (they read any uid a token names
// and cost full reads); the checker compares what it answers with the ACKs.
//
// It also reports the process's ack policy, so that the lab knows what an
// ACK promised without importing the server.
type StoreReader struct {
	db      *sql.DB
	policy  string
	timeout time.Duration
	outbox  OutboxLookup
}

// OutboxLookup returns the mq_outbox status of a message's row, or
// model.OutboxNone (ref/fanout.OutboxStatus: the queue side owns the table
// and its event format).
type OutboxLookup func(ctx context.Context, msgID uint64) (int, error)

// NewStoreReader builds the reader; policy is the send path's ack policy
// name, timeout bounds each statement, outbox (nil: every message has no
// outbox row) looks up mq_outbox.
func NewStoreReader(db *sql.DB, policy string, timeout time.Duration, outbox OutboxLookup) (*StoreReader, error) {
	if db == nil || policy == "" || timeout <= 0 {
		return nil, fmt.Errorf("%w: pull: store reader needs a db, a policy and a timeout", model.ErrInvalid)
	}
	return &StoreReader{db: db, policy: policy, timeout: timeout, outbox: outbox}, nil
}

// Policy is the process's ack policy.
func (r *StoreReader) Policy() string { return r.policy }

// Inbox reads at most limit (1..model.MaxPullLimit) of uid's inbox rows
// with seq > after, in seq order, by primary key range (never OFFSET).
// NextCursor is the last seq returned (after when none); HasMore says rows
// remain. Rows whose content is gone come back Missing.
func (r *StoreReader) Inbox(ctx context.Context, uid, after uint64, limit int) (model.PullResult, error) {
	if uid == 0 || limit < 1 || limit > model.MaxPullLimit {
		return model.PullResult{}, fmt.Errorf("%w: store read of uid %d limit %d (1..%d)", model.ErrInvalid, uid, limit, model.MaxPullLimit)
	}
	qctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	rows, err := r.db.QueryContext(qctx, selectEntries+` WHERE o.uid = ? AND o.seq > ? ORDER BY o.seq LIMIT ?`, uid, after, limit+1)
	if err != nil {
		return model.PullResult{}, dbErr("store inbox query", err)
	}
	entries, err := scanEntries(rows, uid, limit+1)
	if err != nil {
		return model.PullResult{}, dbErr("store inbox scan", err)
	}
	res := model.PullResult{NextCursor: after, Source: SourceMySQL, HasMore: len(entries) > limit}
	if res.HasMore {
		entries = entries[:limit]
	}
	res.Msgs = entries
	if len(entries) > 0 {
		res.NextCursor = entries[len(entries)-1].Seq
	}
	return res, nil
}

// Message reads what the store holds of msgID for uid: the msg_content
// row, uid's offline_msg row (uk_uid_msg), and the mq_outbox row whose
// event names the message (through the OutboxLookup).
func (r *StoreReader) Message(ctx context.Context, uid, msgID uint64) (model.StoredMessage, error) {
	if uid == 0 || msgID == 0 {
		return model.StoredMessage{}, fmt.Errorf("%w: store read of uid %d msg_id %d", model.ErrInvalid, uid, msgID)
	}
	qctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	m := model.StoredMessage{MsgID: msgID, UID: uid, Outbox: model.OutboxNone}
	// The reads are separate statements, each seeing the latest commit, so
	// their order is what makes the answer one the store really held: the
	// outbox row first (the inbox tier confirms it in the transaction that
	// writes the inbox rows, so a confirmed or vanished row means the inbox
	// rows read next are visible), then the content (committed with or
	// before the outbox row), then the inbox row. Read the other way round,
	// a consumer committing between the inbox read and the outbox read made
	// a message look held by neither.
	var err error
	if r.outbox != nil {
		if m.Outbox, err = r.outbox(qctx, msgID); err != nil {
			return m, fmt.Errorf("pull: store outbox row: %w", err)
		}
	}
	err = r.db.QueryRowContext(qctx, `SELECT conv_id, conv_seq FROM msg_content WHERE msg_id = ?`, msgID).Scan(&m.ConvID, &m.ConvSeq)
	switch {
	case err == nil:
		m.Content = true
	case !errors.Is(err, sql.ErrNoRows):
		return m, dbErr("store content", err)
	}
	err = r.db.QueryRowContext(qctx, `SELECT seq FROM offline_msg WHERE uid = ? AND msg_id = ?`, uid, msgID).Scan(&m.InboxSeq)
	switch {
	case err == nil:
		m.InInbox = true
	case !errors.Is(err, sql.ErrNoRows):
		return m, dbErr("store inbox row", err)
	}
	return m, nil
}
