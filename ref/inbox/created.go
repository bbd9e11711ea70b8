package inbox

import "time"

// The order of offline_msg's idx_created_msg (migration 008): created_at,
// msg_id, conv_id, then the primary key uid, seq that InnoDB keeps in
// every secondary entry. Reconciliation's and retention's scans read the
// table along it a page at a time, the page key the whole entry, so rows
// sharing a created_at are neither skipped nor read twice at a page's
// edge. Both name the table o.
const (
	// CreatedOrder orders rows of offline_msg o as idx_created_msg does.
	CreatedOrder = ` ORDER BY o.created_at, o.msg_id, o.conv_id, o.uid, o.seq`
	// CreatedAfter holds for the rows of offline_msg o after one entry
	// of idx_created_msg (its arguments: CreatedAfterArgs). It is spelt
	// out key part by key part, not as a row comparison, so that MySQL
	// and MariaDB read it as ranges of the index starting at the entry
	// after that one.
	CreatedAfter = `(o.created_at > ? OR (o.created_at = ? AND
		(o.msg_id > ? OR (o.msg_id = ? AND (o.conv_id > ? OR (o.conv_id = ? AND (o.uid > ? OR (o.uid = ? AND o.seq > ?))))))))`
)

// CreatedAfterArgs are CreatedAfter's arguments for the entry (at, msgID,
// convID, uid, seq).
func CreatedAfterArgs(at time.Time, msgID, convID, uid, seq uint64) []any {
	return []any{at, at, msgID, msgID, convID, convID, uid, uid, seq}
}
