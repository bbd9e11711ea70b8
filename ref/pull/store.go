package pull

import (
	"context"
	"database/sql"
	"encoding/binary"
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
}

// NewStoreReader builds the reader; policy is the send path's ack policy
// name, timeout bounds each statement.
func NewStoreReader(db *sql.DB, policy string, timeout time.Duration) (*StoreReader, error) {
	if db == nil || policy == "" || timeout <= 0 {
		return nil, fmt.Errorf("%w: pull: store reader needs a db, a policy and a timeout", model.ErrInvalid)
	}
	return &StoreReader{db: db, policy: policy, timeout: timeout}, nil
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
// event names the message (matched on the event's msg_id bytes; the lab's
// tables are small, this scans mq_outbox).
func (r *StoreReader) Message(ctx context.Context, uid, msgID uint64) (model.StoredMessage, error) {
	if uid == 0 || msgID == 0 {
		return model.StoredMessage{}, fmt.Errorf("%w: store read of uid %d msg_id %d", model.ErrInvalid, uid, msgID)
	}
	qctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	m := model.StoredMessage{MsgID: msgID, UID: uid, Outbox: model.OutboxNone}
	err := r.db.QueryRowContext(qctx, `SELECT conv_id, conv_seq FROM msg_content WHERE msg_id = ?`, msgID).Scan(&m.ConvID, &m.ConvSeq)
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
	// The event's msg_id is bytes 3..10 (1-based) of the payload, big endian.
	key := binary.BigEndian.AppendUint64(nil, msgID)
	err = r.db.QueryRowContext(qctx, `SELECT status FROM mq_outbox WHERE SUBSTRING(payload, 3, 8) = ? ORDER BY id LIMIT 1`, key).Scan(&m.Outbox)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		m.Outbox = model.OutboxNone
	case err != nil:
		return m, dbErr("store outbox row", err)
	}
	return m, nil
}
