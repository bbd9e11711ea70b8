// Package testenv gives integration tests their own isolated pieces of the
// real servers on this machine: a fresh MySQL database with the schema
// applied, and a Redis key prefix, each removed when the test ends, so that
// tests can run twice in a row or in parallel.
//
// Addresses come from IMLAB_TEST_MYSQL (a go-sql-driver DSN without a
// database name, default root@tcp(127.0.0.1:3306)/) and IMLAB_TEST_REDIS
// (default 127.0.0.1:6379). When a server is unreachable the test is
// skipped, except under CI=true, where it fails: CI must never pass by
// skipping.
//
// It is for tests only and must not be imported by non-test code.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"imlab/ref/rkeys"
	"imlab/ref/schema"
)

// MySQLBaseDSN is the server DSN without a database.
func MySQLBaseDSN() string {
	if v := os.Getenv("IMLAB_TEST_MYSQL"); v != "" {
		return v
	}
	return "root@tcp(127.0.0.1:3306)/"
}

// RedisAddr is the test Redis address.
func RedisAddr() string {
	if v := os.Getenv("IMLAB_TEST_REDIS"); v != "" {
		return v
	}
	return "127.0.0.1:6379"
}

func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("testenv: %s unavailable under CI: %v", what, err)
	}
	t.Skipf("testenv: %s unavailable: %v", what, err)
}

// RandomName returns prefix + 12 random hex characters.
func RandomName(prefix string) string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return prefix + hex.EncodeToString(b[:])
}

// DSN returns base with the database name and the options the server needs
// (parseTime, UTC, multi-row interpolation).
func DSN(base, dbName string) (string, error) {
	cfg, err := mysql.ParseDSN(base)
	if err != nil {
		return "", fmt.Errorf("testenv: parse dsn: %w", err)
	}
	cfg.DBName = dbName
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	return cfg.FormatDSN(), nil
}

// MySQL is an isolated database.
type MySQL struct {
	DB   *sql.DB
	Name string
	DSN  string // full DSN of the database
}

// NewMySQL creates a database named imlab_t_<random>, applies the schema,
// and drops it when the test ends.
func NewMySQL(t testing.TB) *MySQL {
	t.Helper()
	return NewMySQLNamed(t, "imlab_t_")
}

// NewMySQLNamed is NewMySQL with the database named prefix + 12 random hex
// characters, so that the databases of one group of tests are told apart
// on a shared server (a leftover one says which tests left it).
func NewMySQLNamed(t testing.TB, prefix string) *MySQL {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adminDSN, err := DSN(MySQLBaseDSN(), "")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.PingContext(ctx); err != nil {
		admin.Close()
		unavailable(t, "mysql", err)
		return nil
	}
	name := RandomName(prefix)
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4"); err != nil {
		admin.Close()
		t.Fatalf("testenv: create database: %v", err)
	}
	dsn, err := DSN(MySQLBaseDSN(), name)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	t.Cleanup(func() {
		db.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			t.Errorf("testenv: drop database %s: %v", name, err)
		}
		admin.Close()
	})
	if _, err := schema.Migrate(ctx, db); err != nil {
		t.Fatalf("testenv: migrate: %v", err)
	}
	return &MySQL{DB: db, Name: name, DSN: dsn}
}

// ShortLockWait opens another pool on m's database whose sessions wait at
// most one second for a row lock (innodb_lock_wait_timeout=1: error 1205
// after that), closed when the test ends.
func (m *MySQL) ShortLockWait(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", m.DSN+"&innodb_lock_wait_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// HoldRowLock runs query (a locking read, SELECT … FOR UPDATE) in a
// transaction of m.DB and rolls it back after hold; the channel is closed
// when the locks are released.
func (m *MySQL) HoldRowLock(t testing.TB, query string, hold time.Duration) <-chan struct{} {
	t.Helper()
	tx, err := m.DB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := tx.Query(query)
	if err != nil {
		tx.Rollback()
		t.Fatal(err)
	}
	rows.Close()
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(hold)
		tx.Rollback()
	}()
	return released
}

// Redis is an isolated key namespace on the shared Redis server.
type Redis struct {
	Client *redis.Client
	Keys   rkeys.Keys
	Addr   string
}

// NewRedis returns a client and a random key prefix; every key under the
// prefix is deleted when the test ends. Tests must never FLUSHALL the shared
// server: use Wipe, which deletes this test's keys only.
func NewRedis(t testing.TB) *Redis {
	t.Helper()
	addr := RedisAddr()
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 64})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		c.Close()
		unavailable(t, "redis", err)
		return nil
	}
	r := &Redis{Client: c, Keys: rkeys.Keys{Prefix: RandomName("imlab_t_") + ":"}, Addr: addr}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Wipe(ctx); err != nil {
			t.Errorf("testenv: redis cleanup: %v", err)
		}
		c.Close()
	})
	return r
}

// Wipe deletes every key under this test's prefix: the test's FLUSHALL.
func (r *Redis) Wipe(ctx context.Context) error {
	if !strings.HasSuffix(r.Keys.Prefix, ":") || len(r.Keys.Prefix) < 8 {
		return fmt.Errorf("testenv: refusing to wipe with prefix %q", r.Keys.Prefix)
	}
	iter := r.Client.Scan(ctx, 0, r.Keys.Pattern(), 1000).Iterator()
	var batch []string
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) >= 500 {
			if err := r.Client.Del(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return r.Client.Del(ctx, batch...).Err()
	}
	return nil
}
