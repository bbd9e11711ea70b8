package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"imlab/ref/inbox"
)

// delivered says which (uid, msg_id) of keys have an inbox row or the
// tombstone of one retention deleted (offline_tombstone): one statement
// per chunk of 500 pairs, point lookups on uk_uid_msg and on the
// tombstones' primary key.
func delivered(ctx context.Context, q inbox.Querier, keys []pair) (map[pair]bool, error) {
	have := make(map[pair]bool, len(keys))
	const chunk = 500
	for start := 0; start < len(keys); start += chunk {
		end := min(start+chunk, len(keys))
		args := make([]any, 0, 4*(end-start))
		for _, k := range keys[start:end] {
			args = append(args, k.uid, k.msgID)
		}
		in := strings.TrimSuffix(strings.Repeat("(?,?),", end-start), ",")
		stmt := "SELECT uid, msg_id FROM offline_msg WHERE (uid, msg_id) IN (" + in +
			") UNION ALL SELECT uid, msg_id FROM offline_tombstone WHERE (uid, msg_id) IN (" + in + ")"
		rows, err := q.QueryContext(ctx, stmt, append(args, args...)...)
		if err != nil {
			return nil, fmt.Errorf("reconcile: inbox lookup: %w", err)
		}
		for rows.Next() {
			var p pair
			if err := rows.Scan(&p.uid, &p.msgID); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reconcile: inbox lookup row: %w", err)
			}
			have[p] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("reconcile: inbox lookup rows: %w", err)
		}
	}
	return have, nil
}

// existing says which (uid, msg_id) of items are delivered (delivered).
func (r *Reconciler) existing(ctx context.Context, items []fanoutItem) (map[pair]bool, error) {
	keys := make([]pair, len(items))
	for i, it := range items {
		keys[i] = pair{it.UID, it.MsgID}
	}
	return delivered(ctx, r.db, keys)
}

// RepairDedup is the inbox dedup of the forward pass's writer: a
// (uid, msg_id) with an inbox row or a retention tombstone is delivered.
// It runs in the write transaction after the fence rows are locked, so a
// row retention deleted (and tombstoned) between the pass's lookup and its
// write is not written again either.
type RepairDedup struct{}

// Name implements inbox.Dedup.
func (RepairDedup) Name() string { return "uk_uid_msg+tombstone" }

// Fresh implements inbox.Dedup.
func (RepairDedup) Fresh(ctx context.Context, tx *sql.Tx, items []inbox.Item) ([]inbox.Item, error) {
	keys := make([]pair, len(items))
	for i, it := range items {
		keys[i] = pair{it.UID, it.MsgID}
	}
	have, err := delivered(ctx, tx, keys)
	if err != nil {
		return nil, err
	}
	if len(have) == 0 {
		return items, nil
	}
	out := make([]inbox.Item, 0, len(items)-len(have))
	for _, it := range items {
		if !have[pair{it.UID, it.MsgID}] {
			out = append(out, it)
		}
	}
	return out, nil
}
