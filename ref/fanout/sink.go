package fanout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"imlab/ref/defect"
	"imlab/ref/inbox"
	"imlab/ref/model"
	"imlab/ref/send"
	"imlab/ref/sqlin"
)

// postCommitTimeout bounds the dedup marks and hooks after a COMMIT.
const postCommitTimeout = 2 * time.Second

// MembersFunc lists a group's members (ref/send's Service.Members).
type MembersFunc func(ctx context.Context, groupID uint64) ([]uint64, error)

// InboxSinkConfig configures the inbox tier's handler.
type InboxSinkConfig struct {
	// Defects are shipped defects enabled on purpose (ref/defect; empty
	// by default): the lab's negative controls.
	Defects defect.Set
	// MaxRowsPerTx bounds inbox rows per transaction; a batch with more is
	// written in several transactions, in delivery order, never splitting
	// one message. It must hold one full group.
	MaxRowsPerTx int
	// TxAttempts bounds retries of one transaction on deadlock / lock wait.
	TxAttempts int
}

// DefaultInboxSinkConfig: 4096 rows per transaction, 3 attempts.
func DefaultInboxSinkConfig() InboxSinkConfig {
	return InboxSinkConfig{MaxRowsPerTx: 4096, TxAttempts: 3}
}

// Validate checks the configuration.
func (c InboxSinkConfig) Validate() error {
	if c.MaxRowsPerTx < model.MaxGroupMembers || c.MaxRowsPerTx > 50_000 {
		return fmt.Errorf("%w: inbox sink rows per transaction out of %d..50000", model.ErrInvalid, model.MaxGroupMembers)
	}
	if c.TxAttempts < 1 || c.TxAttempts > 10 {
		return fmt.Errorf("%w: inbox sink transaction attempts out of 1..10", model.ErrInvalid)
	}
	return nil
}

// InboxSink is the inbox tier: for each delivery it takes the body from
// the event (Stored: a copy of the committed msg_content row), or stores
// the one it carries (the queue policy), or reads it back from msg_content
// (a locator-only event), writes every recipient's inbox row through the fenced,
// idempotent inbox writer, confirms relayed outbox rows (status 2) in the
// same transaction, then sets the strategy's post-commit marks and calls
// the hooks (hot ZSet, then online push). Inbox rows first, always.
type InboxSink struct {
	cfg      InboxSinkConfig
	db       *sql.DB
	w        *inbox.Writer
	strategy Strategy
	members  MembersFunc
	hooks    []send.CommitHook
	log      *slog.Logger
}

// NewInboxSink builds the inbox tier. w must have been built with strategy
// as its Config.Dedup (NewInboxWriterConfig does that).
func NewInboxSink(cfg InboxSinkConfig, db *sql.DB, w *inbox.Writer, strategy Strategy, members MembersFunc, log *slog.Logger, hooks ...send.CommitHook) (*InboxSink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if db == nil || w == nil || strategy == nil || members == nil {
		return nil, fmt.Errorf("%w: inbox sink needs a database, a writer, a strategy and a member source", model.ErrInvalid)
	}
	if w.Dedup() != inbox.Dedup(strategy) {
		return nil, fmt.Errorf("%w: inbox writer does not use the sink's dedup strategy", model.ErrInvalid)
	}
	if log == nil {
		log = slog.Default()
	}
	return &InboxSink{cfg: cfg, db: db, w: w, strategy: strategy, members: members, hooks: hooks, log: log}, nil
}

// Strategy is the sink's dedup strategy.
func (s *InboxSink) Strategy() Strategy { return s.strategy }

type unit struct {
	d     Delivery
	msg   model.Message
	items []inbox.Item
}

// Handle implements Handler.
func (s *InboxSink) Handle(ctx context.Context, ds []Delivery) error {
	// Events whose inbox rows were committed before publishing (strict's
	// history feed) need no lookup, no body and no transaction here.
	var todo []Delivery
	for i, d := range ds {
		if d.Event.InboxDone {
			if todo == nil {
				todo = append(make([]Delivery, 0, len(ds)), ds[:i]...)
			}
			continue
		}
		if todo != nil {
			todo = append(todo, d)
		}
	}
	if todo != nil {
		ds = todo
	}
	if s.cfg.Defects.Has(defect.ConsumerSkips) {
		// Defect: about one record in 8 is acknowledged unwritten.
		kept := ds[:0:0]
		for _, d := range ds {
			if !defect.Sampled(d.Event.MsgID, 8) {
				kept = append(kept, d)
			}
		}
		ds = kept
	}
	if len(ds) == 0 {
		return nil
	}
	units, err := s.resolve(ctx, ds)
	if err != nil {
		return err
	}
	_, err = s.commitAll(ctx, units)
	return err
}

// commitAll commits units in order, in transactions of at most
// MaxRowsPerTx rows (a unit is never split), and returns how many units
// were committed before any error.
func (s *InboxSink) commitAll(ctx context.Context, units []unit) (int, error) {
	for start := 0; start < len(units); {
		rows := 0
		end := start
		for end < len(units) && (end == start || rows+len(units[end].items) <= s.cfg.MaxRowsPerTx) {
			rows += len(units[end].items)
			end++
		}
		if err := s.commit(ctx, units[start:end]); err != nil {
			return start, err
		}
		start = end
	}
	return len(units), nil
}

// HandleChained is Handle for the direct fan-out (queue down): it writes
// only the deliveries that extend their conversation's chain in every
// recipient's inbox — conv_seq 1, or the predecessor (conv_seq-1) already
// in each recipient's inbox or written ahead of it in this call — and
// returns how many it deferred. A deferred message is written later, in
// order, by the consumers (outbox: the relay publishes every row once the
// queue is back) or by forward reconciliation (store: a failed publish), so
// the degraded path never puts a message into an inbox ahead of an earlier
// one of its conversation.
func (s *InboxSink) HandleChained(ctx context.Context, ds []Delivery) (written, deferred int, err error) {
	if len(ds) == 0 {
		return 0, 0, nil
	}
	units, err := s.resolve(ctx, ds)
	if err != nil {
		return 0, 0, err
	}
	ready, err := s.chainReady(ctx, units)
	if err != nil {
		return 0, 0, err
	}
	keep := units[:0]
	for i, u := range units {
		if ready[i] {
			keep = append(keep, u)
		}
	}
	deferred = len(units) - len(keep)
	written, err = s.commitAll(ctx, keep)
	return written, deferred, err
}

// convSeq names a message by its place in its conversation.
type convSeq struct{ conv, seq uint64 }

// chainReady says, for each unit in order, whether its predecessor is in
// every one of its recipients' inboxes (or ready ahead of it here).
func (s *InboxSink) chainReady(ctx context.Context, units []unit) ([]bool, error) {
	here := make(map[convSeq]int, len(units)) // unit index by place
	for i, u := range units {
		here[convSeq{u.msg.ConvID, u.msg.ConvSeq}] = i
	}
	var preds []convSeq
	for _, u := range units {
		p := convSeq{u.msg.ConvID, u.msg.ConvSeq - 1}
		if _, ok := here[p]; u.msg.ConvSeq > 1 && !ok {
			preds = append(preds, p)
		}
	}
	predID, err := s.msgIDsAt(ctx, preds)
	if err != nil {
		return nil, err
	}
	var keys []inbox.Key
	for _, u := range units {
		if id, ok := predID[convSeq{u.msg.ConvID, u.msg.ConvSeq - 1}]; ok {
			for _, it := range u.items {
				keys = append(keys, inbox.Key{UID: it.UID, MsgID: id})
			}
		}
	}
	have, err := inbox.Delivered(ctx, s.db, keys)
	if err != nil {
		return nil, fmt.Errorf("fanout: chain check: %w", err)
	}
	ready := make([]bool, len(units))
	for i, u := range units {
		p := convSeq{u.msg.ConvID, u.msg.ConvSeq - 1}
		switch j, inBatch := here[p]; {
		case u.msg.ConvSeq <= 1:
			ready[i] = true
		case inBatch:
			ready[i] = j < i && ready[j]
		default:
			if id, ok := predID[p]; ok {
				ready[i] = true
				for _, it := range u.items {
					if !have[inbox.Key{UID: it.UID, MsgID: id}] {
						ready[i] = false
						break
					}
				}
			}
		}
	}
	return ready, nil
}

// msgIDsAt looks the msg_ids of conversation places up on uk_conv_seq.
func (s *InboxSink) msgIDsAt(ctx context.Context, at []convSeq) (map[convSeq]uint64, error) {
	out := make(map[convSeq]uint64, len(at))
	for start := 0; start < len(at); start += dedupChunk {
		end := min(start+dedupChunk, len(at))
		var sb strings.Builder
		sb.WriteString("SELECT conv_id, conv_seq, msg_id FROM msg_content WHERE ")
		args := sqlin.Pairs(&sb, "conv_id", "conv_seq", end-start, make([]any, 0, 2*(end-start)), func(i int) (any, any) {
			return at[start+i].conv, at[start+i].seq
		})
		rows, err := s.db.QueryContext(ctx, sb.String(), args...)
		if err != nil {
			return nil, fmt.Errorf("fanout: predecessor lookup: %w", err)
		}
		for rows.Next() {
			var k convSeq
			var id uint64
			if err := rows.Scan(&k.conv, &k.seq, &id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("fanout: predecessor scan: %w", err)
			}
			out[k] = id
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("fanout: predecessor rows: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("fanout: predecessor rows: %w", err)
		}
	}
	return out, nil
}

// resolve loads bodies and recipients, in delivery order.
func (s *InboxSink) resolve(ctx context.Context, ds []Delivery) ([]unit, error) {
	units := make([]unit, len(ds))
	var need []uint64
	for i, d := range ds {
		units[i].d = d
		if d.Event.HasBody {
			units[i].msg = d.Event.Message()
		} else {
			need = append(need, d.Event.MsgID)
		}
	}
	if len(need) > 0 {
		found, err := LoadMessages(ctx, s.db, need)
		if err != nil {
			return nil, err
		}
		for i := range units {
			if units[i].d.Event.HasBody {
				continue
			}
			m, ok := found[units[i].d.Event.MsgID]
			if !ok {
				return nil, fmt.Errorf("%w: msg_content %d not found", model.ErrNotFound, units[i].d.Event.MsgID)
			}
			units[i].msg = m
		}
	}
	groups := map[uint64][]uint64{}
	for i := range units {
		m := units[i].msg
		t, a, _, err := model.ParseConvID(m.ConvID)
		if err != nil {
			return nil, Permanent(err)
		}
		var members []uint64
		if t == model.ConvGroup {
			if members = groups[a]; members == nil {
				if members, err = s.members(ctx, a); err != nil {
					if errors.Is(err, model.ErrNotFound) {
						return nil, Permanent(fmt.Errorf("group %d: %w", a, err))
					}
					return nil, fmt.Errorf("fanout: members of group %d: %w", a, err)
				}
				groups[a] = members
			}
		}
		rcpts, err := Recipients(m.ConvID, members)
		if err != nil {
			return nil, Permanent(err)
		}
		units[i].items = ItemsOf(m, rcpts)
	}
	return units, nil
}

// ItemsOf lists one inbox item per recipient of m, recipients ascending.
func ItemsOf(m model.Message, rcpts []uint64) []inbox.Item {
	rs := append([]uint64(nil), rcpts...)
	sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
	items := make([]inbox.Item, 0, len(rs))
	for i, uid := range rs {
		if i > 0 && rs[i-1] == uid {
			continue
		}
		items = append(items, inbox.Item{UID: uid, MsgID: m.MsgID, ConvID: m.ConvID, ConvType: m.ConvType,
			ConvSeq: m.ConvSeq, SenderUID: m.SenderUID, CreatedAt: m.CreatedAt, Content: m.Content})
	}
	return items
}

func (s *InboxSink) commit(ctx context.Context, units []unit) error {
	var items []inbox.Item
	var bodies []model.Message
	var outbox []uint64
	for _, u := range units {
		items = append(items, u.items...)
		if u.d.Event.HasBody && !u.d.Event.Stored {
			bodies = append(bodies, u.msg)
		}
		if u.d.OutboxID != 0 {
			outbox = append(outbox, u.d.OutboxID)
		}
	}
	var entries []model.InboxEntry
	var err error
	for attempt := 1; ; attempt++ {
		entries, err = s.tx(ctx, items, bodies, outbox)
		if err == nil {
			break
		}
		if !inbox.Retryable(err) || attempt >= s.cfg.TxAttempts || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(attempt) * 5 * time.Millisecond)
	}
	// The rows are committed: finish the post-commit steps even when the
	// consumer is being stopped, within their own bound.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), postCommitTimeout)
	defer cancel()
	if err := s.strategy.AfterCommit(pctx, items); err != nil {
		// A missing mark only costs a lookup later: uk_uid_msg still guards.
		s.log.Warn("dedup marks not set", "err", err)
	}
	for _, h := range s.hooks {
		h.Committed(pctx, entries)
	}
	return nil
}

func (s *InboxSink) tx(ctx context.Context, items []inbox.Item, bodies []model.Message, outbox []uint64) ([]model.InboxEntry, error) {
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("fanout: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if len(bodies) > 0 {
		if err := StoreMessages(ctx, tx, bodies); err != nil {
			return nil, err
		}
	}
	var entries []model.InboxEntry
	if s.strategy.atInsert() {
		// uk_uid_msg is the whole check: the INSERT makes it (see
		// ukStrategy).
		entries, err = s.w.WriteKeyCheckedTx(ctx, tx, items)
	} else {
		entries, err = s.w.WriteTx(ctx, tx, items)
	}
	if err != nil {
		return nil, fmt.Errorf("fanout: inbox write: %w", err)
	}
	if len(outbox) > 0 {
		if err := ConfirmOutbox(ctx, tx, outbox); err != nil {
			return nil, err
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("fanout: commit: %w", err)
	}
	if s.strategy.atInsert() {
		s.strategy.skip(len(items) - len(entries))
	}
	return entries, nil
}

// ConfirmOutbox marks relayed outbox rows consumed (status 2).
func ConfirmOutbox(ctx context.Context, ex execer, ids []uint64) error {
	for start := 0; start < len(ids); start += dedupChunk {
		end := min(start+dedupChunk, len(ids))
		q := "UPDATE mq_outbox SET status = 2 WHERE id IN (" + placeholders(end-start) + ") AND status < 2"
		args := make([]any, 0, end-start)
		for _, id := range ids[start:end] {
			args = append(args, id)
		}
		if _, err := ex.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("fanout: confirm outbox: %w", err)
		}
	}
	return nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}

// LoadMessages reads msg_content rows by msg_id.
func LoadMessages(ctx context.Context, q querier, ids []uint64) (map[uint64]model.Message, error) {
	out := make(map[uint64]model.Message, len(ids))
	for start := 0; start < len(ids); start += dedupChunk {
		end := min(start+dedupChunk, len(ids))
		args := make([]any, 0, end-start)
		for _, id := range ids[start:end] {
			args = append(args, id)
		}
		rows, err := q.QueryContext(ctx, `SELECT msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at
			FROM msg_content WHERE msg_id IN (`+placeholders(end-start)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("fanout: load msg_content: %w", err)
		}
		for rows.Next() {
			var m model.Message
			var content []byte
			if err := rows.Scan(&m.MsgID, &m.ConvID, &m.ConvType, &m.ConvSeq, &m.SenderUID, &m.ClientMsgID, &content, &m.CreatedAt); err != nil {
				rows.Close()
				return nil, fmt.Errorf("fanout: scan msg_content: %w", err)
			}
			m.Content = string(content)
			m.CreatedAt = m.CreatedAt.UTC()
			out[m.MsgID] = m
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("fanout: msg_content rows: %w", err)
		}
	}
	return out, nil
}

// StoreMessages inserts bodies the queue policy did not store before its
// ACK. A body already stored (a redelivery) is left as it is.
func StoreMessages(ctx context.Context, ex execer, ms []model.Message) error {
	for start := 0; start < len(ms); start += dedupChunk {
		end := min(start+dedupChunk, len(ms))
		var sb strings.Builder
		args := make([]any, 0, 8*(end-start))
		sb.WriteString(`INSERT IGNORE INTO msg_content
			(msg_id, conv_id, conv_type, conv_seq, sender_uid, client_msg_id, content, created_at) VALUES `)
		for i := start; i < end; i++ {
			if i > start {
				sb.WriteByte(',')
			}
			sb.WriteString("(?,?,?,?,?,?,?,?)")
			m := ms[i]
			args = append(args, m.MsgID, m.ConvID, m.ConvType, m.ConvSeq, m.SenderUID, m.ClientMsgID, []byte(m.Content), m.CreatedAt.UTC())
		}
		if _, err := ex.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("fanout: store msg_content: %w", err)
		}
	}
	return nil
}
