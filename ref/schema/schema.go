// Package schema owns the MySQL schema of the reference server: versioned,
// idempotent .sql migrations embedded in the binary, and the code that
// applies them in order and records each in schema_migrations.
//
// It touches only DDL and the schema_migrations table; it must not read or
// write any application row.
package schema

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

//go:embed migrations/*.sql
var files embed.FS

// Migration is one versioned file.
type Migration struct {
	Version string // file name without .sql, e.g. "001_core"
	SQL     string
}

// Migrations lists the embedded migrations in order.
func Migrations() ([]Migration, error) {
	entries, err := fs.ReadDir(files, "migrations")
	if err != nil {
		return nil, fmt.Errorf("schema: read migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		b, err := files.ReadFile("migrations/" + e.Name())
		if err != nil {
			return nil, fmt.Errorf("schema: read %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: strings.TrimSuffix(e.Name(), ".sql"), SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Statements splits a migration into statements: they end with ';' at the
// end of a line. Comment-only chunks are dropped.
func Statements(src string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") && cur.Len() == 0 {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			stmt := strings.TrimSpace(cur.String())
			stmt = strings.TrimSuffix(stmt, ";")
			if stmt != "" {
				out = append(out, stmt)
			}
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

// Migrate applies every migration not yet recorded. It is safe to run
// concurrently from several processes (statements are idempotent: CREATE
// ... IF NOT EXISTS, and an ADD KEY whose "Duplicate key name" says that
// another process added it first) and to re-run. It returns the versions
// it applied.
func Migrate(ctx context.Context, db *sql.DB) ([]string, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
  version    VARCHAR(128) NOT NULL,
  applied_at DATETIME(3)  NOT NULL,
  PRIMARY KEY (version)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`); err != nil {
		return nil, fmt.Errorf("schema: create schema_migrations: %w", err)
	}
	migs, err := Migrations()
	if err != nil {
		return nil, err
	}
	var applied []string
	for _, m := range migs {
		var n int
		if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
			return applied, fmt.Errorf("schema: check %s: %w", m.Version, err)
		}
		if n > 0 {
			continue
		}
		for i, stmt := range Statements(m.SQL) {
			if _, err := db.ExecContext(ctx, stmt); err != nil && !duplicateKeyName(err) {
				return applied, fmt.Errorf("schema: %s statement %d: %w", m.Version, i+1, err)
			}
		}
		if _, err := db.ExecContext(ctx, `INSERT IGNORE INTO schema_migrations (version, applied_at) VALUES (?, ?)`,
			m.Version, time.Now().UTC()); err != nil {
			return applied, fmt.Errorf("schema: record %s: %w", m.Version, err)
		}
		applied = append(applied, m.Version)
	}
	return applied, nil
}

// duplicateKeyName reports MySQL's error 1061 (ER_DUP_KEYNAME), or the
// embedded engine's message for it (go-mysql-server sends it as 1105): an
// index another process added first.
func duplicateKeyName(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1061 {
		return true
	}
	return strings.Contains(err.Error(), "Duplicate key name")
}
