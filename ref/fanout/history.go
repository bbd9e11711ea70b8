package fanout

import (
	"context"
	"database/sql"
	"fmt"

	"imlab/ref/model"
)

// HistoryWriter is the history store's idempotent batch write
// (ref/history Store.WriteBatch).
type HistoryWriter interface {
	WriteBatch(ctx context.Context, msgs []model.Message) error
}

// HistorySink is the history tier: its own consumer group, so a slow
// history store never holds back inbox fan-out, and its own lag figure.
type HistorySink struct {
	db *sql.DB
	h  HistoryWriter
}

// NewHistorySink builds the history tier's handler.
func NewHistorySink(db *sql.DB, h HistoryWriter) (*HistorySink, error) {
	if db == nil || h == nil {
		return nil, fmt.Errorf("%w: history sink needs a database and a history writer", model.ErrInvalid)
	}
	return &HistorySink{db: db, h: h}, nil
}

// Handle implements Handler: bodies from the events (queue policy) or
// read back from msg_content, written as one batch.
func (s *HistorySink) Handle(ctx context.Context, ds []Delivery) error {
	msgs := make([]model.Message, 0, len(ds))
	var need []uint64
	for _, d := range ds {
		if !d.Event.HasBody {
			need = append(need, d.Event.MsgID)
		}
	}
	var found map[uint64]model.Message
	if len(need) > 0 {
		var err error
		if found, err = LoadMessages(ctx, s.db, need); err != nil {
			return err
		}
	}
	for _, d := range ds {
		if d.Event.HasBody {
			msgs = append(msgs, d.Event.Message())
			continue
		}
		m, ok := found[d.Event.MsgID]
		if !ok {
			return fmt.Errorf("%w: msg_content %d not found", model.ErrNotFound, d.Event.MsgID)
		}
		msgs = append(msgs, m)
	}
	if err := s.h.WriteBatch(ctx, msgs); err != nil {
		return fmt.Errorf("fanout: history write: %w", err)
	}
	return nil
}
