package schema

import (
	"context"
	"database/sql"
	"fmt"

	"imlab/ref/defect"
)

// ApplyDefects applies the schema side of the shipped defects in set
// (ref/defect) after the migrations; nothing for an empty set. It changes
// the schema of the database it runs on for good, so a lab instance with
// defects must have a database of its own (a scenario run always does).
//
//   - inbox-row-twice: offline_msg loses its uk_uid_msg key, so nothing
//     in the table stops a (uid, msg_id) from being stored under two seqs.
func ApplyDefects(ctx context.Context, db *sql.DB, set defect.Set) error {
	if !set.Has(defect.InboxRowTwice) {
		return nil
	}
	var n int
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND table_name = 'offline_msg' AND index_name = 'uk_uid_msg'`).Scan(&n); err != nil {
		return fmt.Errorf("schema: defect %s: %w", defect.InboxRowTwice, err)
	}
	if n == 0 {
		return nil
	}
	// A plain index keeps the (uid, msg_id) lookups fast; only uniqueness goes.
	if _, err := db.ExecContext(ctx, `ALTER TABLE offline_msg DROP INDEX uk_uid_msg, ADD INDEX idx_uid_msg_defect (uid, msg_id)`); err != nil {
		return fmt.Errorf("schema: defect %s: %w", defect.InboxRowTwice, err)
	}
	return nil
}
