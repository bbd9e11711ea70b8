package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"

	"imlab/ref/server"
)

// backends is where the servers are for one run, and how to let go of them.
type backends struct {
	server.Backends
	Mode     string
	Kinds    map[string]string // part -> what serves it
	Warnings []string
	Embedded []string
	stop     func(context.Context) error
}

// startBackends resolves the backend flags. Only the external mode is
// available in this build: the MySQL DSN and the Redis address must point
// at running servers; the database is created if missing.
func startBackends(ctx context.Context, cmd *cobra.Command, defaults server.Backends) (*backends, error) {
	f := cmd.Flags()
	mode := fromEnv(f, "backends", envBackends)
	dsn := fromEnv(f, "mysql-dsn", envMySQLDSN)
	addr := fromEnv(f, "redis-addr", envRedisAddr)
	if dsn == "" {
		dsn = defaults.MySQLDSN
	}
	if addr == "" {
		addr = defaults.RedisAddr
	}
	switch mode {
	case "external", "auto":
	default:
		return nil, fmt.Errorf("--backends %q: this build runs external backends only (set --mysql-dsn and --redis-addr)", mode)
	}
	if dsn == "" || addr == "" {
		return nil, fmt.Errorf("external backends need --mysql-dsn (%s) and --redis-addr (%s)", envMySQLDSN, envRedisAddr)
	}
	if err := ensureDatabase(ctx, dsn); err != nil {
		return nil, err
	}
	return &backends{
		Backends: server.Backends{MySQLDSN: dsn, RedisAddr: addr},
		Mode:     "external",
		Kinds:    map[string]string{"mysql": "external", "redis": "external"},
		stop:     func(context.Context) error { return nil },
	}, nil
}

// ensureDatabase creates the DSN's database when it does not exist.
func ensureDatabase(ctx context.Context, dsn string) error {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("mysql dsn: %w", err)
	}
	if c.DBName == "" {
		return fmt.Errorf("mysql dsn %s names no database", redactDSN(dsn))
	}
	name := c.DBName
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+escapeIdent(name)+"` CHARACTER SET utf8mb4"); err != nil {
		return fmt.Errorf("mysql: create database %s: %w", name, err)
	}
	return nil
}

func escapeIdent(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '`' {
			out = append(out, '`')
		}
		out = append(out, s[i])
	}
	return string(out)
}
