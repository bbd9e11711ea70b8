package fanout

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"imlab/ref/model"
)

// eventMsgIDAt is where an encoded Event's msg_id starts (after the
// version and flags bytes; see Event.Marshal), 1-based for SUBSTRING.
const eventMsgIDAt = 3

// eventMsgIDHexAt is where the msg_id starts in HEX(payload), 1-based: the
// lookup compares hex digits, not raw bytes, because go-mysql-server (the
// embedded MySQL) takes SUBSTRING of a VARBINARY as text and never matches
// bytes >= 0x80 (every real msg_id has some); MySQL and MariaDB answer both
// forms alike.
const eventMsgIDHexAt = 2*(eventMsgIDAt-1) + 1

// OutboxStatus says what mq_outbox holds of one message: the status of the
// first row whose event names msgID (model.OutboxPending, Published or
// Confirmed), or model.OutboxNone. It matches the encoded event's msg_id
// bytes, so it scans the table: it serves the lab's read-after-ACK probe
// (ref/pull.StoreReader), where mq_outbox holds only the rows not yet
// cleaned up.
func OutboxStatus(ctx context.Context, db *sql.DB, msgID uint64) (int, error) {
	st := model.OutboxNone
	key := strings.ToUpper(hex.EncodeToString(binary.BigEndian.AppendUint64(nil, msgID)))
	// First the raw bytes: MySQL and MariaDB compare 8 binary bytes per
	// row, cheap beside hexing every payload (the event carries the body,
	// up to 4 KB, and a probe that hexed each row cost mariadbd more than
	// the sends it probed). The embedded engine never matches bytes >= 0x80
	// that way, so an empty answer is asked again in hex digits, which
	// every engine answers alike.
	raw := binary.BigEndian.AppendUint64(nil, msgID)
	err := db.QueryRowContext(ctx, `SELECT status FROM mq_outbox WHERE SUBSTRING(payload, ?, 8) = ? ORDER BY id LIMIT 1`,
		eventMsgIDAt, raw).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		err = db.QueryRowContext(ctx, `SELECT status FROM mq_outbox WHERE SUBSTRING(HEX(payload), ?, 16) = ? ORDER BY id LIMIT 1`,
			eventMsgIDHexAt, key).Scan(&st)
	}
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return model.OutboxNone, nil
	case err != nil:
		return model.OutboxNone, fmt.Errorf("%w: fanout: outbox status: %v", model.ErrUnavailable, err)
	}
	return st, nil
}
