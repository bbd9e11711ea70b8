package retention

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"imlab/ref/inbox"
)

// The scan's statements: offline_msg's rows created before the pass's
// later cut-off, along idx_created_msg (inbox.CreatedOrder), a page at a
// time after the last entry read (inbox.CreatedAfter). The columns are the
// index's: the pass reads the index alone.
const (
	scanCols  = `SELECT o.uid, o.seq, o.msg_id, o.conv_id, o.created_at FROM offline_msg o FORCE INDEX (idx_created_msg) `
	scanOrder = inbox.CreatedOrder + ` LIMIT ?`
	scanFirst = scanCols + `WHERE o.created_at < ?` + scanOrder
	scanAfter = scanCols + `WHERE o.created_at >= ? AND o.created_at < ? AND ` + inbox.CreatedAfter + scanOrder
)

// entry is one offline_msg row as idx_created_msg holds it.
type entry struct {
	key
	msgID, convID uint64
	at            time.Time
}

type scanPage struct {
	n          int
	last       entry
	candidates []key // in (uid, seq) order
}

// scan reads one page of the rows created before b.until(), after the entry
// after (from the start when nil), and picks the rows that may go: expired,
// or old enough and at or below their uid's floor.
func (r *Retention) scan(ctx context.Context, after *entry, b bounds) (scanPage, error) {
	var p scanPage
	var rows *sql.Rows
	var err error
	until := b.until()
	if after == nil {
		rows, err = r.db.QueryContext(ctx, scanFirst, until, r.cfg.ScanPage)
	} else {
		args := append([]any{after.at, until}, inbox.CreatedAfterArgs(after.at, after.msgID, after.convID, after.uid, after.seq)...)
		rows, err = r.db.QueryContext(ctx, scanAfter, append(args, r.cfg.ScanPage)...)
	}
	if err != nil {
		return p, fmt.Errorf("retention: scan: %w", err)
	}
	page, err := scanRows(rows)
	if err != nil {
		return p, err
	}
	if p.n = len(page); p.n == 0 {
		return p, nil
	}
	p.last = page[len(page)-1]
	var early []uint64 // uids with a row old enough to go early
	seen := map[uint64]bool{}
	for _, x := range page {
		if !x.at.Before(b.expired) && x.at.Before(b.pulled) && !seen[x.uid] {
			seen[x.uid] = true
			early = append(early, x.uid)
		}
	}
	floor, err := r.floors(ctx, early)
	if err != nil {
		return p, err
	}
	for _, x := range page {
		f, ok := floor[x.uid]
		if x.at.Before(b.expired) || (x.at.Before(b.pulled) && ok && x.seq <= f) {
			p.candidates = append(p.candidates, x.key)
		}
	}
	// The deleting transactions lock their rows in primary-key order, as
	// when the scan read the table in that order.
	slices.SortFunc(p.candidates, func(a, b key) int { return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.seq, b.seq)) })
	return p, nil
}

// scanRows reads one page of the scan and closes rows.
func scanRows(rows *sql.Rows) ([]entry, error) {
	defer rows.Close()
	var page []entry
	for rows.Next() {
		var x entry
		if err := rows.Scan(&x.uid, &x.seq, &x.msgID, &x.convID, &x.at); err != nil {
			return nil, fmt.Errorf("retention: scan row: %w", err)
		}
		x.at = x.at.UTC()
		page = append(page, x)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("retention: rows: %w", err)
	}
	return page, nil
}
