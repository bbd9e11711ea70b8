package fanout

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"

	"imlab/ref/model"
)

// eventMsgIDAt is where an encoded Event's msg_id starts (after the
// version and flags bytes; see Event.Marshal), 1-based for SUBSTRING.
const eventMsgIDAt = 3

// OutboxStatus says what mq_outbox holds of one message: the status of the
// first row whose event names msgID (model.OutboxPending, Published or
// Confirmed), or model.OutboxNone. It matches the encoded event's msg_id
// bytes, so it scans the table: it serves the lab's read-after-ACK probe
// (ref/pull.StoreReader), where mq_outbox holds only the rows not yet
// cleaned up.
func OutboxStatus(ctx context.Context, db *sql.DB, msgID uint64) (int, error) {
	st := model.OutboxNone
	key := binary.BigEndian.AppendUint64(nil, msgID)
	err := db.QueryRowContext(ctx, `SELECT status FROM mq_outbox WHERE SUBSTRING(payload, ?, 8) = ? ORDER BY id LIMIT 1`,
		eventMsgIDAt, key).Scan(&st)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return model.OutboxNone, nil
	case err != nil:
		return model.OutboxNone, fmt.Errorf("%w: fanout: outbox status: %v", model.ErrUnavailable, err)
	}
	return st, nil
}
