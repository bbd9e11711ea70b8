package runner

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"testing"
	"time"

	"imlab/internal/testenv"
	"imlab/result"
	"imlab/runner/proc"
	"imlab/scenario"
)

// TestFreshDatabaseLeavesTheDSNsAlone: a run on a database of its own
// (FreshDatabase, the default) must not create the DSN's database on the
// way, and drops its own at the end.
func TestFreshDatabaseLeavesTheDSNsAlone(t *testing.T) {
	my := testenv.NewMySQL(t) // skips (or fails under CI) without MariaDB
	rd := testenv.NewRedis(t)
	name := testenv.RandomName("imlab_t_nocreate_")
	dsn, err := testenv.DSN(testenv.MySQLBaseDSN(), name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = my.DB.Exec("DROP DATABASE IF EXISTS `" + name + "`") })
	cfg := DefaultConfig(t.TempDir())
	cfg.Mode = "external"
	cfg.MySQLDSN, cfg.RedisAddr, cfg.RedisPrefix = dsn, rd.Addr, rd.Keys.Prefix
	r := &run{cfg: cfg, f: &scenario.File{}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), id: proc.RandomID(), res: &result.Result{}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.startBackends(ctx)
	own := proc.DatabaseOf(r.id)
	t.Cleanup(func() { _, _ = my.DB.Exec("DROP DATABASE IF EXISTS `" + own + "`") })
	if err != nil {
		t.Fatal(err)
	}
	exists := func(db string) bool {
		var got string
		err := my.DB.QueryRow("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", db).Scan(&got)
		if err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		return err == nil
	}
	if !exists(own) {
		t.Fatalf("the run's own database %s was not created", own)
	}
	if want := own + " (one per run, in place of the DSN's database " + name + ")"; r.database != want {
		t.Errorf("the run says its database is %q, want %q", r.database, want)
	}
	if err := r.stopAll(); err != nil {
		t.Fatal(err)
	}
	if exists(name) {
		t.Errorf("the DSN's database %s was created and left behind", name)
	}
	if exists(own) {
		t.Errorf("the run's database %s was not dropped", own)
	}
}

// TestDatabaseSetting: the settings say which database a run used, and
// that it replaced the DSN's.
func TestDatabaseSetting(t *testing.T) {
	dsn := "root@tcp(127.0.0.1:3306)/imlab"
	if got, want := databaseSetting(dsn, true, "imlab_scn_x"), "imlab_scn_x (one per run, in place of the DSN's database imlab)"; got != want {
		t.Errorf("fresh: %q, want %q", got, want)
	}
	if got, want := databaseSetting(dsn, false, "imlab_scn_x"), "imlab (the DSN's own)"; got != want {
		t.Errorf("not fresh: %q, want %q", got, want)
	}
}
