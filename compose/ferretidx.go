package compose

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	_ "modernc.org/sqlite" // database/sql driver "sqlite" (FerretDB's own SQLite)
)

// The embedded MongoDB's _id lookups, made indexed as on MongoDB.
//
// FerretDB v1's SQLite backend stores a collection as a table of one JSON
// column and serves a filter {_id: "<string>"} (the only one it pushes down)
// with `WHERE _ferretdb_sjson->'$._id' = ?`, but creates the collection's
// unique _id index on the expression `_ferretdb_sjson->"_id"`. SQLite matches
// an index to a query by the expression's text, so the lookup never uses that
// index: every find, update and delete by _id scans the whole table and parses
// every document's JSON (EXPLAIN QUERY PLAN says "SCAN"). With history buckets
// of 100 slots that cost grows with the collection: 500 buckets took 538 ms
// per update by _id, 7 ms with an index on the query's own expression.
//
// ferretIDIndexes adds that index (named "<table>_imlab_id_lookup") to every
// collection table of every database file under FerretDB's directory, so that
// the stand-in answers an _id lookup as MongoDB does. The index is SQLite's
// only: FerretDB's listIndexes does not show it, it goes when the collection
// is dropped (and is added again if it is re-created), and it changes no
// document.

// ferretIDIndexSuffix names the added index: "<table>" + suffix.
const ferretIDIndexSuffix = "_imlab_id_lookup"

// ferretIDIndexEvery is how often the directory is looked at for new
// collections (a collection is indexed at most this long after it appears).
const ferretIDIndexEvery = 500 * time.Millisecond

// ferretIDIndexes holds what one pass found, so that a later pass only
// opens the files whose tables may have changed.
type ferretIDIndexes struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex
	// failed names the tables whose index failed once (logged once).
	failed map[string]bool
}

func newFerretIDIndexes(dir string, log *slog.Logger) *ferretIDIndexes {
	return &ferretIDIndexes{dir: dir, log: log, failed: map[string]bool{}}
}

// run indexes the directory every ferretIDIndexEvery until ctx ends.
func (x *ferretIDIndexes) run(ctx context.Context) {
	t := time.NewTicker(ferretIDIndexEvery)
	defer t.Stop()
	for {
		x.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass indexes every database file of the directory once and returns the
// number of indexes it created.
func (x *ferretIDIndexes) pass(ctx context.Context) int {
	files, err := filepath.Glob(filepath.Join(x.dir, "*.sqlite"))
	if err != nil {
		return 0
	}
	n := 0
	for _, f := range files {
		if ctx.Err() != nil {
			return n
		}
		c, err := indexFerretFile(ctx, f)
		n += c
		if err != nil {
			x.warnOnce(f, err)
		}
	}
	return n
}

func (x *ferretIDIndexes) warnOnce(key string, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.failed[key] || x.log == nil {
		return
	}
	x.failed[key] = true
	x.log.Warn("compose: embedded MongoDB: _id lookups of " + filepath.Base(key) + " stay unindexed (full scans): " + err.Error())
}

// errNotFerretFile: the file holds no FerretDB metadata table (yet): it is
// being created or dropped. Not worth a warning; the next pass looks again.
var errNotFerretFile = errors.New("no FerretDB metadata table")

// indexFerretFile adds the _id lookup index to every collection table of one
// FerretDB database file that lacks it. It never creates the file (mode=rw):
// a database dropped meanwhile stays dropped.
func indexFerretFile(ctx context.Context, path string) (int, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, nil // dropped meanwhile
	}
	// The URI is written as FerretDB writes its own ("file:" + path).
	db, err := sql.Open("sqlite", "file:"+path+"?mode=rw&_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	missing, err := tablesWithoutIDIndex(ctx, db)
	if errors.Is(err, errNotFerretFile) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	for _, table := range missing {
		q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %q ON %q (_ferretdb_sjson->'$._id')`, table+ferretIDIndexSuffix, table)
		if _, err := db.ExecContext(ctx, q); err != nil {
			if strings.Contains(err.Error(), "no such table") {
				continue // dropped between the listing and now
			}
			return n, fmt.Errorf("index %s: %w", table, err)
		}
		n++
	}
	return n, nil
}

// tablesWithoutIDIndex lists the collection tables (FerretDB's metadata
// table names them) that have no _id lookup index yet.
func tablesWithoutIDIndex(ctx context.Context, db *sql.DB) ([]string, error) {
	rows, err := db.QueryContext(ctx, `SELECT c.table_name FROM "_ferretdb_collections" c
		WHERE EXISTS (SELECT 1 FROM sqlite_master t WHERE t.type = 'table' AND t.name = c.table_name)
		AND NOT EXISTS (SELECT 1 FROM sqlite_master i WHERE i.type = 'index' AND i.name = c.table_name || ?)`, ferretIDIndexSuffix)
	if err != nil {
		if strings.Contains(err.Error(), "no such table") {
			return nil, errNotFerretFile
		}
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var t string
		if err := rows.Scan(&t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
