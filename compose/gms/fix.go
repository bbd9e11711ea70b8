package gms

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/dolthub/go-mysql-server/memory"
	gmssql "github.com/dolthub/go-mysql-server/sql"
	vmysql "github.com/dolthub/vitess/go/mysql"
	"github.com/dolthub/vitess/go/vt/sqlparser"
)

// gmsEngine makes go-mysql-server's memory engine behave as MySQL does in
// the two places where it differs and the reference server depends on it
// (ARCHITECTURE.md, "The embedded MySQL"). The serialising handler calls it
// while it holds the engine lock.
//
//   - Indexes after a transaction that did not commit. A transaction works
//     on a copy of each table it touches, and the copy shares its secondary
//     index entries (each a row's key and its position) with the committed
//     table. A write re-sorts the copy and rewrites the positions in those
//     shared entries; COMMIT installs the copy, but ROLLBACK, or a client
//     gone inside its transaction, leaves the committed table with entries
//     that point at other rows. A lookup through uk_uid_msg then answers
//     another row or none (an inbox row reads as absent, a redelivery's
//     duplicate check misses, the relay's (status, id) scan skips rows).
//     rebuildIndexes rewrites every table such a transaction wrote, which
//     builds its indexes afresh from its rows.
//   - The key of a duplicate-key error. MySQL names it (error 1062,
//     "Duplicate entry '3-386...' for key 'offline_msg.uk_uid_msg'"); the
//     engine says "duplicate unique key given: [3386...]". The write path
//     tells a (uid, seq) PRIMARY collision from an already delivered
//     (uid, msg_id), and a retried send from a conversation-seq conflict, by
//     that name. nameDupKey names it as MySQL 8 does.
type gmsEngine struct {
	pro *memory.DbProvider
	log *slog.Logger // one line per rebuilt table; nil: none
}

// context returns an engine context with a session of its own (the memory
// engine keeps a transaction's table copies in the session).
func (e *gmsEngine) context() (*gmssql.Context, *memory.Session) {
	sess := memory.NewSession(gmssql.NewBaseSession(), e.pro)
	return gmssql.NewContext(context.Background(), gmssql.WithSession(sess)), sess
}

// txWrites is what a transaction wrote, as far as its statements' text
// tells: table names (lower case, "db.table" when qualified), or all
// tables when a statement's target could not be read.
type txWrites struct {
	tables map[string]bool
	all    bool
}

func (w *txWrites) empty() bool { return !w.all && len(w.tables) == 0 }

// note records the tables statement q may write.
func (w *txWrites) note(q string) {
	if w.all {
		return
	}
	table, writes, known := writeTarget(q)
	switch {
	case !writes:
	case !known:
		w.all, w.tables = true, nil
	default:
		if w.tables == nil {
			w.tables = make(map[string]bool)
		}
		w.tables[table] = true
	}
}

// rebuildIndexes rewrites each table w names (every table, when w.all)
// that has a secondary index, in every database: the table's rows are read
// and written into a fresh table of the same schema and indexes, which
// replaces it. Cost: the memory engine checks every key of every row it
// inserts against the rows before it, so a rewrite of n rows is O(n²)
// comparisons (BenchmarkEmbeddedAbortRebuild); it runs only after a
// writing transaction ended without COMMIT.
func (e *gmsEngine) rebuildIndexes(w txWrites) error {
	if w.empty() {
		return nil
	}
	ctx, sess := e.context()
	rewrote := false
	for _, db := range e.pro.AllDatabases(ctx) {
		names, err := db.GetTableNames(ctx)
		if err != nil {
			return fmt.Errorf("embedded MySQL: tables of %s: %w", db.Name(), err)
		}
		for _, name := range names {
			lower := strings.ToLower(name)
			if !w.all && !w.tables[lower] && !w.tables[strings.ToLower(db.Name())+"."+lower] {
				continue
			}
			start := time.Now()
			n, err := rewriteTable(ctx, db, name)
			if err != nil {
				return fmt.Errorf("embedded MySQL: rebuild the indexes of %s.%s: %w", db.Name(), name, err)
			}
			if n >= 0 {
				rewrote = true
				if e.log != nil {
					e.log.Info("embedded MySQL: rebuilt the indexes of a table an aborted transaction wrote",
						"table", db.Name()+"."+name, "rows", n, "took", time.Since(start).Round(time.Millisecond))
				}
			}
		}
	}
	if !rewrote {
		return nil
	}
	if err := sess.CommitTransaction(ctx, nil); err != nil {
		return fmt.Errorf("embedded MySQL: install rebuilt tables: %w", err)
	}
	return nil
}

// rewriteTable rewrites table name of db if it has a secondary index, and
// returns how many rows it wrote (-1: not rewritten).
func rewriteTable(ctx *gmssql.Context, db gmssql.Database, name string) (int, error) {
	t, ok, err := db.GetTableInsensitive(ctx, name)
	if err != nil || !ok {
		return -1, err
	}
	mt, ok := t.(*memory.Table)
	if !ok {
		return -1, nil
	}
	idxs, err := mt.GetIndexes(ctx)
	if err != nil {
		return -1, err
	}
	secondary := false
	for _, idx := range idxs {
		secondary = secondary || idx.ID() != "PRIMARY"
	}
	if !secondary {
		return -1, nil
	}
	parts, err := mt.Partitions(ctx)
	if err != nil {
		return -1, err
	}
	iter := gmssql.NewTableRowIter(ctx, mt, parts)
	var rows []gmssql.Row
	for {
		r, err := iter.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			_ = iter.Close(ctx)
			return -1, err
		}
		rows = append(rows, r)
	}
	if err := iter.Close(ctx); err != nil {
		return -1, err
	}
	sch := mt.PrimaryKeySchema()
	ins, err := mt.RewriteInserter(ctx, sch, sch, nil, nil, nil)
	if err != nil {
		return -1, err
	}
	for _, r := range rows {
		if err := ins.Insert(ctx, r); err != nil {
			_ = ins.DiscardChanges(ctx, err)
			_ = ins.Close(ctx)
			return -1, err
		}
	}
	if err := ins.Close(ctx); err != nil {
		return -1, err
	}
	return len(rows), nil
}

// Message prefixes of the memory engine's duplicate-key errors.
const (
	gmsDupPrimary = "duplicate primary key given"
	gmsDupUnique  = "duplicate unique key given"
)

// nameDupKey turns the engine's duplicate-key error of statement q into
// MySQL 8's: error 1062, SQLSTATE 23000, "Duplicate entry 'V' for key
// 'table.key'". The key is PRIMARY for a primary key collision; for a
// unique key it is the table's one unique secondary index, or, when it has
// several, the one whose columns hold the reported values in a row of the
// statement. Any other error, or one whose key cannot be told, is returned
// as it is.
func (e *gmsEngine) nameDupKey(q string, err error) error {
	var se *vmysql.SQLError
	if !errors.As(err, &se) || se.Num != vmysql.ERDupEntry {
		return err
	}
	var primary bool
	switch {
	case strings.HasPrefix(se.Message, gmsDupPrimary):
		primary = true
	case strings.HasPrefix(se.Message, gmsDupUnique):
	default:
		return err // already MySQL's form
	}
	given := se.Message[strings.IndexByte(se.Message, ':')+1:]
	given = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(given), "["), "]")
	table, writes, known := writeTarget(q)
	if !writes || !known {
		return err
	}
	keys, tableName, ok := e.uniqueKeys(table)
	if !ok {
		return err
	}
	key, entry := "PRIMARY", given
	if !primary {
		key, entry, ok = pickUniqueKey(q, keys, given)
		if !ok {
			return err
		}
	}
	return vmysql.NewSQLError(vmysql.ERDupEntry, "23000", "Duplicate entry '%s' for key '%s.%s'", entry, tableName, key)
}

// uniqueKey is one unique secondary index: its name and columns (lower
// case, in index order).
type uniqueKey struct {
	name string
	cols []string
}

// uniqueKeys lists the unique secondary indexes of table ("t" or "db.t")
// and the table's name as declared. A table name found in several
// databases must have the same unique indexes in each, or it is not
// answered.
func (e *gmsEngine) uniqueKeys(table string) ([]uniqueKey, string, bool) {
	ctx, _ := e.context()
	dbName, tname := "", table
	if i := strings.IndexByte(table, '.'); i >= 0 {
		dbName, tname = table[:i], table[i+1:]
	}
	var found []uniqueKey
	var declared string
	seen := false
	for _, db := range e.pro.AllDatabases(ctx) {
		if dbName != "" && !strings.EqualFold(db.Name(), dbName) {
			continue
		}
		t, ok, err := db.GetTableInsensitive(ctx, tname)
		if err != nil || !ok {
			continue
		}
		ia, ok := t.(gmssql.IndexAddressable)
		if !ok {
			continue
		}
		idxs, err := ia.GetIndexes(ctx)
		if err != nil {
			return nil, "", false
		}
		var keys []uniqueKey
		for _, idx := range idxs {
			if !idx.IsUnique() || idx.ID() == "PRIMARY" {
				continue
			}
			k := uniqueKey{name: idx.ID()}
			for _, ex := range idx.Expressions() { // "table.column"
				k.cols = append(k.cols, strings.ToLower(ex[strings.LastIndexByte(ex, '.')+1:]))
			}
			keys = append(keys, k)
		}
		if seen && fmt.Sprint(keys) != fmt.Sprint(found) {
			return nil, "", false
		}
		found, declared, seen = keys, t.Name(), true
	}
	return found, declared, seen
}

// pickUniqueKey tells which of keys a unique-key violation of statement q
// reported as given (the engine's rendering of the new row's key: its
// values one after the other). It returns the key and its entry as MySQL
// writes it (the values joined by '-').
func pickUniqueKey(q string, keys []uniqueKey, given string) (string, string, bool) {
	if len(keys) == 0 {
		return "", "", false
	}
	rows, ok := insertedRows(q)
	if !ok {
		if len(keys) == 1 { // the only one it can be, rendered as the engine did
			return keys[0].name, given, true
		}
		return "", "", false
	}
	var name, entry string
	for _, k := range keys {
		for _, r := range rows {
			vals := make([]string, len(k.cols))
			complete := true
			for i, c := range k.cols {
				v, ok := r[c]
				vals[i], complete = v, complete && ok
			}
			if !complete || strings.Join(vals, "") != given {
				continue
			}
			if name != "" && name != k.name {
				return "", "", false // two keys render alike: cannot tell
			}
			name, entry = k.name, strings.Join(vals, "-")
		}
	}
	if name == "" && len(keys) == 1 {
		return keys[0].name, given, true
	}
	return name, entry, name != ""
}

// insertedRows reads the literal rows of an INSERT ... VALUES statement
// with a column list, as column (lower case) → value text.
func insertedRows(q string) ([]map[string]string, bool) {
	st, err := sqlparser.Parse(q)
	if err != nil {
		return nil, false
	}
	ins, ok := st.(*sqlparser.Insert)
	if !ok || len(ins.Columns) == 0 {
		return nil, false
	}
	vals, ok := ins.Rows.(*sqlparser.AliasedValues)
	if !ok {
		return nil, false
	}
	var out []map[string]string
	for _, tuple := range vals.Values {
		if len(tuple) != len(ins.Columns) {
			return nil, false
		}
		r := make(map[string]string, len(tuple))
		for i, ex := range tuple {
			if v, ok := ex.(*sqlparser.SQLVal); ok {
				r[ins.Columns[i].Lowered()] = string(v.Val)
			}
		}
		out = append(out, r)
	}
	return out, true
}

// writeTarget reads the first keywords of statement q: whether it may
// write (anything but a read, a transaction statement or SET), and, for a
// single-table INSERT, REPLACE, UPDATE or DELETE, the table it writes
// (lower case, "db.table" when qualified; known false when it could not be
// read).
func writeTarget(q string) (table string, writes, known bool) {
	s := skipComments(q)
	word := func() string {
		s = strings.TrimLeft(s, " \t\r\n")
		i := strings.IndexAny(s, " \t\r\n;(`,")
		if i < 0 {
			i = len(s)
		}
		w := strings.ToUpper(s[:i])
		s = s[i:]
		return w
	}
	verb := word()
	switch verb {
	case "SELECT", "SHOW", "SET", "DESCRIBE", "DESC", "EXPLAIN", "USE", "DO", "",
		"BEGIN", "START", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE":
		return "", false, false
	case "INSERT", "REPLACE", "UPDATE", "DELETE":
	default:
		return "", true, false
	}
	// Modifiers, then INTO (INSERT, REPLACE) or FROM (DELETE).
	for {
		rest := s
		w := word()
		switch {
		case w == "LOW_PRIORITY" || w == "DELAYED" || w == "HIGH_PRIORITY" || w == "IGNORE" || w == "QUICK":
			continue
		case w == "INTO" && (verb == "INSERT" || verb == "REPLACE"):
		case w == "FROM" && verb == "DELETE":
		case verb == "DELETE": // DELETE t1 FROM ...: several tables
			return "", true, false
		default:
			s = rest
		}
		break
	}
	table, ok := identifier(&s)
	if !ok {
		return "", true, false
	}
	next := strings.ToUpper(strings.TrimLeft(s, " \t\r\n"))
	switch verb {
	case "UPDATE": // one table: UPDATE t [[AS] a] [index hints] SET
		head, ok := beforeWord(next, "SET")
		if !ok || strings.Contains(head, ",") || strings.Contains(" "+head+" ", " JOIN ") {
			return "", true, false
		}
	case "DELETE":
		if strings.HasPrefix(next, ",") || strings.HasPrefix(next, "USING") || strings.Contains(next, " JOIN ") {
			return "", true, false
		}
	}
	return table, true, true
}

// beforeWord returns the text of upper-case s before the first standalone
// word w, with parenthesised parts (index hint lists) left out.
func beforeWord(s, w string) (string, bool) {
	var b strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case depth > 0:
		case strings.HasPrefix(s[i:], w) && (i == 0 || isSpace(s[i-1])) &&
			(i+len(w) == len(s) || isSpace(s[i+len(w)])):
			return b.String(), true
		default:
			b.WriteByte(c)
		}
	}
	return "", false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// identifier reads a table name, `quoted` or not, qualified by a database
// or not, from the start of *s.
func identifier(s *string) (string, bool) {
	var parts []string
	rest := strings.TrimLeft(*s, " \t\r\n")
	for {
		var part string
		if strings.HasPrefix(rest, "`") {
			end := strings.IndexByte(rest[1:], '`')
			if end < 0 {
				return "", false
			}
			part, rest = rest[1:1+end], rest[2+end:]
		} else {
			end := strings.IndexAny(rest, " \t\r\n;(,.")
			if end < 0 {
				end = len(rest)
			}
			part, rest = rest[:end], rest[end:]
		}
		if part == "" {
			return "", false
		}
		parts = append(parts, strings.ToLower(part))
		if !strings.HasPrefix(rest, ".") || len(parts) == 2 {
			break
		}
		rest = rest[1:]
	}
	*s = rest
	return strings.Join(parts, "."), true
}
