package gms

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

func TestClassify(t *testing.T) {
	cases := map[string]stmtKind{
		"BEGIN":                           stmtBegin,
		"  begin;":                        stmtBegin,
		"START TRANSACTION":               stmtBegin,
		"start transaction read only":     stmtBegin,
		"/* x */ START\tTRANSACTION":      stmtBegin,
		"-- note\nBEGIN":                  stmtBegin,
		"COMMIT":                          stmtCommit,
		"commit work":                     stmtCommit,
		"ROLLBACK":                        stmtRollback,
		"ROLLBACK WORK":                   stmtRollback,
		"ROLLBACK TO SAVEPOINT s1":        stmtOther,
		"rollback work to s1":             stmtOther,
		"SELECT 1":                        stmtOther,
		"START SLAVE":                     stmtOther,
		"INSERT INTO begin_t VALUES (1)":  stmtOther,
		"/* unterminated":                 stmtOther,
		"":                                stmtOther,
		"SET TRANSACTION ISOLATION LEVEL": stmtOther,
	}
	for q, want := range cases {
		if got := classify(q); got != want {
			t.Errorf("classify(%q) = %d, want %d", q, got, want)
		}
	}
}

// embeddedDSN starts an embedded MySQL for the test, stopped when it ends,
// and returns the DSN of its database as compose writes it.
func embeddedDSN(t *testing.T, lockWait time.Duration) string {
	t.Helper()
	srv, err := Start("imlab", lockWait, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	c := mysql.NewConfig()
	c.User, c.Net, c.Addr, c.DBName = "root", "tcp", srv.Addr(), "imlab"
	c.ParseTime, c.Loc, c.InterpolateParams = true, time.UTC, true
	return c.FormatDSN()
}

func embeddedDB(t *testing.T, lockWait time.Duration) (*sql.DB, string) {
	t.Helper()
	dsn := embeddedDSN(t, lockWait)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec("CREATE TABLE c (id BIGINT NOT NULL PRIMARY KEY, v BIGINT NOT NULL, UNIQUE KEY uk_v (v))"); err != nil {
		t.Fatal(err)
	}
	return db, dsn
}

// The memory engine alone loses concurrent commits; through the serializing
// handler every committed row and every locked increment survives.
func TestEmbeddedSerializesTransactions(t *testing.T) {
	db, _ := embeddedDB(t, 10*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const workers, perWorker = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for g := 0; g < workers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				err := func() error {
					tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
					if err != nil {
						return err
					}
					defer tx.Rollback()
					id := int64(g*1000 + i + 10)
					if _, err := tx.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (?, ?)", id, id); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (1, -1) ON DUPLICATE KEY UPDATE id = id"); err != nil {
						return err
					}
					var n int64
					if err := tx.QueryRowContext(ctx, "SELECT v FROM c WHERE id = 1 FOR UPDATE").Scan(&n); err != nil {
						return err
					}
					if _, err := tx.ExecContext(ctx, "UPDATE c SET v = ? WHERE id = 1", n-1); err != nil {
						return err
					}
					return tx.Commit()
				}()
				if err != nil {
					errs <- err
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("transaction: %v", err)
	}
	var rows, counter int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM c WHERE id <> 1").Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRowContext(ctx, "SELECT v FROM c WHERE id = 1").Scan(&counter); err != nil {
		t.Fatal(err)
	}
	if rows != workers*perWorker || counter != -1-workers*perWorker {
		t.Fatalf("rows = %d (want %d), counter = %d (want %d)", rows, workers*perWorker, counter, -1-workers*perWorker)
	}
}

func TestEmbeddedLockWaitTimeoutAndRelease(t *testing.T) {
	db, dsn := embeddedDB(t, 300*time.Millisecond)
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = db.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (2, 2)")
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 {
		t.Fatalf("second writer got %v, want error 1205", err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("lock wait timeout after %s, want about 300ms", waited)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// Released on ROLLBACK: the next writer goes through and the rolled back
	// row is gone.
	if _, err := db.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (2, 2)"); err != nil {
		t.Fatalf("after rollback: %v", err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM c").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows = %d, %v; want 1", n, err)
	}

	// A client that disappears inside a transaction releases the lock.
	other, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (3, 3)"); err == nil {
		t.Fatal("writer got through while another client held a transaction")
	}
	conn.Close()
	other.Close() // closes the connection inside its transaction
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := db.ExecContext(ctx, "INSERT INTO c (id, v) VALUES (3, 3)")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock not released after the client closed: %v", err)
		}
	}
}

// Both duplicate-key collisions surface as error 1062. go-mysql-server's
// own message names no key; the serialising handler names it as MySQL 8
// does ("for key 'c.PRIMARY'", TestEmbeddedDuplicateKeyNamesTheKey).
func TestEmbeddedDuplicateKeyIs1062(t *testing.T) {
	db, _ := embeddedDB(t, time.Second)
	if _, err := db.Exec("INSERT INTO c (id, v) VALUES (1, 1)"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"INSERT INTO c (id, v) VALUES (1, 2)", "INSERT INTO c (id, v) VALUES (2, 1)"} {
		_, err := db.Exec(q)
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != 1062 {
			t.Fatalf("%s: got %v, want 1062", q, err)
		}
		t.Logf("%s: %s", q, me.Message)
	}
}
